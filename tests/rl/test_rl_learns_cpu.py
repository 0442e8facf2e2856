"""What makes GRPO learn and how its result is read: the step count asked for is the count run, an empty step
does not move the weights, the on-policy loss replaces the old-log-prob pass only where it is exact, the
pass-rate filter grades with RL's format gate, the reward's format credit, the health rule that stops a run
that is not learning, and the paper's measure (avg@k, its interval, the pass@k curve) against plain loops."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from e2c.core.errors import UserError
from e2c.core.stats import mean_interval
from e2c.eval.metrics import pass_at_k_curve
from e2c.rl import health
from e2c.rl.launch import LOSS_MODE_KEY, epochs_for_steps, on_policy_overrides
from e2c.rl.settings import ON_POLICY_LOSS

CHAIN_OK = "plan</EXPLORATION>\n<EXECUTION>2+2=4, so \\boxed{{{ans}}}</EXECUTION>"


# ------------------------------------------------------------------------------------ steps and epochs
def _parquet(path: Path, rows: int) -> str:
    import pandas as pd

    pd.DataFrame({"x": list(range(rows))}).to_parquet(path)
    return str(path)


def _data_cfg(files: list[str], batch: int) -> object:
    return OmegaConf.create({"data": {"train_files": files, "train_batch_size": batch}})


@pytest.mark.parametrize(
    ("rows", "batch", "steps", "epochs"),
    [(15, 4, 45, 15), (15, 4, 6, 2), (15, 4, 3, 1), (16, 4, 4, 1), (16, 4, 5, 2), (100, 2, 40, 1)],
)
def test_epochs_give_the_steps_asked_for(
    tmp_path: Path, rows: int, batch: int, steps: int, epochs: int
) -> None:
    cfg = _data_cfg([_parquet(tmp_path / "rl.parquet", rows)], batch)
    got = epochs_for_steps(cfg, steps)
    assert got == epochs
    # verl's loop: epochs x (rows // batch) steps are available, and at least the steps asked for.
    assert got * (rows // batch) >= steps > (got - 1) * (rows // batch)


def test_epochs_count_every_training_file(tmp_path: Path) -> None:
    files = [_parquet(tmp_path / "a.parquet", 3), _parquet(tmp_path / "b.parquet", 5)]
    assert epochs_for_steps(_data_cfg(files, 4), 8) == 4  # 8 rows // 4 = 2 steps an epoch


def test_a_step_count_the_data_cannot_give_is_one_line(tmp_path: Path) -> None:
    cfg = _data_cfg([_parquet(tmp_path / "rl.parquet", 3)], 4)
    with pytest.raises(
        UserError, match=r"--steps 10: the training data has 3 prompt\(s\), fewer than one batch"
    ):
        epochs_for_steps(cfg, 10)


def test_no_steps_asked_leaves_the_epochs(tmp_path: Path) -> None:
    assert epochs_for_steps(_data_cfg([], 4), None) is None


# ------------------------------------------------------------------------------------ on-policy loss
def _ppo_cfg(batch: int = 4, mini: int = 4, epochs: int = 1, mode: str = "vanilla", **algo: object) -> object:
    return OmegaConf.create(
        {
            "data": {"train_batch_size": batch},
            "actor_rollout_ref": {
                "actor": {
                    "ppo_epochs": epochs,
                    "ppo_mini_batch_size": mini,
                    "policy_loss": {"loss_mode": mode},
                }
            },
            "algorithm": {
                "use_kl_in_reward": False,
                "rollout_correction": {"bypass_mode": False, "rollout_is": None, "rollout_rs": None},
                **algo,
            },
        }
    )


def test_one_update_per_batch_takes_the_on_policy_loss() -> None:
    assert on_policy_overrides(_ppo_cfg(), []) == {LOSS_MODE_KEY: ON_POLICY_LOSS}


@pytest.mark.parametrize(
    ("cfg", "user"),
    [
        (_ppo_cfg(batch=8, mini=4), []),  # two mini-batches: the second is off-policy
        (_ppo_cfg(epochs=2), []),  # a second epoch is off-policy
        (_ppo_cfg(mode="gspo"), []),  # a loss the config chose
        (_ppo_cfg(), [f"{LOSS_MODE_KEY}=vanilla"]),  # a loss the user named
        (_ppo_cfg(use_kl_in_reward=True), []),  # reads the old log-probs
        (
            _ppo_cfg(rollout_correction={"bypass_mode": True, "rollout_is": None, "rollout_rs": None}),
            [],
        ),
        (
            _ppo_cfg(rollout_correction={"bypass_mode": False, "rollout_is": "token", "rollout_rs": None}),
            [],
        ),
    ],
)
def test_the_old_log_prob_pass_stays_where_something_needs_it(cfg: object, user: list[str]) -> None:
    assert on_policy_overrides(cfg, user) == {}


def test_the_on_policy_loss_where_it_is_not_exact_is_refused() -> None:
    with pytest.raises(UserError, match="exact only with one PPO epoch over one mini-batch"):
        on_policy_overrides(_ppo_cfg(batch=8, mini=4, mode=ON_POLICY_LOSS), [])


def test_the_on_policy_loss_is_vanilla_ppo_at_ratio_one() -> None:
    import torch
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, get_policy_loss_fn

    import e2c.rl.trainer  # noqa: F401 (registers the loss)

    fn = get_policy_loss_fn(ON_POLICY_LOSS)
    torch.manual_seed(0)
    logits = torch.randn(3, 5, requires_grad=True)
    lp = torch.log_softmax(logits, -1)
    adv = torch.randn(3, 5)
    mask = torch.ones(3, 5)
    stale = lp.detach() + 0.5  # what the rollout logged: ignored
    cfg = SimpleNamespace(
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
        clip_ratio_c=3.0,
        global_batch_info={"dp_size": 1, "batch_num_tokens": 15},
        get=lambda k, d=None: d,
    )
    ours = fn(stale, lp, adv, mask, "token-mean", cfg)
    ref = compute_policy_loss_vanilla(lp.detach(), lp, adv, mask, "token-mean", cfg)
    (g1,) = torch.autograd.grad(ours[0], logits, retain_graph=True)
    (g2,) = torch.autograd.grad(ref[0], logits)
    assert torch.allclose(g1, g2)
    # At ratio 1 the loss is -mean(A), and its gradient the plain policy gradient -mean(A * grad log p).
    (g3,) = torch.autograd.grad(-(adv * torch.log_softmax(logits, -1)).mean(), logits)
    assert torch.allclose(g1, g3, atol=1e-6)


# ------------------------------------------------------------------------------------ empty steps
def _trainer(signal: bool, entropy: float = 0.0, kl: bool = False) -> object:
    from e2c.rl.trainer import E2CTrainer

    t = E2CTrainer.__new__(E2CTrainer)
    t.config = OmegaConf.create(
        {"actor_rollout_ref": {"actor": {"entropy_coeff": entropy, "use_kl_loss": kl}}}
    )
    t._e2c_signal = signal
    t.global_steps = 3
    return t


@pytest.mark.parametrize(
    ("signal", "entropy", "kl", "updated"),
    [
        (True, 0.0, False, True),
        (False, 0.0, False, False),
        (False, 0.001, False, True),
        (False, 0.0, True, True),
    ],
)
def test_a_step_with_nothing_to_learn_does_not_update(
    monkeypatch: pytest.MonkeyPatch, signal: bool, entropy: float, kl: bool, updated: bool
) -> None:
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    calls = []
    monkeypatch.setattr(
        PPOTrainerSync, "_update_actor", lambda self, batch, metrics: calls.append(batch) or batch
    )
    metrics: dict = {}
    batch = object()
    assert _trainer(signal, entropy, kl)._update_actor(batch, metrics) is batch
    assert (calls == [batch]) is updated
    assert metrics[health.UPDATE_SKIPPED] == float(not updated)


@pytest.mark.parametrize(
    ("signal", "hf", "synced"),
    [(True, True, True), (False, True, False), (False, False, True)],
)
def test_a_skipped_update_sends_no_weights_to_the_hf_rollout(
    monkeypatch: pytest.MonkeyPatch, signal: bool, hf: bool, synced: bool
) -> None:
    """After a skipped update the hf servers are told the step instead of receiving the same weights again;
    an update, or any other rollout (vLLM's replicas on GPUs), syncs as verl does."""
    import ray
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from e2c.verl_cpu.hf_verl import HFReplica

    told: list[int] = []

    class Server:
        class weights_unchanged:  # a ray actor method's shape: .remote(...)
            @staticmethod
            def remote(step: int) -> int:
                told.append(step)
                return step

    replica = HFReplica.__new__(HFReplica) if hf else SimpleNamespace()
    replica.servers = [Server()]
    syncs: list[int] = []
    monkeypatch.setattr(PPOTrainerSync, "_update_actor", lambda self, batch, metrics: batch)
    monkeypatch.setattr(PPOTrainerSync, "on_step_end", lambda self: syncs.append(self.global_steps))
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    t = _trainer(signal)
    t.checkpoint_manager = SimpleNamespace(replicas=[replica])
    t.timing_raw = {}
    t.on_step_begin()
    t._update_actor(object(), {})
    t.on_step_end()
    assert (syncs == [3]) is synced
    assert (told == [3]) is (not synced)
    # the next step starts without the last one's skip
    t.on_step_begin()
    assert t._e2c_update_skipped is False


def test_the_update_runs_between_holding_and_releasing_the_actors_freed_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker holds its freed pages for the update and gives them back after it, even when it fails."""
    import ray
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from e2c.rl.memory import hold_freed_pages, release_freed_pages

    calls: list[str] = []

    class Worker:
        def __init__(self, name: str) -> None:
            self.name = name
            self.__ray_call__ = SimpleNamespace(remote=lambda fn: calls.append(f"{self.name}:{fn.__name__}"))

    def update(self, batch, metrics):
        calls.append("update")
        if batch == "bad":
            raise RuntimeError("update failed")
        return batch

    monkeypatch.setattr(PPOTrainerSync, "_update_actor", update)
    monkeypatch.setattr(PPOTrainerSync, "on_step_end", lambda self: calls.append("sync"))
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    t = _trainer(True)
    t.actor_rollout_wg = SimpleNamespace(workers=[Worker("a"), Worker("b")])
    t.timing_raw = {}
    t.on_step_begin()
    assert t._update_actor("ok", {}) == "ok"
    t.on_step_end()
    t.on_step_end()  # released once
    hold, release = hold_freed_pages.__name__, release_freed_pages.__name__
    # held through the update and the weight sync, given back before the next rollout
    assert calls == [f"a:{hold}", f"b:{hold}", "update", "sync", f"a:{release}", f"b:{release}", "sync"]
    calls.clear()
    with pytest.raises(RuntimeError, match="update failed"):
        t._update_actor("bad", {})
    assert calls[-2:] == [f"a:{release}", f"b:{release}"]
    # a skipped update touches no worker
    calls.clear()
    idle = _trainer(False)
    idle.actor_rollout_wg = t.actor_rollout_wg
    assert idle._update_actor("ok", {}) == "ok" and calls == []
    # e2c.hold_freed_pages=false: the update alone
    off = _trainer(True)
    off.config.e2c = {"hold_freed_pages": False}
    off.actor_rollout_wg, off.timing_raw = t.actor_rollout_wg, {}
    assert off._update_actor("ok", {}) == "ok"
    off.on_step_end()
    assert calls == ["update", "sync"]


# ------------------------------------------------------------------------------------ reward and filter
@pytest.mark.parametrize(
    ("text", "credit", "gate", "score"),
    [
        (CHAIN_OK.format(ans=4), 0.1, True, 1.0),  # right, well-formed
        (CHAIN_OK.format(ans=5), 0.1, True, 0.1),  # wrong, well-formed: the credit
        (CHAIN_OK.format(ans=5), 0.0, True, 0.0),  # the paper's reward
        ("no tags at all \\boxed{5}", 0.1, True, 0.0),  # malformed and wrong
        ("no tags at all \\boxed{4}", 0.1, True, 0.0),  # right but malformed: gated
        ("no tags at all \\boxed{4}", 0.1, False, 1.0),  # right, no gate: the paper's
    ],
)
def test_format_credit_is_tinyzero_shape(text: str, credit: float, gate: bool, score: float) -> None:
    from e2c.rewards.verl_score import compute_score

    res = compute_score(
        "synthetic", text, "4", {"format_credit": credit, "require_format": gate, "prefilled": True}
    )
    assert res["score"] == pytest.approx(score)


@pytest.mark.parametrize(
    ("shape", "rewards"),
    [
        ("correct", [1.0, 1.0, 0.0]),
        ("credit", [1.0, 1.0, 0.1]),
        ("gate", [1.0, 0.0, 0.1]),
        ("levels", [1.0, 0.5, 0.1]),
    ],
)
def test_the_filter_grades_with_the_rl_reward(shape: str, rewards: list[float]) -> None:
    """Each sample's reward is the one RL's reward function gives under the run's shape; its correctness is
    the evaluation's (the answer, whatever the chain's form), under every shape."""
    from e2c.rewards.shape import reward_shape
    from e2c.rewards.verl_score import compute_score
    from e2c.rl.passrate.filter import grade_samples

    row = {
        "data_source": "synthetic",
        "reward_model": {"ground_truth": "4"},
        "extra_info": {"prefilled": True},
    }
    texts = [CHAIN_OK.format(ans=4), "no tags at all \\boxed{4}", CHAIN_OK.format(ans=5)]
    kwargs = reward_shape(shape).reward_kwargs()
    got = grade_samples(row, texts, kwargs)
    assert [c for c, _ in got] == [1, 1, 0]
    assert [r for _, r in got] == pytest.approx(rewards)
    # the same numbers as the reward function verl calls, with the kwargs bound the way verl binds them
    direct = [compute_score("synthetic", t, "4", {"prefilled": True}, **kwargs)["score"] for t in texts]
    assert [r for _, r in got] == pytest.approx(direct)


def test_the_filter_refuses_to_resume_samples_graded_another_way(tmp_path: Path) -> None:
    import json

    from e2c.rl.passrate.config import SAMPLE_FIELDS
    from e2c.rl.passrate.samples import check_resume

    before = dict.fromkeys(SAMPLE_FIELDS, 1)
    before["reward_shape"] = "correct"
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"settings": before}) + "\n")
    check_resume(path, dict(before))  # the same grading: resumed
    with pytest.raises(UserError, match="reward_shape"):
        check_resume(path, {**before, "reward_shape": "gate"})
    # a file from before rewards were recorded holds no rewards: refused, not resumed
    old = {k: v for k, v in before.items() if k not in ("reward_shape", "plan_bonus")}
    path.write_text(json.dumps({"settings": old}) + "\n")
    with pytest.raises(UserError, match="reward_shape"):
        check_resume(path, dict(before))


# ------------------------------------------------------------------------------------ health stop
def test_stop_reason_against_a_plain_rule() -> None:
    rows = [{health.ZERO_VAR: 0.95}, {health.UPDATE_SKIPPED: 1.0}, {health.ZERO_VAR: 0.5}]
    assert health.stop_reason(rows, 2) is None  # the last step had signal
    assert health.stop_reason(rows[:2], 2).startswith("no signal")
    assert health.stop_reason(rows[:2], 3) is None  # not enough steps yet
    assert health.stop_reason(rows, 0) is None  # off
    wf = [{health.WELL_FORMED: v} for v in (0.5, 0.5, 0.3, 0.26)]
    assert health.stop_reason(wf, 2) is None  # 0.28 is not below half of 0.5
    assert health.stop_reason([*wf, {health.WELL_FORMED: 0.1}], 2).startswith("format collapsing")


# ------------------------------------------------------------------------------------ the paper's measure
def _pass_at_k_brute(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (c right) that hold a right one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=6), st.integers(6, 7))
def test_pass_at_k_curve_matches_enumeration(corrects: list[int], n: int) -> None:
    counts = [(n, c) for c in corrects]
    curve = pass_at_k_curve(counts)
    assert sorted(curve) == list(range(1, n + 1))
    for k, v in curve.items():
        assert v == pytest.approx(sum(_pass_at_k_brute(n, c, k) for _, c in counts) / len(counts))
    # pass@1 is avg@n: the mean over problems of each problem's share of right samples.
    assert curve[1] == pytest.approx(sum(c / n for c in corrects) / len(corrects))
    assert all(curve[k] <= curve[k + 1] + 1e-12 for k in range(1, n))


def test_pass_at_k_curve_stops_at_the_fewest_samples() -> None:
    assert sorted(pass_at_k_curve([(4, 1), (2, 1)])) == [1, 2]
    assert pass_at_k_curve([]) == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=2, max_size=50))
def test_mean_interval_matches_a_plain_loop(scores: list[float]) -> None:
    n = len(scores)
    mean = 0.0
    for x in scores:
        mean += x / n
    ss = 0.0
    for x in scores:
        ss += (x - mean) ** 2
    se = math.sqrt(ss / (n - 1) / n)
    r = mean_interval(scores)
    assert r["mean"] == pytest.approx(mean) and r["se"] == pytest.approx(se)
    lo, hi = r["ci95"]
    assert 0.0 <= lo <= r["mean"] <= hi <= 1.0
    assert lo == pytest.approx(max(0.0, mean - 1.959963984540054 * se))
