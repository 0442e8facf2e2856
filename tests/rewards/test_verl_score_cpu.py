"""The verl reward entry, loaded the way verl loads a custom reward function."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

import e2c.rewards.verl_score as vs
from e2c.rewards import compute_score, kind_for_source

GOOD = (
    "I need to make a step-by-step plan.\n1. Add the numbers.\n2. Report the sum.</EXPLORATION>"
    "<EXECUTION>Step 1: Add the numbers: 40+2=42.\nStep 2: Report the sum: \\boxed{42}</EXECUTION>"
)


def test_loaded_by_verl() -> None:
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": str(Path(vs.__file__)),
                    "name": "compute_score",
                    "reward_kwargs": {"plan_bonus": True},
                }
            }
        }
    )
    fn = get_custom_reward_fn(cfg)
    out = fn("openai/gsm8k", GOOD, "42", {})
    assert out["score"] == 1.0 and out["acc"] == 1.0 and out["well_formed"] == 1.0
    half = GOOD.replace("Step 2: Report the sum: ", "Then: ")
    # plan bonus: one of two steps carried out -> 0.5 + 0.5 x 1/2 (a correct answer never scores below 0.5)
    assert fn("openai/gsm8k", half, "42", {})["score"] == 0.75


def test_metrics_and_kinds() -> None:
    out = compute_score("gsm8k", "no tags and no answer", "42")
    assert out["score"] == 0.0 and out["no_answer"] == 1.0 and out["well_formed"] == 0.0
    assert kind_for_source("medmcqa") == "mcq" and kind_for_source("mmlu_anatomy") == "mcq"
    assert kind_for_source("aime24") == "math" and kind_for_source("x", {"kind": "mcq"}) == "mcq"
    mcq = compute_score("medqa", "plan</EXPLORATION><EXECUTION>\\boxed{C}</EXECUTION>", "C")
    assert mcq["score"] == 1.0 and mcq["pred"] == "C"
    # Tags stripped by a decode with skip_special_tokens=True: the answer still counts, the format does not.
    stripped = GOOD.replace("</EXPLORATION>", "").replace("<EXECUTION>", "").replace("</EXECUTION>", "")
    s = compute_score("gsm8k", stripped, "42")
    assert s["acc"] == 1.0 and s["well_formed"] == 0.0 and s["format"] == 0.0
