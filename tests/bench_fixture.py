"""Benchmark files for the tests: the real copies where they are (``$E2C_BENCH_DIR``, else
``../shared/data/benchmarks``, as CI has them), else a small stand-in built here.

The stand-in has every source's file name and its real field layout (the fields, their types, gsm8k's
``#### N`` answer, olympiadbench's lists, the medical sets' options), filled with made-up arithmetic
problems, so a loader, a guard or a tiny-model run reads it exactly as it reads the real file. Tests that
need the real sets' content (reference solutions grade correct, shuffled pairs grade wrong) ask for
``real_bench_dir`` and skip, with a reason naming the folder, where it is missing.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from e2c.core.paths import benchmarks_dir

REAL = benchmarks_dir()
ROWS = 60  # more than any test's --limit
VERSION = 2  # bump when the layout below changes: a built folder of another version is rebuilt
# Written into the stand-in: a test process whose $E2C_BENCH_DIR names it (conftest.py sets it for the commands
# the tests start; pytest-xdist's workers inherit it) knows the folder is no real copy.
MARK = "STAND_IN"


def _sum(i: int) -> tuple[str, int]:
    a, b = 3 + i, 11 + 2 * i
    return f"Tom has {a} apples and buys {b} more. How many apples does he have now?", a + b


def _options(i: int, right: int) -> tuple[dict[str, str], str]:
    letters = "ABCD"
    pos = i % 4
    values = [right + d for d in (-2, -1, 1, 2)]
    values[pos] = right
    return {k: str(v) for k, v in zip(letters, values, strict=True)}, letters[pos]


MMLU_SUBJECTS = (
    "anatomy", "clinical_knowledge", "college_biology", "college_medicine", "medical_genetics", "professional_medicine"
)  # fmt: skip


def _records(name: str) -> list[dict]:
    out = []
    for i in range(ROWS):
        q, a = _sum(i)
        if name == "gsm8k":
            out.append(
                {
                    "question": q,
                    "answer": f"He has {a - 11 - 2 * i} + {11 + 2 * i} = {a}.\n#### {a}",
                    "idx": i,
                }
            )
        elif name == "aime24":
            out.append(
                {
                    "id": i,
                    "problem": q,
                    "solution": f"$\\boxed{{{a}}}$",
                    "answer": str(a),
                    "url": "",
                    "question": q,
                }
            )
        elif name == "amc23":
            out.append({"id": i, "problem": q, "answer": float(a), "url": "", "question": q})
        elif name == "minerva_math":
            out.append(
                {"problem": q, "solution": f"The total is $\\boxed{{{a}}}$.", "type": "Arithmetic", "idx": i}
            )
        elif name == "olympiadbench":
            out.append(
                {
                    "id": i, "subfield": "Algebra", "context": None, "question": q, "solution": [f"It is {a}."],
                    "final_answer": [f"${a}$"], "is_multiple_answer": False, "unit": None,
                    "answer_type": "Numerical", "error": None,
                }
            )  # fmt: skip
        else:
            options, idx = _options(i, a)
            row: dict = {
                "realidx": i,
                "question": q,
                "options": options,
                "answer_idx": idx,
                "answer": options[idx],
            }
            if name == "medmcqa":
                row["realidx"] = f"fixture-{i}"
            elif name == "medqa":
                row.update(meta_info="step1", metamap_phrases=["apples"])
            else:
                row["subject"] = MMLU_SUBJECTS[i % len(MMLU_SUBJECTS)]
            out.append(row)
    return out


SOURCES = ("aime24", "amc23", "gsm8k", "medmcqa", "medqa", "minerva_math", "mmlu_medical", "olympiadbench")


def build(folder: Path) -> Path:
    """Write the stand-in into ``folder`` (whole files, each moved into place when complete)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        tmp = folder / f".{name}.jsonl.part"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in _records(name)), encoding="utf-8")
        tmp.replace(folder / f"{name}.jsonl")
    (folder / MARK).write_text("made-up rows in the real layout (tests/bench_fixture.py)\n")
    (folder / "VERSION").write_text(str(VERSION))
    return folder


def stand_in() -> Path:
    """The stand-in folder, built once per machine and version (tests only read it)."""
    base = Path(os.environ.get("E2C_CACHE") or Path(tempfile.gettempdir()) / f"e2c-tests-{os.getuid()}")
    folder = base / f"bench-stand-in-v{VERSION}"
    version = folder / "VERSION"
    if not (version.is_file() and version.read_text() == str(VERSION)):
        build(folder)
    return folder


def bench_dir() -> Path:
    """The real benchmark copies where they are, else the stand-in."""
    return REAL if HAVE_REAL else stand_in()


REAL_IS_STAND_IN = (REAL / MARK).is_file()
HAVE_REAL = REAL.is_dir() and not REAL_IS_STAND_IN
MISSING = (
    f"no real benchmark copies: E2C_BENCH_DIR names the tests' stand-in {REAL} (set it to the real copies)"
    if REAL_IS_STAND_IN
    else f"the real benchmark copies are not at {REAL} (set E2C_BENCH_DIR)"
)
