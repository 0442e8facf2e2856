"""The README's quickstart section, rendered from a kept quickstart report, so the two cannot drift.

    python -m e2c.quickstart.readme                 # print the section rendered from the kept report
    python -m e2c.quickstart.readme --write         # put it into README.md, between its markers
    python -m e2c.quickstart.readme --report R.json # from another report.json

The kept report is ``docs/runs/quickstart/report.json`` (with its ``report.md`` and plots), copied from a
default run of ``bash scripts/quickstart.sh``; the README holds the rendered text between
:data:`BEGIN` and :data:`END`, and a test renders it again and compares.

The section's verdict is the quickstart's own rule for "RL does no harm": RL - SFT no lower than -2 SE on
avg@k and on greedy accuracy, and greedy well-formedness after RL no lower than after SFT minus 5 points.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.argtypes import EXISTING_FILE
from e2c.cli import ArgumentParser
from e2c.entry import checks_done, run_main
from e2c.errors import UserError
from e2c.eval.compare import pct
from e2c.flags import add_setting_flags, flag_values, setting
from e2c.paths import project_root
from e2c.quickstart.progress import fmt_seconds
from e2c.quickstart.report import interval_cell

KEPT = Path("docs") / "runs" / "quickstart" / "report.json"
BEGIN = "<!-- quickstart report: python -m e2c.quickstart.readme --write -->"
END = "<!-- end of the quickstart report -->"
# "No harm": RL - SFT above -HARM_SE standard errors, and greedy well-formedness down by at most HARM_FORMAT.
HARM_SE = 2.0
HARM_FORMAT = 0.05
ROWS = (("baseline", "untrained"), ("eval_sft", "SFT"), ("eval_rl", "RL"))


def _num(x: float) -> str:
    """``2e-5`` for 2e-05, ``0.0002`` as it is."""
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{x:g}").replace("e+", "e")


def _diff(d: Mapping[str, Any] | None, what: str) -> str:
    if not d or not d.get("n"):
        return f"{what}: not measured"
    moved = "rose / fell" if d.get("sampled") else "gained / lost"
    return (
        f"{what} **{100 * d['mean']:+.1f} points, SE {100 * d['se']:.1f}** ({d['improved']} / "
        f"{d['worsened']} problems {moved})"
    )


def rl_differences(rep: Mapping[str, Any]) -> dict[str, Mapping[str, Any] | None]:
    """RL - SFT on the held-out synthetic problems, paired: avg@k and greedy (None where not measured)."""
    return {
        "avg@k": rep["sampled_differences"]["rl_minus_sft"]["synthetic"],
        "greedy": rep["differences"]["rl_minus_sft"]["synthetic"],
    }


def no_harm(rep: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether RL did no harm to the SFT model by the rule in the module docstring, and what failed it."""
    failed = []
    for label, d in rl_differences(rep).items():
        if d and d.get("n") and d["mean"] < -HARM_SE * d["se"]:
            failed.append(f"{label} fell by more than {HARM_SE:g} SE")
    sft, rl = (rep["eval"].get(s) or {} for s in ("eval_sft", "eval_rl"))
    fs, fr = ((x.get("synthetic") or {}).get("format_rate") for x in (sft, rl))
    if fs is not None and fr is not None and fr < fs - HARM_FORMAT - 1e-9:
        failed.append(f"greedy well-formedness fell by more than {100 * HARM_FORMAT:g} points")
    return not failed, failed


def render(rep: Mapping[str, Any], source: str = str(KEPT)) -> str:
    """The README section for the quickstart report ``rep`` (its ``report.json``, read from ``source``)."""
    cfg, system = rep["config"], rep["system"]
    k = cfg["eval_samples"]
    stages = {s["stage"]: s for s in rep["stages"]}
    total = sum(s["seconds"] for s in rep["stages"])
    cpu = f"{system['cores']}-core {system['cpu']}" + (", native bf16" if system.get("bf16_native") else "")
    lines = [
        BEGIN,
        f"`bash scripts/quickstart.sh` from a fresh clone of {system['git_commit'][:7]} "
        f"({system['date'][:10]}, {cpu}, no GPU; {fmt_seconds(total)} of stages; "
        f"[its report]({Path(source).with_name('report.md').as_posix()})). "
        f"avg@{k}: the paper's Pass@1, the mean of {k} samples per problem at T "
        f"{cfg['eval_temperature']:.1f}; 95% intervals over the {cfg['eval_problems']} held-out problems "
        "(Wilson for greedy):",
        "",
        f"| model | avg@{k} | sampled well-formed | greedy | greedy well-formed | explore / execute tokens |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    names = {
        "baseline": "untrained SmolLM2-135M-Instruct",
        "eval_sft": f"SFT, {cfg['sft_steps']} steps x {cfg['sft_batch']} chains",
        "eval_rl": (
            f"GRPO stage 2, {cfg['rl_steps']} steps x {cfg['rl_batch']} prompts x {cfg['rl_n']}, "
            f"lr {_num(cfg['rl_lr'])}"
        ),
    }
    for stage, _ in ROWS:
        e = ((rep["eval"].get(stage) or {}).get("synthetic")) or None
        s = (((rep.get("eval_sampled") or {}).get(stage) or {}).get("synthetic")) or None
        tok = f"{e['explore_tokens']:.0f} / {e['execute_tokens']:.0f}" if e else "-"
        lines.append(
            f"| {names[stage]} | {interval_cell(s) if s else 'not sampled'} | {pct(s and s['format_rate'], 0)} | "
            f"{interval_cell(e)} | {pct(e and e['format_rate'], 0)} | {tok} |"
        )
    ok, failed = no_harm(rep)
    diffs = rl_differences(rep)
    measured = any((d or {}).get("n") for d in diffs.values())
    fam = rep.get("filter") or {}
    lines += [
        "",
        f"- {_diff(rep['differences']['sft_minus_baseline']['synthetic'], 'SFT - untrained, greedy:')}.",
        f"- {_diff(diffs['avg@k'], f'RL - SFT, avg@{k}:')}; {_diff(diffs['greedy'], 'greedy:')}. "
        + (
            "**RL was not compared with SFT**"
            if not measured
            else "**RL did no harm** (no fall beyond 2 SE, well-formedness kept)"
            if ok
            else f"**RL did harm**: {'; '.join(failed)}"
        )
        + f"; the filter kept {fam.get('kept', '-')} of {fam.get('prompts', '-')} prompts.",
        "- Time per stage: "
        + ", ".join(
            f"{name} {fmt_seconds(stages[name]['seconds'])}"
            for name in stages
            if stages[name]["status"] == "done"
        )
        + ".",
        END,
    ]
    return "\n".join(lines)


def replace_section(readme: str, section: str) -> str:
    """``readme`` with the text from :data:`BEGIN` to :data:`END` replaced by ``section``."""
    try:
        a = readme.index(BEGIN)
        b = readme.index(END, a) + len(END)
    except ValueError:
        raise UserError(f"README.md has no quickstart section: add the lines {BEGIN!r} and {END!r}") from None
    return readme[:a] + section + readme[b:]


@dataclass(frozen=True)
class ReadmeSettings:
    """The command line (``python -m e2c.quickstart.readme --help``)."""

    report: str | None = field(
        default=None,
        metadata=setting(
            f"the quickstart report.json (default: {KEPT} of the project)",
            flag="--report",
            value=EXISTING_FILE,
        ),
    )
    write: bool = field(
        default=False,
        metadata=setting("write the section into README.md (default: print it)", flag="--write"),
    )


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m e2c.quickstart.readme", description=__doc__.split("\n\n")[0])
    add_setting_flags(p, ReadmeSettings)
    return p


def main(argv: list[str] | None = None) -> int:
    values = flag_values(build_parser().parse_args(argv), ReadmeSettings)
    s = ReadmeSettings(**{k: str(v) if isinstance(v, Path) else v for k, v in values.items()})
    root = project_root()
    path = Path(s.report) if s.report else root / KEPT
    try:
        rep = json.loads(path.read_text())
        section = render(rep, str(path.relative_to(root)) if path.is_relative_to(root) else str(path))
    except FileNotFoundError:
        raise UserError(f"no quickstart report at {path}: pass --report REPORT.json") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise UserError(f"{path} is not a quickstart report.json ({type(e).__name__}: {e})") from None
    checks_done()
    if not s.write:
        print(section)
        return 0
    readme = root / "README.md"
    readme.write_text(replace_section(readme.read_text(), section))
    print(f"[readme] wrote the quickstart section of {readme} from {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
