"""The RL launcher's Dr. GRPO switch: the flag reaches verl's config, and verl's GRPO estimator then
subtracts the group mean without dividing by the group's std (checked against a plain loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _launch_overrides(*flags: str) -> list[str]:
    from e2c.rl.launch import build_overrides, parse_args

    args = parse_args(["--stage", "2", "--model", "tiny", *flags])
    args.model_path = "unused"
    args.output_dir = Path("/tmp/unused")
    return build_overrides(args, gpus=0)


@pytest.mark.parametrize(("flags", "norm"), [((), True), (("--dr-grpo",), False)])
def test_dr_grpo_flag_reaches_the_composed_config(flags: tuple[str, ...], norm: bool) -> None:
    from e2c.launch.checks import compose_checked

    overrides = [o for o in _launch_overrides(*flags) if o.startswith("algorithm.")]
    cfg = compose_checked(ROOT / "configs", "e2c_grpo", ["e2c_stage=stage2", *overrides], [])
    assert cfg.algorithm.norm_adv_by_std_in_grpo is norm
    assert cfg.algorithm.adv_estimator == "grpo"


def _reference(scores: list[float], groups: list[int], norm: bool) -> list[float]:
    """GRPO's outcome advantage, one response at a time (eps as verl's 1e-6)."""
    out = []
    for s, g in zip(scores, groups, strict=True):
        members = [x for x, h in zip(scores, groups, strict=True) if h == g]
        mean = sum(members) / len(members)
        if len(members) == 1:
            out.append(0.0)
            continue
        std = (sum((x - mean) ** 2 for x in members) / (len(members) - 1)) ** 0.5
        out.append((s - mean) / (std + 1e-6) if norm else s - mean)
    return out


@pytest.mark.parametrize("norm", [True, False])
def test_verl_grpo_advantage_with_and_without_std(norm: bool) -> None:
    """One overlong penalty in an otherwise all-wrong group: with the std it becomes a full-size advantage
    (about -1.5 and +0.5), without it stays the size of the penalty (-0.19 and +0.06)."""
    import numpy as np
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    scores = [0.0, 0.0, 0.0, -0.25, 1.0, 0.0, 1.0, 1.0]
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    length = 3
    token_rewards = torch.zeros(len(scores), length)
    token_rewards[:, -1] = torch.tensor(scores)
    mask = torch.ones(len(scores), length)
    adv, _ = compute_grpo_outcome_advantage(
        token_rewards, mask, np.array(groups), norm_adv_by_std_in_grpo=norm
    )
    want = _reference(scores, groups, norm)
    assert adv[:, 0].tolist() == pytest.approx(want, abs=1e-5)
    assert (adv == adv[:, :1]).all()  # every token of a response carries its advantage
    if norm:
        assert adv[3, 0] == pytest.approx(-1.5, abs=1e-3)
    else:
        assert adv[3, 0] == pytest.approx(-0.1875, abs=1e-5)
