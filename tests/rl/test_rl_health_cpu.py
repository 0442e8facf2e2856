"""RL health metrics (e2c.rl.health): pure functions against plain loops and hand computations; the run
table and the verdict on files written here. No verl trainer, no ray."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.launch.weights import checkpoint_movement, weight_movement
from e2c.rl.health import (
    BF16_CHANGED_AFTER,
    REL_L2_AFTER,
    batch_health,
    format_table,
    group_of,
    health_table,
    reward_components,
    sampled_entropy,
    signal_shares,
    signal_verdict,
    truncated_flags,
    zero_variance_group_share,
)
from e2c.rl.health import cli as health_cli

# ------------------------------------------------------------------------------------------ zero variance
rewards_and_groups = st.lists(
    st.tuples(st.sampled_from([0.0, 0.5, 1.0, -0.25]), st.integers(0, 5)), min_size=1, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(rewards_and_groups)
def test_zero_variance_share_matches_a_loop_cpu(pairs: list[tuple[float, int]]) -> None:
    rewards = [r for r, _ in pairs]
    groups = [g for _, g in pairs]
    flat = total = 0
    for g in sorted(set(groups)):
        vals = [r for r, gg in pairs if gg == g]
        total += 1
        flat += all(abs(v - vals[0]) <= 1e-6 for v in vals)
    assert zero_variance_group_share(rewards, groups) == pytest.approx(flat / total)


def test_zero_variance_tolerance_and_empty_cpu() -> None:
    assert zero_variance_group_share([1.0, 1.0 + 1e-9, 0.0, 0.3], ["a", "a", "b", "b"]) == 0.5
    assert zero_variance_group_share([], []) is None
    with pytest.raises(ValueError):
        zero_variance_group_share([1.0], ["a", "b"])


def test_group_of_verl_keys_cpu() -> None:
    assert group_of("5f0c1e2a-aa11-4b4b-9f00-0123456789ab_7_0") == "5f0c1e2a-aa11-4b4b-9f00-0123456789ab"
    assert group_of("padabc_3_0") == "padabc"


# ------------------------------------------------------------------------------------------ components
@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),  # correct
            st.floats(0.0, 1.0),  # plan adherence
            st.floats(-1.0, 0.0),  # overlong penalty
            st.booleans(),  # plan bonus on
        ),
        min_size=1,
        max_size=30,
    )
)
def test_components_add_up_to_the_reward_cpu(rows: list[tuple[bool, float, float, bool]]) -> None:
    """As E2CRewardManager builds them: grader score (PLAN_FLOOR + (1 - PLAN_FLOOR) * adherence when correct
    with the plan bonus), plus the overlong penalty; plan_reward = grader score - acc."""
    from e2c.rewards.grader import PLAN_FLOOR

    scores, infos, groups = [], [], []
    for i, (correct, adherence, pen, bonus) in enumerate(rows):
        grader = (PLAN_FLOOR + (1 - PLAN_FLOOR) * adherence if bonus else 1.0) if correct else 0.0
        reward = float(torch.tensor(grader + pen, dtype=torch.float32))  # verl stores rm_scores in float32
        scores.append(reward)
        infos.append({"acc": float(correct), "plan_reward": grader - float(correct), "overlong_reward": pen})
        groups.append(i // 4)
    out = batch_health(groups, scores, infos, [5] * len(rows))
    total = out["health/reward_correct"] + out["health/reward_plan"] + out["health/reward_overlong"]
    assert total == pytest.approx(sum(scores) / len(scores), abs=1e-6)
    assert "health/reward_other" not in out
    assert out["health/train_acc"] == pytest.approx(sum(c for c, *_ in rows) / len(rows))
    shares = [v for k, v in out.items() if k.startswith("health/signal_share_")]
    if shares:
        assert sum(shares) == pytest.approx(1.0, abs=1e-6)


def test_components_inferred_and_other_cpu() -> None:
    # No explicit plan/overlong: plan is what is left of the score after acc.
    c = reward_components([0.75, 0.0], [1.0, 0.0])
    assert c == {"correct": [1.0, 0.0], "plan": [-0.25, 0.0], "overlong": [0.0, 0.0], "other": [0.0, 0.0]}
    # A custom function whose score is not acc + plan + overlong: the rest is "other", logged apart.
    out = batch_health(
        ["a", "a"], [0.3, 0.1], [{"acc": 0, "plan_reward": 0, "overlong_reward": 0}] * 2, [3, 3]
    )
    assert out["health/reward_other"] == pytest.approx(0.2)
    total = sum(out[f"health/reward_{k}"] for k in ("correct", "plan", "overlong", "other"))
    assert total == pytest.approx(0.2)


def test_batch_health_skips_what_it_cannot_know_cpu() -> None:
    # No acc in one row's info: no accuracy, no components (never guessed); no stop ids: no truncation.
    out = batch_health(["a", "a"], [1.0, 0.0], [{"acc": 1.0}, {}], [4, 4], [2, 3])
    assert set(out) == {"health/zero_var_group_share"}
    # Aborted rows (length 0) are left out, as verl's critic/score/mean leaves them out.
    out = batch_health(
        ["a", "a", "b"], [1.0, 0.0, 7.0], [{"acc": 1}, {"acc": 0}, {"acc": 1}], [3, 3, 0], [2, 5, None], {2}
    )
    assert out["health/train_acc"] == 0.5
    assert out["health/truncated_share"] == 0.5
    assert out["health/zero_var_group_share"] == 0.0
    assert batch_health(["a"], [1.0], [{"acc": 1}], [0]) == {}


def test_signal_shares_by_hand_cpu() -> None:
    # Group a varies only by correctness, group b only by the penalty, group c not at all (left out).
    comps = {"correct": [1, 0, 1, 1, 0, 0], "overlong": [0, 0, -0.5, 0, -0.1, -0.1]}
    shares = signal_shares(comps, ["a", "a", "b", "b", "c", "c"])
    assert shares == pytest.approx({"correct": 0.5, "overlong": 0.5})
    # Mixed group: rewards [1, 0.5, 0] from correct [1, 1, 0] and penalty [0, -0.5, 0].
    shares = signal_shares({"correct": [1, 1, 0], "overlong": [0, -0.5, 0]}, ["g"] * 3)
    # dr = [0.5, 0, -0.5], var = 0.5; dc_correct = [1/3, 1/3, -2/3] -> (1/6 + 1/3) / 0.5 = 1.0;
    # dc_overlong = [1/6, -1/3, 1/6] -> (1/12 - 1/12) / 0.5 = 0.
    assert shares == pytest.approx({"correct": 1.0, "overlong": 0.0})
    assert signal_shares({"correct": [1, 1]}, ["g", "g"]) == {}


# ------------------------------------------------------------------------------------------ truncation
def test_truncated_flags_cpu() -> None:
    assert truncated_flags([4, 4, 2, 0], [9, 3, 1, None], frozenset({9, 1})) == [False, True, False, False]


# ------------------------------------------------------------------------------------------ entropy
@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_sampled_entropy_matches_a_loop_cpu(b: int, t: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    lp = -torch.rand((b, t), generator=g) * 5
    mask = (torch.rand((b, t), generator=g) > 0.4).long()
    total = count = 0.0
    for i in range(b):
        for j in range(t):
            if mask[i, j]:
                total += -float(lp[i, j])
                count += 1
    got = sampled_entropy(lp, mask)
    if count == 0:
        assert got is None
    else:
        assert got == pytest.approx(total / count, rel=1e-5)


def test_sampled_entropy_segments_cpu() -> None:
    lp = torch.tensor([[-1.0, -2.0, -4.0, -8.0]])
    valid = torch.tensor([[True, True, True, False]])
    explore = torch.tensor([[True, True, False, False]])
    assert sampled_entropy(lp, explore) == 1.5
    assert sampled_entropy(lp, valid & ~explore) == 4.0
    assert sampled_entropy(lp, valid) == pytest.approx(7 / 3)


# ------------------------------------------------------------------------------------------ weight movement
def test_weight_movement_by_hand_cpu() -> None:
    # bf16 near 1.0 is spaced 2**-7; near 2.0, 2**-6.
    start = {"a": torch.tensor([1.0, 1.0, 1.0, 2.0]), "b": torch.tensor([[0.5, -0.5]])}
    current = {
        "a": torch.tensor([1.0 + 2**-10, 1.0 + 2**-7, 1.0 + 3 * 2**-9, 2.0]),
        # 1.0 + 2**-10 rounds back to 1.0 (unchanged); 1 + 2**-7 is the next bf16 (changed); 1 + 3*2**-9
        # rounds up to 1 + 2**-7 (changed); 2.0 unchanged.
        "b": torch.tensor([[0.5, -0.25]]),  # one change
        "extra": torch.zeros(3),  # not in start: ignored
    }
    m = weight_movement(start, current)
    assert m["weight_bf16_changed_share"] == pytest.approx(3 / 6)
    delta = (2**-10) ** 2 + (2**-7) ** 2 + (3 * 2**-9) ** 2 + 0.25**2
    norm = 1 + 1 + 1 + 4 + 0.25 + 0.25
    assert m["weight_rel_l2"] == pytest.approx(math.sqrt(delta / norm), rel=1e-6)
    assert m["weight_values"] == 6 and m["weight_tensors"] == 2 and m["weight_tensors_skipped"] == []


def test_weight_movement_dtypes_and_skips_cpu() -> None:
    w0 = torch.randn(64, 32)
    same = weight_movement({"w": w0}, {"w": w0.clone()})
    assert same["weight_rel_l2"] == 0.0 and same["weight_bf16_changed_share"] == 0.0
    # A bf16 copy of fp32 weights: the bf16 representation is identical, the fp32 values are not.
    rounded = weight_movement({"w": w0}, {"w": w0.to(torch.bfloat16)})
    assert rounded["weight_bf16_changed_share"] == 0.0
    assert 0 < rounded["weight_rel_l2"] < 2**-8
    m = weight_movement(
        {"w": w0, "shape": torch.ones(3), "gone": torch.ones(2), "ids": torch.arange(3)},
        {"w": w0 * 2, "shape": torch.ones(4), "ids": torch.arange(3)},
    )
    assert m["weight_rel_l2"] == pytest.approx(1.0, rel=1e-6)
    assert m["weight_bf16_changed_share"] == 1.0 - float((w0 == 0).float().mean())
    assert sorted(m["weight_tensors_skipped"]) == ["gone", "ids", "shape"]


def test_checkpoint_movement_from_safetensors_cpu(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    w0 = {"x": torch.tensor([1.0, 2.0]), "y": torch.tensor([4.0])}
    w1 = {"x": torch.tensor([1.0, 2.5]), "y": torch.tensor([4.0])}
    (tmp_path / "start").mkdir()
    (tmp_path / "ckpt").mkdir()
    save_file(w0, str(tmp_path / "start" / "model.safetensors"))
    save_file({"x": w1["x"]}, str(tmp_path / "ckpt" / "model-00001-of-00002.safetensors"))
    save_file({"y": w1["y"]}, str(tmp_path / "ckpt" / "model-00002-of-00002.safetensors"))
    got = checkpoint_movement(tmp_path / "start", tmp_path / "ckpt")
    want = weight_movement(w0, w1)
    assert got["weight_rel_l2"] == pytest.approx(want["weight_rel_l2"]) == pytest.approx(0.5 / math.sqrt(21))
    assert got["weight_bf16_changed_share"] == want["weight_bf16_changed_share"] == pytest.approx(1 / 3)
    with pytest.raises(FileNotFoundError, match="safetensors"):
        checkpoint_movement(tmp_path, tmp_path / "ckpt")


def test_rollout_keeps_the_start_and_logs_movement_cpu() -> None:
    from e2c.verl_cpu.hf_rollout import WeightMovementLog

    log = WeightMovementLog()
    w0 = {"w": torch.tensor([1.0, 2.0])}
    first = log.update(w0, 0)
    assert first == {"weight_rel_l2": 0.0, "weight_bf16_changed_share": 0.0, "start_global_steps": 0}
    w0["w"][1] = 99.0  # the caller's tensors may change: the log kept its own copy
    later = log.update({"w": torch.tensor([1.0, 2.5])}, 3)
    assert later["weight_rel_l2"] == pytest.approx(0.5 / math.sqrt(5))
    assert later["weight_bf16_changed_share"] == 0.5 and later["start_global_steps"] == 0


def test_a_step_without_new_weights_logs_the_last_movement_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's sync log after a skipped update: a line for that step with the weights it still holds."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from e2c.verl_cpu.hf_rollout import SYNC_LOG_ENV, HFRolloutServer, WeightMovementLog

    log = tmp_path / "rollout_sync.jsonl"
    monkeypatch.setenv(SYNC_LOG_ENV, str(log))
    server = HFRolloutServer.__new__(HFRolloutServer)
    server.engine = SimpleNamespace(load_weights=len)
    server._engine_thread = ThreadPoolExecutor(1)
    server.movement, server._moved, server.global_steps = WeightMovementLog(), {}, None
    server.stats = {"weight_updates": 0, "weight_updates_unchanged": 0, "batches": 0, "requests": 0}
    server.stats |= {"tokens": 0, "seconds": 0.0}
    server._logged = {"batches": 0, "requests": 0, "tokens": 0, "seconds": 0.0}

    async def steps() -> None:
        await server.update_weights({"w": torch.tensor([1.0, 2.0])}, 0)
        server.stats |= {"batches": 2, "requests": 16, "tokens": 4000, "seconds": 30.5}  # step 1's rollout
        await server.update_weights({"w": torch.tensor([1.0, 2.5])}, 1)
        server.stats |= {"batches": 3, "requests": 32, "tokens": 7000, "seconds": 50.0}
        await server.weights_unchanged(2)

    asyncio.run(steps())
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x["global_steps"], x["kind"], x["tensors"]) for x in lines] == [
        (0, "full", 1),
        (1, "full", 1),
        (2, "unchanged", 0),
    ]
    assert lines[2]["weight_rel_l2"] == lines[1]["weight_rel_l2"] == pytest.approx(0.5 / math.sqrt(5))
    assert [(x["gen_batches"], x["gen_requests"], x["gen_tokens"], x["gen_decode_s"]) for x in lines] == [
        (0, 0, 0, 0.0),
        (2, 16, 4000, 30.5),
        (1, 16, 3000, 19.5),
    ]
    assert server.global_steps == 2
    assert (server.stats["weight_updates"], server.stats["weight_updates_unchanged"]) == (2, 1)
    rows = {r["step"]: r for r in health_table_of(tmp_path, steps=[1, 2])}
    assert rows[2][REL_L2_AFTER] == rows[1][REL_L2_AFTER]


def health_table_of(run_dir: Path, steps: list[int]) -> list[dict]:
    """:func:`health_table` of ``run_dir`` with a bare metrics line for each of ``steps``."""
    (run_dir / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "data": {"critic/score/mean": 0.0}}) + "\n" for s in steps)
    )
    return health_table(run_dir)


# ------------------------------------------------------------------------------------------ run table
def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"cut by a ki')


def test_health_table_merges_metrics_and_syncs_cpu(tmp_path: Path) -> None:
    _write_jsonl(
        tmp_path / "metrics_history.jsonl",
        [{"step": 1, "data": {"critic/score/mean": 0.1, "health/train_acc": 0.1, "actor/pg_clipfrac": 0.0}}],
    )
    _write_jsonl(
        tmp_path / "metrics.jsonl",
        [
            {"step": 0, "data": {"val-core/x/acc/mean@1": 0.3}},  # validation only: no row
            {
                "step": 2,
                "data": {
                    "critic/score/mean": 0.25,
                    "health/train_acc": 0.2,
                    "e2c/adv_abs_before": 0.7,
                    "perf/throughput": 5.0,
                },
            },
            {"step": 3, "data": {"critic/score/mean": 0.5, "health/zero_var_group_share": 0.25}},
        ],
    )
    _write_jsonl(
        tmp_path / "rollout_sync.jsonl",
        [
            {
                "global_steps": 0,
                "kind": "full",
                "weight_rel_l2": 0.0,
                "weight_bf16_changed_share": 0.0,
                "start_global_steps": 0,
            },
            {
                "global_steps": 1,
                "weight_rel_l2": 1e-3,
                "weight_bf16_changed_share": 0.2,
                "start_global_steps": 0,
            },
            {
                "global_steps": 2,
                "weight_rel_l2": 2e-3,
                "weight_bf16_changed_share": 0.4,
                "start_global_steps": 0,
            },
            # a resumed launch re-syncs step 2 against itself: the original start wins
            {
                "global_steps": 2,
                "weight_rel_l2": 0.0,
                "weight_bf16_changed_share": 0.0,
                "start_global_steps": 2,
            },
            {
                "global_steps": 3,
                "weight_rel_l2": 1e-4,
                "weight_bf16_changed_share": 0.01,
                "start_global_steps": 2,
            },
            {"global_steps": None, "weight_rel_l2": 5.0},  # a sync outside a step
            {"global_steps": 4, "kind": "full"},  # movement off
        ],
    )
    rows = health_table(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[0]["health/train_acc"] == 0.1 and rows[0]["actor/pg_clipfrac"] == 0.0
    assert rows[0][REL_L2_AFTER] == 1e-3 and rows[0][BF16_CHANGED_AFTER] == 0.2
    assert rows[1][REL_L2_AFTER] == 2e-3 and rows[1]["weight_start_step"] == 0
    assert rows[1]["weight_source"] == "rollout_sync"
    assert "perf/throughput" not in rows[1]
    assert rows[2]["weight_start_step"] == 2
    table = format_table(rows).splitlines()
    assert len(table) == 4 and table[0].split("\t")[0] == "step"
    assert table[1].split("\t")[2] == "0.100"  # health/train_acc of step 1
    assert health_table(tmp_path / "missing") == []


def test_health_table_from_checkpoints_cpu(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    start = tmp_path / "start"
    start.mkdir()
    save_file({"w": torch.tensor([1.0, 2.0])}, str(start / "model.safetensors"))
    hf = tmp_path / "run" / "global_step_2" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    save_file({"w": torch.tensor([1.0, 2.5])}, str(hf / "model.safetensors"))
    _write_jsonl(
        tmp_path / "run" / "metrics.jsonl", [{"step": s, "data": {"critic/score/mean": 0.0}} for s in (1, 2)]
    )
    rows = health_table(tmp_path / "run", start_model_dir=start)
    assert REL_L2_AFTER not in rows[0]
    assert rows[1][REL_L2_AFTER] == pytest.approx(0.5 / math.sqrt(5))
    assert rows[1]["weight_source"] == "checkpoint"


# ------------------------------------------------------------------------------------------ verdict
def _row(step: int, **kw: float) -> dict:
    names = {
        "zero_var": "health/zero_var_group_share",
        "acc": "health/train_acc",
        "correct_share": "health/signal_share_correct",
        "overlong_share": "health/signal_share_overlong",
        "bf16": BF16_CHANGED_AFTER,
        "rel": REL_L2_AFTER,
    }
    return {"step": step, **{names[k]: v for k, v in kw.items()}}


@pytest.mark.parametrize(
    ("rows", "verdict"),
    [
        ([], "no signal"),
        # most groups flat
        (
            [_row(1, zero_var=1.0, acc=0.0, bf16=0.5), _row(2, zero_var=0.875, acc=0.05, bf16=0.6)],
            "no signal",
        ),
        # no zero-variance metric, never a right answer
        ([_row(1, acc=0.0), _row(2, acc=0.0)], "no signal"),
        # signal, but the weights moved less than a tenth of a bf16 step
        ([_row(1, zero_var=0.5, acc=0.3, correct_share=0.9, bf16=0.02, rel=1e-4)], "no movement"),
        ([_row(1, zero_var=0.5, acc=0.3, correct_share=0.9, rel=1e-4)], "no movement"),
        # rewards varied only through the overlong penalty
        (
            [_row(1, zero_var=0.5, acc=0.0, correct_share=0.0, overlong_share=1.0, bf16=0.5)],
            "signal of the wrong kind",
        ),
        (
            [_row(1, zero_var=0.5, acc=0.4, correct_share=0.3, overlong_share=0.7, bf16=0.5)],
            "signal of the wrong kind",
        ),
        ([_row(1, zero_var=0.5, acc=0.4, correct_share=0.9, bf16=0.5, rel=0.01)], "had signal"),
        # nothing about movement or components logged: judged on what there is
        ([_row(1, zero_var=0.4, acc=0.4)], "had signal"),
    ],
)
def test_signal_verdict_cpu(rows: list[dict], verdict: str) -> None:
    line = signal_verdict(rows)
    assert line.split(":")[0] == verdict, line
    assert "\n" not in line
    if rows:
        assert f"{len(rows)} steps" in line


def test_cli_prints_table_and_verdict_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_jsonl(tmp_path / "metrics.jsonl", [{"step": 1, "data": {"health/zero_var_group_share": 1.0}}])
    assert health_cli.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("step\t") and out[1].startswith("1\t") and out[-1].startswith("no signal:")
    with pytest.raises(SystemExit) as stop:
        health_cli.main([str(tmp_path / "nope")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: run folder") and "does not exist" in err[0]


# ------------------------------------------------------------------------------------------ trainer glue
def test_trainer_reads_the_transfer_queue_defensively_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """E2CTrainer's health glue on rows shaped as verl's agent loop stores them (jagged tensors, extra_fields
    dicts), through a stand-in for the transfer queue; a field it lacks skips metrics, never raises."""
    from types import SimpleNamespace

    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    import e2c.rl.trainer as trainer

    rows = []
    for i, (resp, score, info) in enumerate(
        [
            ([5, 6, 2], 1.0, {"acc": 1.0, "plan_reward": 0.0, "overlong_reward": 0.0}),
            ([5, 6, 7, 8], -0.2, {"acc": 0.0, "plan_reward": 0.0, "overlong_reward": -0.2}),
            ([5, 2], 0.75, {"acc": 1.0, "plan_reward": -0.25, "overlong_reward": 0.0}),
            ([5, 2], 0.75, {"acc": 1.0, "plan_reward": -0.25, "overlong_reward": 0.0}),
            ([2], 0.0, {"acc": 1.0, "plan_reward": -1.0, "overlong_reward": 0.0}),  # verl's padding row
        ]
    ):
        rm = torch.zeros(len(resp))
        rm[-1] = score
        rows.append(
            {
                "responses": torch.tensor(resp),
                "rm_scores": rm,
                "rollout_log_probs": -torch.ones(len(resp)) * (i + 1),
                "extra_fields": {"reward_extra_info": info},
            }
        )
    stored = list_of_dict_to_tensordict(rows)

    def kv_batch_get(keys: list, partition_id: str, select_fields: list) -> object:
        if any(f not in stored for f in select_fields):
            raise ValueError(f"not stored: {select_fields}")
        return stored.select(*select_fields)

    monkeypatch.setattr(trainer.tq, "kv_batch_get", kv_batch_get)
    batch = SimpleNamespace(
        keys=["u1_0_0", "u1_1_0", "u2_0_0", "u2_1_0", "padx_0_0"],
        partition_id="train",
        tags=[{}, {}, {}, {}, {"is_padding": True}],
    )
    fake = SimpleNamespace(_stop_ids=lambda: frozenset({2}))
    out = trainer.E2CTrainer._health_metrics(fake, batch, {})
    assert out["health/zero_var_group_share"] == 0.5  # u1 varies, u2 does not; the padding row is out
    assert out["health/truncated_share"] == 0.25  # [5, 6, 7, 8] ends without a stop id
    assert out["health/train_acc"] == 0.75
    total = sum(out[f"health/reward_{k}"] for k in ("correct", "plan", "overlong"))
    assert total == pytest.approx((1.0 - 0.2 + 0.75 + 0.75) / 4, abs=1e-6)
    assert out["health/signal_share_correct"] == pytest.approx(0.6 / 0.72)

    valid = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]]).bool()
    explore = torch.zeros_like(valid)
    explore[:, 0] = True
    ent = trainer.E2CTrainer._sampled_entropy(fake, batch, valid, explore)
    assert ent["health/entropy_sampled"] == pytest.approx(25 / 11)
    assert ent["health/entropy_sampled_explore"] == pytest.approx(10 / 4)
    assert ent["health/entropy_sampled_execute"] == pytest.approx(15 / 7)

    # A run whose rollout stored no log-probs and whose reward stored no scores: metrics skipped.
    stored = stored.exclude("rollout_log_probs", "rm_scores")
    assert trainer.E2CTrainer._sampled_entropy(fake, batch, valid, explore) == {}
    assert trainer.E2CTrainer._health_metrics(fake, batch, {}) == {}


def test_batch_health_format_shares() -> None:
    """Well-formed chains and right answers in malformed chains, from the grader's per-response info."""
    from e2c.rl.health import CORRECT_MALFORMED, WELL_FORMED, batch_health

    infos = [
        {"acc": 1.0, "well_formed": 1.0, "correct_malformed": 0.0},
        {"acc": 0.0, "well_formed": 0.0, "correct_malformed": 1.0},
        {"acc": 0.0, "well_formed": 0.0, "correct_malformed": 0.0},
        {"acc": 0.0, "well_formed": 1.0, "correct_malformed": 0.0},
    ]
    out = batch_health(["a", "a", "b", "b"], [1.0, 0.0, 0.0, 0.0], infos, [5, 5, 5, 5])
    assert out[WELL_FORMED] == 0.5 and out[CORRECT_MALFORMED] == 0.25
    # Not in every row's info: not guessed.
    infos[0].pop("well_formed")
    out = batch_health(["a", "a", "b", "b"], [1.0, 0.0, 0.0, 0.0], infos, [5, 5, 5, 5])
    assert WELL_FORMED not in out and out[CORRECT_MALFORMED] == 0.25
