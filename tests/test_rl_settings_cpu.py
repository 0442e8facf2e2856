"""The ``e2c`` config group: one dataclass (e2c.rl.settings) and the YAML that documents it agree key for key,
default for default; every key has a help line and a YAML comment; bad keys and values are refused in one
line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from e2c.errors import UserError
from e2c.rl.settings import E2CSettings, RolloutSettings, e2c_settings, setting_keys

ROOT = Path(__file__).resolve().parents[1]
COMMON = ROOT / "configs" / "e2c_common.yaml"


def test_yaml_group_equals_the_dataclass_cpu() -> None:
    group = yaml.safe_load(COMMON.read_text())["e2c"]
    assert group == dataclasses.asdict(E2CSettings())
    # Types too (YAML's 1.0 is a float, 0 an int, false a bool), so a default cannot drift to another type.
    flat = {k: v for k, v in group.items() if k != "rollout"} | {
        f"rollout.{k}": v for k, v in group["rollout"].items()
    }
    defaults = dataclasses.asdict(E2CSettings())
    defaults = {k: v for k, v in defaults.items() if k != "rollout"} | {
        f"rollout.{k}": v for k, v in defaults["rollout"].items()
    }
    assert list(flat) == list(setting_keys())
    assert {k: type(v) for k, v in flat.items()} == {k: type(v) for k, v in defaults.items()}


def test_every_setting_has_help_and_a_yaml_comment_cpu() -> None:
    for cls in (E2CSettings, RolloutSettings):
        for f in dataclasses.fields(cls):
            assert len(f.metadata.get("help", "")) > 10, f"{cls.__name__}.{f.name} has no help"
    lines = COMMON.read_text().splitlines()
    start = lines.index("e2c:")
    block = []
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break
        block.append(line)
    for i, line in enumerate(block):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "rollout:":
            continue
        above = block[i - 1].strip() if i else ""
        assert above.startswith("#") or " # " in line, f"e2c key without a comment: {stripped}"


def test_composed_stage_configs_read_cpu() -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        s2 = e2c_settings(compose(config_name="e2c_dapo", overrides=["e2c_stage=stage2"]))
    assert (s2.algo, s2.stage, s2.explore_adv_coef, s2.max_num_gen_batches) == ("dapo", 2, 2.0, 10)
    assert e2c_settings(OmegaConf.create({})) == E2CSettings()  # no group: plain GRPO
    got = e2c_settings(
        {"e2c": {"explore_adv_coef": 2, "rollout": {"explore_budget": 16, "execute_budget": None}}}
    )
    assert got.explore_adv_coef == 2.0 and isinstance(got.explore_adv_coef, float)
    assert got.rollout == RolloutSettings(explore_budget=16)


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (
            {"explore_coef": 2.0},
            "unknown key e2c.explore_coef in the e2c config group; valid keys: e2c.algo, ",
        ),
        ({"rollout": {"budget": 8}}, "unknown key e2c.rollout.budget in the e2c config group; valid keys: "),
        ({"explore_adv_coef": "two"}, "e2c.explore_adv_coef must be float, got 'two'"),
        ({"rollout": {"explore_budget": 1.5}}, "e2c.rollout.explore_budget must be int, got 1.5"),
        ({"only_train_on_positive": "yes"}, "e2c.only_train_on_positive must be bool"),
        ({"rollout": 3}, "e2c.rollout must be a group of settings"),
    ],
)
def test_bad_keys_and_values_are_refused_in_one_line_cpu(group: dict, message: str) -> None:
    with pytest.raises(UserError) as err:
        e2c_settings(OmegaConf.create({"e2c": group}))
    text = str(err.value)
    assert message in text and "\n" not in text
    if "unknown key" in message:
        assert text.endswith(", ".join(f"e2c.{k}" for k in setting_keys()))


@pytest.mark.parametrize("module", ["e2c.rl.advantage", "e2c.rl.settings"])
def test_docstring_examples_run_cpu(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
