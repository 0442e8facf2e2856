"""The README's quickstart and reproduction sections, rendered from kept reports, so they cannot drift.

    python -m e2c.quickstart.readme                 # print both sections rendered from the kept reports
    python -m e2c.quickstart.readme --write         # put them into README.md, between their markers

The kept reports are ``docs/runs/quickstart/report.json`` and ``docs/runs/reproduce/report.json``; the
README holds the rendered text between :data:`BEGIN` and :data:`END` (and :data:`REPRO_BEGIN`,
:data:`REPRO_END`), and a test renders them again and compares. The verdict is the quickstart's rule for
"RL does no harm": RL - SFT no lower than -2 SE on avg@k and greedy accuracy, well-formedness at most 5 points down.
More: docs/results.md, "The quickstart's default run".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_FILE
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_values, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import project_root
from e2c.eval.compare import pct
from e2c.quickstart.progress import fmt_seconds
from e2c.quickstart.report import interval_cell
from e2c.study.reproduce_report import interval_cell as accuracy_cell

KEPT = Path("docs") / "runs" / "quickstart" / "report.json"
BEGIN = "<!-- quickstart report: python -m e2c.quickstart.readme --write -->"
END = "<!-- end of the quickstart report -->"
REPRO_KEPT = Path("docs") / "runs" / "reproduce" / "report.json"
REPRO_BEGIN = "<!-- reproduction report: python -m e2c.quickstart.readme --write -->"
REPRO_END = "<!-- end of the reproduction report -->"
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
    cpu = _system_line(system)
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


def _system_line(system: Mapping[str, Any]) -> str:
    """``2-core AMD EPYC, native bf16``."""
    return f"{system['cores']}-core {system['cpu']}" + (", native bf16" if system.get("bf16_native") else "")


def _paired(c: Mapping[str, Any], what: str) -> str:
    lo, hi = (100 * v for v in c["ci"])
    return (
        f"{what} **{100 * c['mean']:+.1f} points, SE {100 * c['se']:.1f}** [{lo:+.1f}, {hi:+.1f}], "
        f"{c['rose']} up / {c['fell']} down: **{c['word']}**"
    )


def render_reproduction(rep: Mapping[str, Any], source: str = str(REPRO_KEPT)) -> str:
    """The README section for the reproduction report ``rep`` (``e2c reproduce``'s ``report.json``)."""
    system, base, proto = rep["system"], rep["study"]["base"], rep["study"]["protocol"]
    k = proto["samples"]
    labels = rep["labels"]
    sft_arm = next(a for a, lab in labels.items() if lab == "SFT")
    sft_steps = next(iter(rep["training"][sft_arm].values()))["steps"]
    names = {
        "SFT": f"SFT, {sft_steps} steps x {base['sft_batch']} chains",
        "RL": (
            f"+ GRPO, {base['rl_steps']} steps x {base['rl_batch']} x {base['rl_n']}, lr {_num(base['rl_lr'])}, "
            f"{', '.join(base['rl_families'])}"
        ),
        "control": "SFT alone, as many tokens as SFT + RL",
    }
    made = str((rep.get("run_folder") or {}).get("toolkit_commit") or "")[:7]
    done = system["git_commit"][:7]
    commits = f"run from {made} to {done}" if made and made != done else f"at {done}"
    lines = [
        REPRO_BEGIN,
        f"`bash scripts/reproduce.sh{' --fast' if rep['study']['fast'] else ''}"
        f"{' --with-control' if 'control' in labels.values() else ''}` "
        f"({system['date'][:10]}, {_system_line(system)}, no GPU; {commits}; "
        f"{fmt_seconds(rep['total_seconds'])} of stages; [its report]({Path(source).with_name('report.md').as_posix()})), "
        f"training seed{'s' if len(rep['comparisons'][0]['seeds']) > 1 else ''} "
        f"{', '.join(map(str, rep['comparisons'][0]['seeds']))}; the {proto['confirm_problems']} held-out problems, "
        f"avg@{k} at T {proto['temperature']:.1f} and greedy:",
        "",
        f"| model | avg@{k} | sampled well-formed | greedy | greedy well-formed |",
        "| --- | --- | --- | --- | --- |",
    ]

    for m in rep["models"].values():
        sampled_fmt = m["format_rate"] if m.get("format_rate_of") == "sampled" else None
        lines.append(
            f"| {names.get(m['label'], m['label'])} | {accuracy_cell(m.get('avg'))} | {pct(sampled_fmt, 0)} | "
            f"{accuracy_cell(m.get('greedy'))} | {pct(m.get('greedy_format_rate'), 0)} |"
        )
    lines.append("")
    for against in dict.fromkeys(c["against"] for c in rep["comparisons"]):
        pair = {c["metric"]: c for c in rep["comparisons"] if c["against"] == against}
        parts = [_paired(pair["avg"], f"avg@{k}")] if "avg" in pair else []
        parts += [_paired(pair["greedy"], "greedy")] if "greedy" in pair else []
        lines.append(f"- RL - {labels.get(against, against)}: " + "; ".join(parts) + ".")
    lines += [REPRO_END]
    return "\n".join(lines)


def replace_section(readme: str, section: str, begin: str = BEGIN, end: str = END) -> str:
    """``readme`` with the text from ``begin`` to ``end`` (default: the quickstart's markers) replaced by
    ``section``."""
    try:
        a = readme.index(begin)
        b = readme.index(end, a) + len(end)
    except ValueError:
        what = "quickstart" if begin == BEGIN else "reproduction"
        raise UserError(f"README.md has no {what} section: add the lines {begin!r} and {end!r}") from None
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
    reproduction: str | None = field(
        default=None,
        metadata=setting(
            f"the reproduction's report.json (default: {REPRO_KEPT} of the project)",
            flag="--reproduction",
            value=EXISTING_FILE,
        ),
    )
    write: bool = field(
        default=False,
        metadata=setting("write the sections into README.md (default: print them)", flag="--write"),
    )


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m e2c.quickstart.readme", description=__doc__.split("\n\n")[0])
    add_setting_flags(p, ReadmeSettings)
    return p


def main(argv: list[str] | None = None) -> int:
    values = flag_values(build_parser().parse_args(argv), ReadmeSettings)
    s = ReadmeSettings(**{k: str(v) if isinstance(v, Path) else v for k, v in values.items()})
    root = project_root()
    quick = _section(Path(s.report) if s.report else root / KEPT, render, "quickstart", "--report")
    kept = root / REPRO_KEPT
    repro = (
        _section(Path(s.reproduction or kept), render_reproduction, "reproduction", "--reproduction")
        if s.reproduction or kept.is_file()
        else None  # a checkout without a kept reproduction: the quickstart's section alone
    )
    checks_done()
    if not s.write:
        print(quick[1] + (f"\n\n{repro[1]}" if repro else ""))
        return 0
    readme = root / "README.md"
    text = replace_section(readme.read_text(), quick[1])
    if repro:
        text = replace_section(text, repro[1], REPRO_BEGIN, REPRO_END)
    readme.write_text(text)
    written = str(quick[0]) + (f" and {repro[0]}" if repro else f" (no reproduction report at {kept})")
    print(f"[readme] wrote the README's report sections from {written}")
    return 0


def _section(path: Path, renderer: Any, what: str, flag: str) -> tuple[Path, str]:
    """(the report's path, its rendered section); one line when the file is missing or not such a report."""
    root = project_root()
    try:
        rep = json.loads(path.read_text())
        return path, renderer(rep, str(path.relative_to(root)) if path.is_relative_to(root) else str(path))
    except FileNotFoundError:
        raise UserError(f"no {what} report at {path}: pass {flag} REPORT.json") from None
    except (json.JSONDecodeError, KeyError, TypeError, StopIteration, IndexError) as e:
        raise UserError(f"{path} is not a {what} report.json ({type(e).__name__}: {e})") from None


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
