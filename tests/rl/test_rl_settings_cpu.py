"""The ``e2c`` config group: one dataclass (e2c.rl.settings) and the YAML that documents it agree key for key,
default for default; every key has a help line and a YAML comment; bad keys and values are refused in one
line."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from e2c.core.errors import UserError
from e2c.rl.settings import E2CSettings, RolloutSettings, e2c_settings, setting_keys

ROOT = Path(__file__).resolve().parents[2]
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
        (
            {"rollout": {"execute_budget": 64}},
            "e2c.rollout.execute_budget needs e2c.rollout.explore_budget (two-phase generation)",
        ),
        (
            {"rollout": {"explore_budget": -8}},
            "e2c.rollout.explore_budget must be 0 (off) or a positive number of tokens, got -8",
        ),
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


# ---------------------------------------------------------------- launcher flags from the field metadata
def _launch_overrides(argv: list[str]) -> list[str]:
    """The launcher's Hydra overrides for ``argv`` (a GPU launch: no CPU preset, nothing composed)."""
    from e2c.rl import launch

    args = launch.parse_args(argv)
    args.model_path, args.output_dir = "model", Path("/tmp/e2c-run")
    return launch.build_overrides(args, gpus=1)


def test_e2c_flags_are_generated_from_the_dataclass_cpu() -> None:
    """Spelling, --help line and Hydra key of every E2C flag come from E2CSettings' field metadata, and the
    lines are the launcher's (the flag help is short; the field's help is the config's comment)."""
    from e2c.rl.launch import build_parser
    from e2c.rl.settings import setting_flags

    flags = {f.flag: (f.hydra_key, f.help, f.type) for f in setting_flags()}
    assert flags == {
        "--explore-adv-coef": (
            "e2c.explore_adv_coef",
            "exploration advantage weight (default: stage)",
            float,
        ),
        "--explore-budget": (
            "e2c.rollout.explore_budget",
            "elastic exploration budget (0: single call)",
            int,
        ),
        "--execute-budget": ("e2c.rollout.execute_budget", "elastic execution budget (0: the rest)", int),
        "--health-stop-after": (
            "e2c.health_stop_after",
            "end a run that is not learning after this many steps of evidence (0: never)",
            int,
        ),
    }
    text = " ".join(build_parser().format_help().split())
    for flag, (_, help_line, _) in flags.items():
        assert help_line in text and flag in text
    # One knob, one name: the old spelling is an alias (e2c.commandline.parsing.FLAG_ALIASES), shown next to the flag.
    assert "--explore-adv-coef EXPLORE_ADV_COEF, --explore-coef EXPLORE_ADV_COEF" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {}),  # no flag: the stage's values stand (no override)
        (["--explore-budget", "0"], {}),  # a budget at its flag default adds nothing, as before
        (["--explore-adv-coef", "2"], {"e2c.explore_adv_coef": "2.0"}),
        (["--explore-coef", "0.5"], {"e2c.explore_adv_coef": "0.5"}),  # the old spelling
        (
            ["--explore-budget", "16", "--execute-budget", "8"],
            {"e2c.rollout.explore_budget": "16", "e2c.rollout.execute_budget": "8"},
        ),
    ],
)
def test_e2c_flags_reach_their_hydra_keys_cpu(argv: list[str], expected: dict[str, str]) -> None:
    overrides = _launch_overrides(["--stage", "1", *argv])
    got = {k: v for k, _, v in (o.partition("=") for o in overrides) if k.startswith("e2c.")}
    assert got == expected


def test_a_new_field_is_a_flag_without_another_edit_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A setting added to the dataclass (here in a subclass, top level and in the rollout group) is a launcher
    flag with its help line and reaches its Hydra override; the settings reader accepts the key."""
    from e2c.rl import launch
    from e2c.rl.settings import setting

    @dataclasses.dataclass(frozen=True)
    class NewRollout(RolloutSettings):
        plan_temperature: float = dataclasses.field(
            default=1.0,
            metadata=setting("Sampling temperature of the exploration phase.", flag="--plan-temperature"),
        )

    @dataclasses.dataclass(frozen=True)
    class NewSettings(E2CSettings):
        plan_bonus_weight: int = dataclasses.field(
            default=0,
            metadata=setting(
                "Weight of a plan bonus, a knob that exists only in this test.",
                flag="--plan-bonus-weight",
                flag_help="plan bonus weight (0: off)",
            ),
        )
        rollout: NewRollout = dataclasses.field(
            default_factory=NewRollout, metadata=setting("The agent loop's settings (e2c.rollout.*).")
        )

    monkeypatch.setattr(launch, "SETTINGS", NewSettings)
    text = " ".join(launch.build_parser().format_help().split())
    assert "--plan-bonus-weight PLAN_BONUS_WEIGHT plan bonus weight (0: off)" in text
    assert "--plan-temperature PLAN_TEMPERATURE Sampling temperature of the exploration phase." in text
    overrides = _launch_overrides(["--stage", "1", "--plan-bonus-weight", "3", "--plan-temperature", "0.7"])
    assert "e2c.plan_bonus_weight=3" in overrides and "e2c.rollout.plan_temperature=0.7" in overrides
    assert "e2c.explore_adv_coef=2.0" in _launch_overrides(["--stage", "1", "--explore-adv-coef", "2"])
    with pytest.raises(SystemExit):  # typed from the field: an int flag refuses 1.5
        launch.parse_args(["--plan-bonus-weight", "1.5"])
    got = e2c_settings({"e2c": {"plan_bonus_weight": 3, "rollout": {"plan_temperature": 0.7}}}, NewSettings)
    assert (got.plan_bonus_weight, got.rollout.plan_temperature, got.explore_adv_rule) == (3, 0.7, "paper")
    with pytest.raises(UserError, match=r"unknown key e2c\.plan_bonus_weight"):
        e2c_settings({"e2c": {"plan_bonus_weight": 3}})  # the plain dataclass has no such key


def test_a_non_finite_coefficient_is_refused_by_its_flag_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    from e2c.rl import launch

    with pytest.raises(SystemExit) as stop:  # the flag's type refuses it: one line, exit 2
        launch.parse_args(["--stage", "1", "--explore-coef", "nan"])
    assert stop.value.code == 2
    assert re.fullmatch(
        r"error: --explore-adv-coef must be a finite number, got nan \(see e2c_rl --help\)\n",
        capsys.readouterr().err,
    )


# ---------------------------------------------------------------- the weighting rule (e2c.explore_adv_rule)
def test_explore_adv_rule_is_checked_against_the_registry_cpu() -> None:
    from e2c.rl.advantage import EXPLORE_ADV_RULES, register_explore_adv_rule

    assert E2CSettings().explore_adv_rule == "paper"
    with pytest.raises(UserError) as err:
        e2c_settings({"e2c": {"explore_adv_rule": "plan_only"}})
    assert str(err.value) == "unknown e2c.explore_adv_rule 'plan_only'; registered rules: paper"

    @register_explore_adv_rule("plan_only")
    def plan_only(advantages, explore_mask, response_mask, *, explore_adv_coef, execute_adv_coef):
        return advantages * (explore_mask * explore_adv_coef).to(advantages.dtype)

    try:
        got = e2c_settings(OmegaConf.create({"e2c": {"explore_adv_rule": "plan_only"}}))
        assert got.explore_adv_rule == "plan_only"
    finally:
        EXPLORE_ADV_RULES.pop("plan_only")
    with pytest.raises(UserError, match=r"registered rules: paper$"):
        e2c_settings({"e2c": {"explore_adv_rule": "plan_only"}})
