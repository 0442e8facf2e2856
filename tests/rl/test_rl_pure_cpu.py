"""Pure functions of the RL recipe against plain reference loops (no verl trainer, no ray)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from reference_impls import weight_advantages_reference

from e2c.core.errors import UserError
from e2c.rl.advantage import (
    EXPLORE_ADV_RULES,
    explore_adv_rule_names,
    get_explore_adv_rule,
    paper_rule,
    register_explore_adv_rule,
    segment_stats,
    weight_advantages,
)
from e2c.rl.agent_loop import join_phases
from e2c.rl.reward import overlong_penalty
from e2c.verl_cpu.hf_rollout import max_new_tokens, sampling_key
from e2c.verl_cpu.platform import normalize_backend

ROOT = Path(__file__).resolve().parents[2]

B = 7  # boundary id
C = 9  # closing execution id


def _batch(rows: list[list[int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


@pytest.mark.parametrize("coef", [1.0, 2.0, 0.5])
def test_weight_advantages_matches_reference_cpu(coef: float) -> None:
    rows = [
        [1, 2, B, 3, 4, C],  # tagged
        [1, 2, 3, 4],  # no tag: weight 1.0 everywhere (not the paper's exploration weight)
        [1, 2, 3, B],  # tag at the end
        [B, 1, B, 2],  # tag first, repeated: only up to the first
        [1, 2, 3, 4, 5, 6, 8, 8],  # truncated, untagged, full width
        [],  # empty response
    ]
    width = 8
    ids, mask = _batch(rows, width)
    rng = random.Random(0)
    adv = torch.tensor([[rng.uniform(-2, 2) for _ in range(width)] for _ in rows])
    got, explore = weight_advantages(adv, ids, mask, B, coef)
    ref = weight_advantages_reference(adv.tolist(), ids.tolist(), mask.tolist(), B, coef)
    assert torch.allclose(got, torch.tensor(ref), atol=1e-6)
    assert explore[0].tolist() == [True, True, True, False, False, False, False, False]
    assert not explore[1].any() and not explore[4].any()
    assert explore[2].tolist()[:4] == [True] * 4
    assert explore[3].tolist()[:4] == [True, False, False, False]
    if coef != 1.0:
        # The untagged row is untouched, the tagged row's exploration is scaled.
        assert torch.allclose(got[1, :4], adv[1, :4])
        assert torch.allclose(got[0, :3], adv[0, :3] * coef)
        assert torch.allclose(got[0, 3:6], adv[0, 3:6])


def test_weight_advantages_random_against_reference_cpu() -> None:
    rng = random.Random(1)
    for _ in range(20):
        rows = [[rng.choice([1, 2, 3, B, C]) for _ in range(rng.randint(0, 12))] for _ in range(5)]
        ids, mask = _batch(rows, 12)
        adv = torch.randn(5, 12)
        got, _ = weight_advantages(adv, ids, mask, B, 2.0, execute_adv_coef=0.5)
        ref = weight_advantages_reference(adv.tolist(), ids.tolist(), mask.tolist(), B, 2.0, 0.5)
        assert torch.allclose(got, torch.tensor(ref), atol=1e-6)


def _rule_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random rows with and without a boundary, padding, and advantages of both signs."""
    rng = random.Random(seed)
    rows = [[rng.choice([1, 2, 3, B, C]) for _ in range(rng.randint(0, 12))] for _ in range(6)]
    ids, mask = _batch(rows, 12)
    return torch.randn(6, 12, generator=torch.Generator().manual_seed(seed)), ids, mask


def test_paper_rule_is_the_default_and_bit_identical_cpu() -> None:
    """The default rule is the paper's: bit for bit the weights x advantages the trainer always applied."""
    from e2c.chain import exploration_token_mask

    assert explore_adv_rule_names()[0] == "paper" and get_explore_adv_rule("paper") is paper_rule
    for seed in range(10):
        adv, ids, mask = _rule_batch(seed)
        for dtype in (torch.float32, torch.bfloat16):
            a = adv.to(dtype)
            # The formula before the registry, written out: where(explore, coef, execute) * valid, in a's dtype.
            valid = mask.bool()
            explore = exploration_token_mask(ids, B, valid)
            before = a * (torch.where(explore, 2.0, 0.5) * valid.float()).to(dtype)
            got, got_explore = weight_advantages(a, ids, mask, B, 2.0, 0.5)
            named, _ = weight_advantages(a, ids, mask, B, 2.0, 0.5, explore_adv_rule="paper")
            assert (
                torch.equal(got, before) and torch.equal(named, before) and torch.equal(got_explore, explore)
            )


def _sign_aware_reference(
    advantages: list[list[float]], responses: list[list[int]], response_mask: list[list[int]], coef: float
) -> list[list[float]]:
    """Plain loop for the test rule: only *positive* exploration advantages are scaled."""
    out = []
    for adv, ids, mask in zip(advantages, responses, response_mask, strict=True):
        row, inside = [], B in ids
        for a, t, m in zip(adv, ids, mask, strict=True):
            row.append((a * coef if inside and a > 0 else a) if m else 0.0)
            if t == B:
                inside = False
        out.append(row)
    return out


@pytest.fixture
def sign_aware_rule() -> Any:
    """A researcher's rule, as docs/extending.md ("Weighting rules") shows it: one function, one name."""

    @register_explore_adv_rule("test_positive_only")
    def positive_only(advantages, explore_mask, response_mask, *, explore_adv_coef, execute_adv_coef):
        weights = torch.where(explore_mask & (advantages > 0), explore_adv_coef, execute_adv_coef)
        return advantages * (weights * response_mask.bool().float()).to(advantages.dtype)

    yield positive_only
    EXPLORE_ADV_RULES.pop("test_positive_only")


def test_a_registered_rule_is_used_cpu(sign_aware_rule: Any) -> None:
    assert "test_positive_only" in explore_adv_rule_names()
    for seed in range(10):
        adv, ids, mask = _rule_batch(seed)
        got, explore = weight_advantages(adv, ids, mask, B, 2.0, explore_adv_rule="test_positive_only")
        ref = _sign_aware_reference(adv.tolist(), ids.tolist(), mask.tolist(), 2.0)
        assert torch.allclose(got, torch.tensor(ref), atol=1e-6)
        paper, paper_explore = weight_advantages(adv, ids, mask, B, 2.0)
        assert torch.equal(explore, paper_explore)  # every rule gets the same exploration mask
        negative_explore = explore & (adv < 0)
        if bool(negative_explore.any()):  # the rule, not the paper's, decided: negatives are not scaled
            assert torch.equal(got[negative_explore], adv[negative_explore])
            assert not torch.equal(got, paper)


def test_rule_registry_refuses_clashes_and_unknown_names_cpu(sign_aware_rule: Any) -> None:
    register_explore_adv_rule("test_positive_only")(sign_aware_rule)  # the same function again: fine
    with pytest.raises(ValueError, match="already registered"):
        register_explore_adv_rule("paper")(sign_aware_rule)
    adv, ids, mask = _rule_batch(0)
    with pytest.raises(UserError) as err:
        weight_advantages(adv, ids, mask, B, 2.0, explore_adv_rule="papr")
    assert str(err.value) == (
        "unknown e2c.explore_adv_rule 'papr' (did you mean 'paper'?); registered rules: paper, test_positive_only"
    )


def test_segment_stats_cpu() -> None:
    ids, mask = _batch([[1, B, 2, 3, C], [1, 2], [B, 4]], 5)
    s = segment_stats(ids, mask, B, C)
    assert s["untagged_share"] == pytest.approx(1 / 3)
    assert s["explore_tokens_mean"] == pytest.approx((2 + 1) / 2)
    assert s["execute_tokens_mean"] == pytest.approx((3 + 1) / 2)
    assert s["well_formed_share"] == pytest.approx(1 / 3)
    assert s["explore_token_share"] == pytest.approx(3 / 9)
    # The trainer passes the mask weight_advantages already computed: same statistics.
    _, explore = weight_advantages(torch.ones(ids.shape), ids, mask, B, 2.0)
    assert segment_stats(ids, mask, B, C, explore=explore) == s


def test_join_phases_masks_forced_tokens_cpu() -> None:
    # The model closed its exploration itself: only the execution opener is added (mask 0).
    ids, mask, lps, forced = join_phases([1, 2, B], [-0.1, -0.2, -0.3], B, [8], [4, 5], [-0.4, -0.5])
    assert (ids, mask, forced) == ([1, 2, B, 8, 4, 5], [1, 1, 1, 0, 1, 1], False)
    assert lps == [-0.1, -0.2, -0.3, 0.0, -0.4, -0.5]
    # Cut by the budget: the boundary is forced and masked out, like the opener.
    ids, mask, lps, forced = join_phases([1, 2], None, B, [8], [4], None)
    assert (ids, mask, lps, forced) == ([1, 2, B, 8, 4], [1, 1, 0, 0, 1], None, True)


def test_forced_boundary_still_weights_the_sampled_exploration_cpu() -> None:
    # An elastic budget cut the exploration: the forced boundary and opener have mask 0, yet the sampled
    # exploration before them is exploration (x coef) and the row counts as tagged.
    ids, mask, _, forced = join_phases([1, 2, 3], None, B, [8], [4, 5], None)
    assert forced
    t_ids, t_mask = torch.tensor([[*ids, 0]]), torch.tensor([[*mask, 0]])
    adv = torch.ones(t_ids.shape)
    weighted, explore = weight_advantages(adv, t_ids, t_mask, B, 2.0)
    assert weighted.tolist() == [[2.0, 2.0, 2.0, 0.0, 0.0, 1.0, 1.0, 0.0]]
    assert weighted.tolist() == weight_advantages_reference(
        adv.tolist(), t_ids.tolist(), t_mask.tolist(), B, 2.0
    )
    s = segment_stats(t_ids, t_mask, B, explore=explore)
    assert s["untagged_share"] == 0.0 and s["explore_tokens_mean"] == 3.0 and s["execute_tokens_mean"] == 2.0


def test_overlong_penalty_cpu() -> None:
    assert overlong_penalty(90, 128, 32, 1.0) == 0.0
    assert overlong_penalty(100, 128, 32, 1.0) == pytest.approx(-0.125)
    assert overlong_penalty(96, 128, 32, 1.0) == 0.0
    assert overlong_penalty(112, 128, 32, 1.0) == pytest.approx(-0.5)
    assert overlong_penalty(128, 128, 32, 2.0) == pytest.approx(-2.0)
    assert overlong_penalty(50, 128, 0, 1.0) == 0.0


def test_rollout_request_helpers_cpu() -> None:
    assert sampling_key({"temperature": 1.3, "top_p": 0.9, "top_k": -1, "logprobs": True}) == (
        1.3,
        0.9,
        -1,
        True,
        (),
    )
    assert sampling_key({"temperature": 0, "stop_token_ids": [9, 7]})[4] == (7, 9)
    assert max_new_tokens({}, 10, 128, 4096) == 128
    assert max_new_tokens({"max_tokens": 50}, 10, 128, 4096) == 50
    assert max_new_tokens({"max_tokens": 500}, 4000, 128, 4096) == 96


def test_normalize_backend_cpu() -> None:
    assert normalize_backend("cpu:gloo,cpu:gloo") == "gloo"
    assert normalize_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,cuda:nccl"
    assert normalize_backend("nccl") == "nccl"
    assert normalize_backend(None) is None


@pytest.mark.parametrize("algo", ["grpo", "dapo"])
def test_stage_configs_compose_with_paper_settings_cpu(algo: str) -> None:
    from hydra import compose, initialize_config_dir

    cfgs = {}
    for stage in (1, 2):
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
            cfgs[stage] = compose(config_name=f"e2c_{algo}", overrides=[f"e2c_stage=stage{stage}"])
    s1, s2 = cfgs[1], cfgs[2]
    assert s1.trainer.v1.trainer_mode == "e2c_sync" and s1.reward.reward_manager.name == "e2c"
    assert (s1.actor_rollout_ref.rollout.n, s1.actor_rollout_ref.rollout.temperature) == (32, 1.3)
    assert (s1.e2c.explore_adv_coef, s1.trainer.total_epochs) == (1.0, 1)
    assert (s2.actor_rollout_ref.rollout.n, s2.actor_rollout_ref.rollout.temperature) == (8, 1.0)
    assert (s2.e2c.explore_adv_coef, s2.trainer.total_epochs) == (2.0, 2)
    actor = s2.actor_rollout_ref.actor
    if algo == "dapo":
        assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")
        assert not actor.use_kl_loss and not s2.algorithm.use_kl_in_reward
        # Stage 1 filters on accuracy; stage 2 on the reward, which carries the plan bonus (was "acc" there,
        # which dropped every all-correct group although their adherence rewards differ).
        assert s1.algorithm.filter_groups.metric == "acc"
        assert s2.algorithm.filter_groups.enable and s2.algorithm.filter_groups.metric == "reward"
        assert s2.reward.reward_kwargs.overlong_buffer_cfg.enable
    else:
        assert not s2.algorithm.get("filter_groups", {}).get("enable", False)


def test_rollout_dtype_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from e2c.launch.devices import cpu_has_bf16
    from e2c.verl_cpu.hf_rollout import rollout_dtype

    assert rollout_dtype("float32") is torch.float32 and rollout_dtype("bfloat16") is torch.bfloat16
    monkeypatch.setenv("E2C_ROLLOUT_DTYPE", "auto")
    assert rollout_dtype() is (torch.bfloat16 if cpu_has_bf16() else torch.float32)
    with pytest.raises(ValueError, match="not one of auto, bfloat16, float32"):
        rollout_dtype("fp8")


def test_metrics_survive_relaunches_cpu(tmp_path: Path) -> None:
    from e2c.launch.checkpoints import keep_metrics, merge_metric_lines, restore_metrics

    line = lambda step, v: json.dumps({"step": step, "data": {"x": v}})  # noqa: E731
    assert merge_metric_lines([line(1, 0), line(2, 0)], [line(2, 1), '{"step": 3, "da']) == [
        line(1, 0),
        line(2, 1),
    ]
    run = tmp_path
    (run / "metrics.jsonl").write_text(line(1, 0) + "\n" + line(2, 0) + "\n")
    keep_metrics(run)  # a relaunch: verl will truncate metrics.jsonl
    (run / "metrics.jsonl").write_text(line(2, 1) + "\n" + line(3, 1) + "\n")  # resumed from step 1
    restore_metrics(run)
    assert (run / "metrics.jsonl").read_text().splitlines() == [line(1, 0), line(2, 1), line(3, 1)]
    keep_metrics(run)
    (run / "metrics.jsonl").write_text("")  # killed before its first step
    restore_metrics(run)
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 3


def test_cpu_overrides_come_from_the_configs_folder_cpu(tmp_path: Path) -> None:
    """The CPU set-up lives in configs/cpu/rl.yaml; the launcher passes it as Hydra text, preset first, and its
    own keys (here --save-freq) replace a preset value in place."""
    import yaml

    from e2c.rl.launch import build_overrides, cpu_overrides, parse_args

    doc = yaml.safe_load((ROOT / "configs" / "cpu" / "rl.yaml").read_text())
    got = cpu_overrides()
    assert list(got) == [*doc["preset"], *doc["fixed"]]
    assert got["data.train_batch_size"] == "4" and got["actor_rollout_ref.actor.use_dynamic_bsz"] == "true"
    assert got["+ray_kwargs.ray_init.num_gpus"] == "1" and got["trainer.device"] == "cpu"
    args = parse_args(["--model", "tiny", "--save-freq", "3"])
    args.model_path, args.output_dir = "m", tmp_path
    cpu = build_overrides(args, 0)
    assert cpu[: len(got)] == [f"{k}={got[k] if k != 'trainer.save_freq' else '3'}" for k in got]
    assert not any(o.startswith("trainer.device=") for o in build_overrides(args, 2))


def test_tracker_names_are_verls_cpu() -> None:
    from verl.utils.tracking import Tracking

    from e2c.launch.tracking import TRACKERS

    assert list(TRACKERS) == list(Tracking.supported_backend)


def test_logger_knob_always_keeps_the_metrics_file_cpu(tmp_path: Path) -> None:
    from e2c.rl.launch import build_overrides, parse_args

    env = "+ray_kwargs.ray_init.runtime_env.env_vars."
    args = parse_args(["--model", "tiny"])
    args.model_path, args.output_dir = "m", tmp_path
    ov = build_overrides(args, 0)
    assert "trainer.logger=[console,tensorboard,file]" in ov
    assert f"{env}TENSORBOARD_DIR={tmp_path / 'tensorboard'}" in ov
    assert f"{env}VERL_FILE_LOGGER_PATH={tmp_path / 'metrics.jsonl'}" in ov
    args = parse_args(["--model", "tiny", "--logger", "console"])
    args.model_path, args.output_dir = "m", tmp_path
    ov = build_overrides(args, 0)
    assert "trainer.logger=[console,file]" in ov and not any("TENSORBOARD_DIR" in o for o in ov)


def test_output_folder_is_checked_then_created_cpu(tmp_path: Path) -> None:
    from e2c.core.errors import UserError
    from e2c.core.files import ensure_output_dir

    made = ensure_output_dir(tmp_path / "a" / "b", "output folder")
    assert made.is_dir()
    assert ensure_output_dir(made, "output folder") == made  # an existing folder is fine
    (tmp_path / "f").write_text("keep me\n")
    for path, message in (
        (tmp_path / "f", f"output folder {tmp_path / 'f'} exists and is not a folder"),
        (tmp_path / "f" / "run", f"{tmp_path / 'f'} is a file, not a folder"),
        (Path("/sys/kernel"), "output folder /sys/kernel is not writable"),
        (Path("/sys/kernel/e2c-run"), "cannot write in /sys/kernel"),
    ):
        with pytest.raises(UserError) as err:
            ensure_output_dir(path, "output folder")
        assert message in str(err.value), err.value
    assert (tmp_path / "f").read_text() == "keep me\n"


def test_stage2_start_is_the_latest_complete_checkpoint_cpu(tmp_path: Path) -> None:
    from e2c.core.errors import UserError
    from e2c.launch.checkpoints import TRACKER
    from e2c.rl.launch import latest_hf_checkpoint

    with pytest.raises(UserError, match="the folder does not exist"):
        latest_hf_checkpoint(tmp_path / "none")
    with pytest.raises(UserError, match=f"no {TRACKER} naming a saved step"):
        latest_hf_checkpoint(tmp_path)
    hf = tmp_path / "global_step_4" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (tmp_path / TRACKER).write_text("4\n")
    with pytest.raises(UserError, match="has no HF weights"):
        latest_hf_checkpoint(tmp_path)
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"")
    assert latest_hf_checkpoint(tmp_path) == hf


def test_a_local_ray_gets_room_for_every_rank_and_no_dashboard_cpu() -> None:
    from e2c.rl.launch import cpu_shape

    local = cpu_shape(4, 1, joins_cluster=False)
    assert local["+ray_kwargs.ray_init.num_gpus"] == "4" and local["ray_kwargs.ray_init.num_cpus"] == "16"
    assert local["+ray_kwargs.ray_init.include_dashboard"] == "false"
    # a cluster (RAY_ADDRESS) brings its own resources and dashboard
    assert not [k for k in cpu_shape(4, 2, joins_cluster=True) if k.startswith(("ray_", "+ray_"))]
