"""Settings dataclasses are their command lines (e2c.commandline.flags): eval's flags come from EvalConfig's fields."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from e2c.commandline.argtypes import whole
from e2c.commandline.flags import add_setting_flags, flag_fields, flag_values, setting, setting_flags
from e2c.commandline.parsing import ArgumentParser


@dataclass
class Toy:
    name: str = field(metadata=setting("the name", flag="--name", flag_default="x"))
    steps: int = field(default=3, metadata=setting("steps", flag="--steps"))
    rate: float | None = field(default=None, metadata=setting("rate (default: none)", flag="--rate"))
    ks: list[int] | None = field(default=None, metadata=setting("k values", flag="--k"))
    prefill: bool = field(default=True, metadata=setting("no prefill", flag="--no-prefill", negate=True))
    mode: str = field(default="a", metadata=setting("mode", flag="--mode", choices=("a", "b")))
    hidden: int = 7  # no metadata: not a flag


def _parse(argv: list[str]) -> dict:
    p = ArgumentParser(prog="toy")
    add_setting_flags(p, Toy)
    return flag_values(p.parse_args(argv), Toy)


def test_flags_follow_the_fields_cpu() -> None:
    assert [f.flag for f in setting_flags(Toy)] == [
        "--name",
        "--steps",
        "--rate",
        "--k",
        "--no-prefill",
        "--mode",
    ]
    assert _parse([]) == {"name": "x", "steps": 3, "rate": None, "ks": None, "prefill": True, "mode": "a"}
    got = _parse(
        ["--name", "y", "--steps", "5", "--rate", "0.5", "--k", "1", "4", "--no-prefill", "--mode", "b"]
    )
    assert got == {"name": "y", "steps": 5, "rate": 0.5, "ks": [1, 4], "prefill": False, "mode": "b"}
    Toy(**got)  # the values build the dataclass


@pytest.mark.parametrize("argv", [["--steps", "1.5"], ["--rate", "x"], ["--k"], ["--mode", "c"]])
def test_a_flag_is_typed_from_its_field_cpu(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        _parse(argv)
    assert e.value.code == 2 and capsys.readouterr().err.startswith("error: ")


@dataclass(frozen=True)
class Repeated:
    pairs: tuple[str, ...] = field(
        default=(), metadata=setting("a pair", flag="--pair", repeat=True, metavar="K=V", value=whole(1))
    )


def test_a_repeated_flag_collects_its_items_and_keeps_its_default_cpu(capsys: pytest.CaptureFixture) -> None:
    """A ``repeat`` flag is given once per item, each parsed by its value type; not given, the field's
    default, every time (argparse's "append" must not add to a default shared between parses)."""
    p = ArgumentParser(prog="toy")
    add_setting_flags(p, Repeated)
    assert flag_fields(p.parse_args(["--pair", "2", "--pair", "3"]), Repeated) == {"pairs": (2, 3)}
    assert flag_fields(p.parse_args([]), Repeated) == {"pairs": ()}
    assert flag_fields(p.parse_args(["--pair", "5"]), Repeated) == {"pairs": (5,)}
    assert flag_fields(p.parse_args([]), Repeated) == {"pairs": ()}
    assert "--pair K=V" in p.format_help()
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--pair", "2", "--pair", "0"])
    assert e.value.code == 2 and capsys.readouterr().err.startswith("error: ")
    over = ArgumentParser(prog="toy")
    add_setting_flags(over, Repeated, override=True)  # not given under override: None, the config's stands
    assert flag_values(over.parse_args([]), Repeated) == {"pairs": None}


def _declared(*classes: tuple[type, str]) -> set[str]:
    """The options the classes declare (a positional, such as RL's Hydra overrides, is a field too, but
    has no option string)."""
    return {
        f.flag for cls, group in classes for f in setting_flags(cls, group=group) if f.flag.startswith("-")
    }


def _parser_flags(parser) -> set[str]:
    return {a.option_strings[0] for a in parser._actions if a.option_strings and a.dest != "help"}


def _launcher_parsers() -> dict[str, tuple]:
    from e2c.eval import run as eval_run
    from e2c.eval.runner import EvalConfig
    from e2c.launch.lora import LoraSettings
    from e2c.rl import launch
    from e2c.rl.passrate import cli as passrate
    from e2c.rl.settings import GROUP
    from e2c.sft import run as sft_run
    from e2c.sft.launch import SFTSettings
    from e2c.tts import cli as tts

    return {
        "tts": (tts.build_parser(), (tts.RunSettings, ""), (tts.RunControl, "")),
        "rl": (
            launch.build_parser(),
            (launch.LaunchSettings, ""),
            (launch.SETTINGS, GROUP),
            (LoraSettings, ""),
        ),
        "eval": (eval_run.build_parser(), (EvalConfig, ""), (eval_run.RunControl, "")),
        "sft": (sft_run.build_parser(), (SFTSettings, ""), (LoraSettings, ""), (sft_run.RunControl, "")),
        "passrate": (passrate.build_parser(), (passrate.FilterConfig, ""), (passrate.RunControl, "")),
        **_command_parsers(),
    }


def _command_parsers() -> dict[str, tuple]:
    """The smaller commands: one settings dataclass each."""
    from e2c import demo, recipe_check, stage_args
    from e2c.claims import cli as claims
    from e2c.claims.config import ClaimsConfig
    from e2c.data import download
    from e2c.eval import codeforces_elo, compare, elastic, score
    from e2c.launch import cluster
    from e2c.launch.lora import LoraSettings
    from e2c.quickstart import cli as qs
    from e2c.quickstart import trained
    from e2c.quickstart.config import Config
    from e2c.quickstart.runner import RunFlags
    from e2c.rl import curriculum
    from e2c.rl.health import cli as health
    from e2c.sandbox import cli as sandbox
    from e2c.study import cli as study
    from e2c.view import cli as view

    one = {
        "sandbox": (sandbox, sandbox.CheckSettings),
        "cluster": (cluster, cluster.ClusterSettings),
        "download": (download, download.DownloadSettings),
        "trained": (trained, trained.TrainedSettings),
        "compare": (compare, compare.CompareSettings),
        "score": (score, score.ScoreSettings),
        "codeforces_elo": (codeforces_elo, codeforces_elo.EloSettings),
        "health": (health, health.HealthSettings),
        "view": (view, view.ViewSettings),
        "stage_args": (stage_args, stage_args.StageArgs),
        "study": (study, study.StudySettings),
    }
    one["recipe_check"] = (recipe_check, recipe_check.RecipeFlags)
    one["elastic"] = (elastic, elastic.ElasticSettings)
    out = {name: (mod.build_parser(), (cls, "")) for name, (mod, cls) in one.items()}
    out["curriculum"] = (curriculum.build_parser(), (curriculum.CurriculumSettings, ""), (LoraSettings, ""))
    demo_parser = ArgumentParser(prog="demo")
    demo.add_generation_flags(demo_parser)
    out["demo"] = (demo_parser, (demo.GenerationSettings, ""))
    for name, tool, config in (("quickstart", qs, Config), ("claims", claims, ClaimsConfig)):
        out[name] = (tool.build_parser(), (config, ""), (RunFlags, ""))
    return out


# A flag that is an older spelling of a setting's value (not a setting of its own), by command.
OLD_SPELLINGS = {"passrate": {"--require-format"}}


COMMANDS = ["tts", "rl", "eval", "sft", "passrate", "sandbox", "cluster", "download", "trained", "compare"]
COMMANDS += ["score", "codeforces_elo", "health", "view", "stage_args", "study", "curriculum", "recipe_check"]
COMMANDS += ["elastic", "demo", "quickstart", "claims"]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_launchers_flags_are_its_dataclasses_fields_cpu(name: str) -> None:
    """Every flag of these commands is a field of one of their settings dataclasses: no flag is declared
    by hand beside them (an older spelling of a value is listed), and so is every positional argument."""
    parser, *classes = _launcher_parsers()[name]
    assert _parser_flags(parser) == _declared(*classes) | OLD_SPELLINGS.get(name, set())
    positional = {a.dest for a in parser._actions if not a.option_strings}
    fields = {f.flag for cls, g in classes for f in setting_flags(cls, group=g) if not f.flag.startswith("-")}
    assert positional == fields


def test_no_flag_is_declared_by_hand_in_the_package_cpu() -> None:
    """Outside the parser itself (e2c/commandline/parsing.py) and the declarations (e2c/commandline/flags.py),
    no module of the package adds an argument by hand, but the one older spelling listed in OLD_SPELLINGS."""
    import e2c

    root = Path(e2c.__file__).parent
    hand = {  # any use: a call, or the method kept in a name (a = p.add_argument)
        str(p.relative_to(root)): len(re.findall(r"\badd_argument\b", p.read_text(encoding="utf-8")))
        for p in root.rglob("*.py")
        if p.relative_to(root).as_posix() not in ("commandline/parsing.py", "commandline/flags.py")
    }
    assert {k: v for k, v in hand.items() if v} == {"rl/passrate/cli.py": 1}


def test_tts_run_control_is_one_checked_object_cpu() -> None:
    from e2c.tts.cli import RunControl, build_parser, run_control

    p = build_parser()
    control = run_control(p.parse_args(["--set", "explore_budget=30", "--set", "seed=1", "--force"]))
    assert control.sets == (("explore_budget", 30), ("seed", 1)) and control.force and not control.view
    assert run_control(p.parse_args([])) == RunControl()


def test_a_required_field_needs_a_flag_default_cpu() -> None:
    @dataclass
    class Bad:
        model: str = field(metadata=setting("model", flag="--model"))

    with pytest.raises(TypeError, match="needs a flag_default"):
        list(setting_flags(Bad))


def test_eval_flags_are_evalconfig_fields_cpu() -> None:
    from e2c.eval.run import build_parser
    from e2c.eval.runner import EvalConfig

    flagged = {f.key for f in setting_flags(EvalConfig)}
    assert flagged == {f.name for f in dataclasses.fields(EvalConfig)} - {"grade_timeout", "extra"}
    args = build_parser().parse_args(
        ["--model", "tiny", "--sample", "4", "--explore-budget", "32", "--no-prefill", "--k", "1", "2"]
    )
    values = flag_values(args, EvalConfig)
    assert values["model"] == "tiny" and values["samples"] == 4 and values["explore_budget"] == 32
    assert values["prefill"] is False and values["ks"] == [1, 2] and values["execute_budget"] is None
    assert EvalConfig(**values).samples == 4


def test_a_new_evalconfig_field_is_an_eval_flag_without_another_edit_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from e2c.eval import run
    from e2c.eval.runner import EvalConfig

    @dataclass
    class Wider(EvalConfig):
        min_p: float = field(
            default=0.0, metadata=setting("min-p sampling floor (default: 0)", flag="--min-p")
        )

    monkeypatch.setattr(run, "EvalConfig", Wider)
    parser = run.build_parser()
    assert "min-p sampling floor (default: 0)" in " ".join(parser.format_help().split())
    values = flag_values(parser.parse_args(["--min-p", "0.05"]), Wider)
    assert values["min_p"] == 0.05 and Wider(**values).min_p == 0.05
