"""``e2c reproduce`` (``bash scripts/reproduce.sh``): the method's result at this scale from one command.

    bash scripts/reproduce.sh --fast       # the same units on the tiny test model, in minutes

The study engine (:mod:`e2c.study.cli`) on ``configs/study/reproduce.toml``, whose recipe screening already
chose, so nothing is screened: the RL arm and its SFT start are trained and evaluated on the held-out problems
(greedy, and avg@k with fresh sampling seeds), paired per problem; ``--with-control`` adds the equal-token
``sft_matched`` arm. A rerun skips finished units and resumes an interrupted one; settings that differ from the
kept runs' are refused in one line. The output folder is ``outputs/reproduce`` or ``$E2C_BASE_DIR/reproduce``.
More: docs/quickstart.md, "The reproduction: what RL adds".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from e2c.commandline.argtypes import OUTPUT_DIR, whole
from e2c.commandline.entry import run_main
from e2c.commandline.flags import add_setting_flags, flag_values, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.paths import configs_dir, default_run_folder
from e2c.study.cli import StudySettings
from e2c.study.cli import main as study_main
from e2c.study.reproduce_report import write_reproduce_report

STUDY_FILE = Path("study") / "reproduce.toml"  # under configs/
_STUDY_FLAGS = {f.name: f for f in fields(StudySettings)}
RL_ARM = "rl"  # the study file's arm that is confirmed against its start
CONTROL_ARM = "control"  # its equal-token SFT arm (--with-control)


@dataclass(frozen=True)
class ReproduceSettings:
    """The command line: each field is one flag (``e2c reproduce --help``)."""

    out: str | None = field(
        default=None,
        metadata=setting(
            "output folder (default: outputs/reproduce, or $E2C_BASE_DIR/reproduce when it is set; -fast after "
            "it under --fast)",
            flag="--out",
            value=OUTPUT_DIR,
        ),
    )
    fast: bool = field(
        default=False,
        metadata=setting(
            "the tiny test model at tiny sizes: every unit, in minutes (default: off)", flag="--fast"
        ),
    )
    with_control: bool = field(
        default=False,
        metadata=setting(
            "also train and evaluate the equal-token control: SFT from the base model for the SFT start's steps "
            "plus as many trained tokens as RL trained on, in one schedule (about an hour more here; default: off)",
            flag="--with-control",
        ),
    )
    seeds: tuple[int, ...] = field(
        default=(),
        metadata=setting(
            "training seeds to run (space-separated; default: the study file's, 0): another seed adds its runs "
            "beside the kept ones",
            flag="--seeds",
            value=whole(0),
        ),
    )
    # as the study command declares them
    force: bool = field(default=False, metadata=_STUDY_FLAGS["force"].metadata)
    dry_run: bool = field(default=False, metadata=_STUDY_FLAGS["dry_run"].metadata)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="python -m e2c.study.reproduce",
        description="The method's result at this scale: SFT 120 steps, the pass-rate filter, GRPO stage 2 "
        "with the recipe that learned, and both models on the held-out problems (greedy and avg@k), paired.",
        epilog="Outputs: <out>/report.md and <out>/report.json (the result, as the quickstart reports), "
        "<out>/study.md and <out>/study.json (the study's tables), <out>/arms/<arm>/seed<k>/.",
    )
    add_setting_flags(p, ReproduceSettings)
    return p


def out_folder_of(s: ReproduceSettings) -> str:
    return s.out or default_run_folder("reproduce-fast" if s.fast else "reproduce")


def study_argv(s: ReproduceSettings) -> list[str]:
    """The study command this reproduction is."""
    out = out_folder_of(s)
    arms = f"{RL_ARM},{CONTROL_ARM}" if s.with_control else RL_ARM
    argv = ["--study", str(configs_dir() / STUDY_FILE), "--out", out, "--arms", arms]
    argv += ["--skip-screening", "--confirm", RL_ARM]
    if s.fast:
        argv.append("--fast")
    if s.seeds:
        argv += ["--seeds", *map(str, s.seeds)]
    return argv + [f for f, on in (("--force", s.force), ("--dry-run", s.dry_run)) if on]


def main(argv: list[str] | None = None) -> int:
    values = flag_values(build_parser().parse_args(argv), ReproduceSettings)
    s = ReproduceSettings(**{k: str(v) if isinstance(v, Path) else v for k, v in values.items()})
    rc = study_main(study_argv(s))
    if rc or s.dry_run:
        return rc
    out = Path(out_folder_of(s))
    rep = write_reproduce_report(out, RL_ARM, CONTROL_ARM)
    print(result_section((out / "report.md").read_text()), end="")
    print(f"[reproduce] report: {out / 'report.md'}", flush=True)
    # the last line, as the study command's: one JSON object
    differences = {
        f"{c['arm']} - {c['against']} ({c['metric']})": {k: c[k] for k in ("mean", "se", "ci", "word")}
        for c in rep["comparisons"]
    }
    print(
        json.dumps(
            {"report": str(out / "report.md"), "json": str(out / "report.json"), "differences": differences}
        )
    )
    return 0


def result_section(markdown: str) -> str:
    """The report's "## Result" section (its table and paired differences), as the command prints it.

    >>> result_section("# R\\n\\n## Result\\n\\n| a |\\n\\n## pass@k\\n")
    '## Result\\n\\n| a |\\n\\n'
    """
    lines = markdown.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("## Result")), len(lines))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[start:end])


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
