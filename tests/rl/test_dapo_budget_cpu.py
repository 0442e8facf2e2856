"""DAPO's refill budget (e2c.rl.trainer.BudgetedReplayBuffer) never leaves a step waiting for refills that
nothing will dispatch: once the budget is spent, filtering stops and the batch's shortfall is dispatched."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

trainer = pytest.importorskip("e2c.rl.trainer")


def _buffer(
    monkeypatch: pytest.MonkeyPatch, identical: set[str], *, budget: int, dispatched: int, batch: int
):
    """A buffer in the state verl's sample loop leaves it in (no TransferQueue behind it): ``identical``
    are the finished groups verl's own filter would evict."""
    buf = object.__new__(trainer.BudgetedReplayBuffer)
    buf.budget_prompts, buf.gen_batch_size = budget, 1
    buf._e2c_dispatched, buf._e2c_exhausted, buf._e2c_batch_size = dispatched, False, batch
    buf.finished_keys, buf.failure_keys = defaultdict(set), defaultdict(set)
    buf.pending_keys, buf.running_keys = defaultdict(set), defaultdict(set)
    buf.refills = []
    buf._e2c_refill = buf.refills.append
    monkeypatch.setattr(
        trainer.ReplayBuffer,
        "_dapo_filtered_keys",
        lambda self, pid: (set(identical), Counter({0.0: len(identical)})),
    )
    return buf


def test_within_the_budget_verls_filter_stands_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = _buffer(monkeypatch, {"a", "b"}, budget=8, dispatched=4, batch=4)
    buf.finished_keys["train"] = {"a", "b"}
    assert buf._dapo_filtered_keys("train")[0] == {"a", "b"} and buf.refills == [] and not buf._e2c_exhausted


def test_a_spent_budget_keeps_the_groups_and_dispatches_what_the_batch_lacks_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The state .ci/run once hung in: two identical groups at hand, nothing in flight, a batch of four,
    the budget spent. Nothing is filtered, and two prompts go out past the budget."""
    buf = _buffer(monkeypatch, {"a", "b"}, budget=8, dispatched=8, batch=4)
    buf.finished_keys["train"] = {"a", "b"}
    assert buf._dapo_filtered_keys("train") == (set(), Counter())
    assert buf.refills == [2] and buf._e2c_dispatched == 10 and buf._e2c_exhausted
    # the next poll sees them in flight: nothing more goes out
    buf.pending_keys["train"] = {"c", "d"}
    assert buf._dapo_filtered_keys("train") == (set(), Counter()) and buf.refills == [2]


def test_a_spent_budget_with_mixed_groups_still_fills_the_batch_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last groups had mixed accuracy (nothing to filter) but earlier ones were evicted: the batch is
    still short, and verl has no refill credit left to make it up."""
    buf = _buffer(monkeypatch, set(), budget=8, dispatched=9, batch=4)
    buf.finished_keys["train"] = {"x"}
    buf.running_keys["train"] = {"y"}
    buf.gen_batch_size = 2
    assert buf._dapo_filtered_keys("train") == (set(), Counter())
    assert buf.refills == [2] and not buf._e2c_exhausted  # 4 - 1 at hand - 1 in flight, in whole batches of 2


def test_the_trainer_polls_for_finished_rollouts_faster_than_verls_default_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """verl's sync buffer defaults to a look every 2 s, which rounded every step's generation up to the next
    multiple of 2 s; the E2C trainer's buffer looks every REPLAY_POLL_S."""
    from omegaconf import OmegaConf

    built = object.__new__(trainer.ReplayBuffer)
    built.poll_interval, built.filter_groups_metric = 2.0, None
    monkeypatch.setattr(trainer.PPOTrainerSync, "_build_replay_buffer", lambda self: built)
    tr = object.__new__(trainer.E2CTrainer)
    tr.config = OmegaConf.create({"trainer": {"v1": {"sync": {}}}, "e2c": {}})
    monkeypatch.setattr(type(tr), "e2c", property(lambda self: type("S", (), {"max_num_gen_batches": 0})()))
    buf = tr._build_replay_buffer()
    assert buf is built and buf.poll_interval == trainer.REPLAY_POLL_S < 2.0
    assert tr.trainer_mode == "sync" and type(buf) is trainer.ReplayBuffer
