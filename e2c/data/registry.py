"""The evaluation-set registry: the paper's 16 benchmarks (plus the synthetic and code sets) in one record schema.

Every benchmark loads into :class:`Record` (``id``, ``problem``, ``answer``, ``kind`` as named in
:mod:`e2c.rewards.kinds`, ``choices``, ``data_source``, ``extra``). For multiple choice ``answer`` is the option
letter and ``problem`` the stem only: :func:`question_text` gives the text a model sees. A code record's
``answer`` is its tests as JSON (:mod:`e2c.rewards.code_tests`). Sources, in order: a local folder
(``--data-dir`` / ``$E2C_DATA_DIR``, ``data/processed/eval``, the paper's raw evaluation files), then the HF
hub; each spec names its hub fields and the loader falls back to the common alternatives, so every copy of a
set loads with the same code. A prompt suffix the question already carries is removed.
More: docs/data.md, "Benchmarks".
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.models import hub_unreachable
from e2c.core.paths import data_dir as project_data_dir
from e2c.data import code_records, code_sets, lcb_windows
from e2c.data.io import ROW_SUFFIXES, read_rows

# The record schema and the row mapping live in e2c.data.records; these names stay importable from here.
from e2c.data.records import (  # noqa: F401
    ANSWER_KEYS,
    ID_KEYS,
    MCQ_ANSWER_KEYS,
    MCQ_GOLD_KEYS,
    PROBLEM_KEYS,
    Record,
    letter_options,
    options_in_text,
    options_of,
    question_text,
    row_choices,
    to_record,
)
from e2c.rewards.kinds import DEFAULT_KIND, Kind

DATA_DIR_ENV = "E2C_DATA_DIR"


@dataclass(frozen=True)
class DatasetSpec:
    """How to load one benchmark.

    Attributes:
        name: registry name (also the ``data_source`` of its records).
        group: ``math``, ``med``, ``synthetic`` or ``code``.
        kind: the answer kind (:mod:`e2c.rewards.kinds`): ``math`` (free-form answer), ``mcq`` (option
            letter) or ``code`` (a program; the reference is its tests); a ``synthetic`` set's rows may name
            their own (``countdown``).
        hf_id / hf_config / split: the hub source; ``hf_id=None`` means local files only.
        problem_keys / answer_keys: the source's field names, tried before the common fallbacks.
        local_names: file stems accepted in a local folder, in order of preference.
        subject: for a combined MMLU file, keep the rows whose ``subject`` equals this.
        max_new_tokens: the paper's generation budget for the set (8,192 math, 1,500 medical; 8,192 code,
            the math budget: the E2C models' training length).
        convert: ``(row, spec, index) -> Record | None`` for a set whose rows are not problem/answer pairs
            (the code sets: :mod:`e2c.data.code_sets`); None (left out) for a row the set cannot grade.
            Unset: :func:`~e2c.data.records.to_record`.
        builtin: rows shipped with an installed package (HumanEval's), read when no local file exists,
            before the hub.
        hub_files: files of the hub repository to read instead of ``datasets.load_dataset`` (a repository
            whose loading script the ``datasets`` library no longer runs: LiveCodeBench's).
        windowed: the set takes a ``name@selector`` (a LiveCodeBench release or a contest-date window,
            :func:`e2c.data.lcb_windows.parse_window`).
    """

    name: str
    group: str
    kind: Kind
    hf_id: str | None
    hf_config: str | None = None
    split: str = "test"
    problem_keys: tuple[str, ...] = ("problem",)
    answer_keys: tuple[str, ...] = ("answer",)
    local_names: tuple[str, ...] = ()
    subject: str | None = None
    max_new_tokens: int = 8192
    convert: Callable[[Mapping[str, Any], DatasetSpec, int], Record | None] | None = None
    builtin: Callable[[], list[dict[str, Any]]] | None = None
    hub_files: tuple[str, ...] = ()
    windowed: bool = False

    @property
    def file_stems(self) -> tuple[str, ...]:
        return (self.name, *self.local_names)

    @property
    def hub_source(self) -> str:
        if not self.hf_id:
            return "local files only"
        cfg = f", config {self.hf_config}" if self.hf_config else ""
        return f"{self.hf_id}{cfg}, split {self.split}"


def _mmlu(subject: str) -> DatasetSpec:
    return DatasetSpec(
        subject,
        "med",
        "mcq",
        "cais/mmlu",
        subject,
        "test",
        ("question",),
        ("answer",),
        local_names=(f"mmlu_{subject}", "mmlu_medical"),
        subject=subject,
        max_new_tokens=1500,
    )


def code_converter(**opts: Any) -> Callable[[Mapping[str, Any], DatasetSpec, int], Record | None]:
    """A code set's ``convert``: any source shape (:func:`e2c.data.code_sets.detect_shape`) to a record named
    after the set; ``opts`` are the DeepCoder converter's (``compare``, ``preamble_stdin``)."""

    def convert(row: Mapping[str, Any], spec: DatasetSpec, index: int) -> Record | None:
        return code_records.to_code_record(row, spec.name, index, **opts)

    return convert


CODE = code_converter()
CODE_TOKENS = code_converter(compare="tokens")  # Codeforces, TACO: a checker's whitespace-token comparison
CODE_LCB = code_converter(preamble_stdin=True)  # LiveCodeBench's harness imports its preamble for all
# The code sets (e2c.data.code_sets has the shapes each source's rows come in). Codeforces from open-r1 keeps
# the problems' ratings (what e2c.eval.codeforces_elo needs); DeepCoder's test sets (Elastic Reasoning's
# test_livecodebench, test_codeforces) are DeepCoder-Preview's lcbv5 and codeforces test splits.
CODE_SPECS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        "humaneval",
        "code",
        "code",
        "openai/openai_humaneval",
        None,
        "test",
        local_names=("HumanEval", "openai_humaneval"),
        convert=CODE,
        builtin=code_sets.humaneval_rows,
    ),
    DatasetSpec(
        "mbpp",
        "code",
        "code",
        "google-research-datasets/mbpp",
        "full",
        "test",
        local_names=("mbpp_full", "mbpp_sanitized"),
        convert=CODE,
    ),
    DatasetSpec(
        "mbppplus",
        "code",
        "code",
        "evalplus/mbppplus",
        None,
        "test",
        local_names=("mbpp_plus",),
        convert=CODE,
    ),
    DatasetSpec(
        "livecodebench",
        "code",
        "code",
        "livecodebench/code_generation_lite",
        None,
        "test",
        local_names=("code_generation_lite",),
        convert=CODE_LCB,
        hub_files=lcb_windows.LCB_FILES,
        windowed=True,
    ),
    DatasetSpec("codeforces", "code", "code", "open-r1/codeforces", None, "test", convert=CODE_TOKENS),
    DatasetSpec("taco", "code", "code", "BAAI/TACO", None, "test", convert=CODE_TOKENS),
    DatasetSpec(
        "test_livecodebench",
        "code",
        "code",
        "agentica-org/DeepCoder-Preview-Dataset",
        "lcbv5",
        "test",
        convert=CODE_LCB,
        windowed=True,
    ),
    DatasetSpec(
        "test_codeforces",
        "code",
        "code",
        "agentica-org/DeepCoder-Preview-Dataset",
        "codeforces",
        "test",
        convert=CODE_TOKENS,
    ),
)

SPECS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        "aime24", "math", "math", "HuggingFaceH4/aime_2024", None, "train", local_names=("aime_2024",)
    ),
    DatasetSpec("aime25", "math", "math", "math-ai/aime25", None, "test", local_names=("aime_2025",)),
    DatasetSpec("amc23", "math", "math", "math-ai/amc23", None, "test", ("question",), local_names=("amc",)),
    DatasetSpec("gsm8k", "math", "math", "openai/gsm8k", "main", "test", ("question",)),
    DatasetSpec(
        "math500", "math", "math", "HuggingFaceH4/MATH-500", None, "test", local_names=("math_500", "math")
    ),
    DatasetSpec(
        "minerva",
        "math",
        "math",
        "math-ai/minervamath",
        None,
        "test",
        ("question",),
        local_names=("minerva_math", "minervamath"),
    ),
    DatasetSpec(
        "olympiadbench",
        "math",
        "math",
        "Hothan/OlympiadBench",
        "OE_TO_maths_en_COMP",
        "train",
        ("question",),
        ("final_answer",),
        local_names=("olympiad_bench",),
    ),
    DatasetSpec(
        "math_algebra",
        "math",
        "math",
        "EleutherAI/hendrycks_math",
        "algebra",
        "test",
        answer_keys=("solution",),
        local_names=("math-algebra", "math_algebra_test"),
    ),
    DatasetSpec(
        "medqa",
        "med",
        "mcq",
        "GBaker/MedQA-USMLE-4-options",
        None,
        "test",
        ("question",),
        ("answer_idx",),
        max_new_tokens=1500,
    ),
    DatasetSpec(
        "medmcqa",
        "med",
        "mcq",
        "openlifescienceai/medmcqa",
        None,
        "validation",
        ("question",),
        ("cop",),
        max_new_tokens=1500,
    ),
    _mmlu("anatomy"),
    _mmlu("clinical_knowledge"),
    _mmlu("college_biology"),
    _mmlu("college_medicine"),
    _mmlu("medical_genetics"),
    _mmlu("professional_medicine"),
    DatasetSpec("synthetic", "synthetic", "math", None, local_names=("synthetic_eval",), max_new_tokens=2048),
    *CODE_SPECS,
)

REGISTRY: dict[str, DatasetSpec] = {s.name: s for s in SPECS}
GROUPS: dict[str, tuple[str, ...]] = {
    "all": tuple(s.name for s in SPECS if s.group == "math"),
    "med": tuple(s.name for s in SPECS if s.group == "med"),
    "mmlu_medical": tuple(s.name for s in SPECS if s.hf_id == "cais/mmlu"),
    # The code benchmarks (TACO, mostly a training set, and DeepCoder's test splits, which repeat
    # LiveCodeBench and Codeforces problems, are named on their own).
    "code": ("humaneval", "mbpp", "mbppplus", "livecodebench", "codeforces"),
}
# Other names users (and the paper's scripts) use for the same sets.
ALIASES: dict[str, str] = {
    "math": "math500",
    "olympiad_bench": "olympiadbench",
    "math-algebra": "math_algebra",
    "minerva_math": "minerva",
    "aime2024": "aime24",
    "aime2025": "aime25",
    # Elastic Reasoning's (and DeepScaleR's) evaluation names.
    "aime": "aime24",
    "amc": "amc23",
    # Code sets' other spellings (DeepCoder's and the hub's).
    "openai_humaneval": "humaneval",
    "mbpp_plus": "mbppplus",
    "lcb": "livecodebench",
    "code_generation_lite": "livecodebench",
}


def source_kinds(specs: Iterable[DatasetSpec] = SPECS) -> dict[str, str]:
    """``{data-source fragment: kind}`` for the sets whose kind is not the default, sorted: what the
    reward's fallback for rows that name no kind (:data:`e2c.rewards.source_kinds.SOURCE_KINDS`, a copy
    the rewards can import) must say.

    A set's fragments are its name, its local file stems and its hub repository's name, lower-cased (a
    ``data_source`` is often one of them: ``medmcqa``, ``mmlu_anatomy``, ``cais/mmlu``); a fragment that
    contains another of the same kind is left out, as the fallback matches fragments inside the source.

    >>> source_kinds()["mmlu"], "mmlu_anatomy" in source_kinds(), "aime24" in source_kinds()
    ('mcq', False, False)
    """
    frags: dict[str, str] = {}
    for s in specs:
        if s.kind == DEFAULT_KIND:
            continue
        names = [s.name, *s.local_names, *([s.hf_id.rsplit("/", 1)[-1]] if s.hf_id else [])]
        for n in names:
            frags[n.lower()] = s.kind
    return {
        f: k for f, k in sorted(frags.items()) if not any(g != f and g in f and frags[g] == k for g in frags)
    }


# --------------------------------------------------------------------------------------------- names
def valid_names() -> list[str]:
    """Every name the CLI accepts: groups, benchmarks and aliases."""
    return [*GROUPS, *REGISTRY, *ALIASES]


def split_selector(name: str) -> tuple[str, str]:
    """``"livecodebench@release_v5"`` -> ``("livecodebench", "release_v5")``; no ``@``: an empty selector."""
    base, _, selector = name.partition("@")
    return base, selector


def _windowed(name: str, key: str) -> str:
    """A ``set@selector`` name, checked (a windowed set, a valid selector) and spelled canonically."""
    base, selector = split_selector(key)
    base = ALIASES.get(base, base)
    spec = REGISTRY.get(base)
    if spec is None or not spec.windowed:
        takers = ", ".join(s.name for s in SPECS if s.windowed)
        raise UserError(f"{name!r}: only {takers} take an @selection ({lcb_windows.WINDOW_HELP})")
    try:
        window = lcb_windows.parse_window(selector)
    except code_sets.CodeSetError as e:
        raise UserError(f"{name!r}: {e}") from None
    return f"{base}@{window.text}"


def resolve_names(spec: str | Iterable[str]) -> list[str]:
    """Expand a comma-separated (or listed) selection of groups, names and aliases into benchmark names.

    Order is kept and duplicates dropped. An unknown name raises :class:`UserError` with the valid
    names and the closest matches. A set that takes a selection (LiveCodeBench) may be named
    ``set@selection`` (``livecodebench@release_v5``, ``livecodebench@2024-08-01..2025-02-01``); the name
    stays as given, checked and lower-cased.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for raw in items:
        name = raw.strip()
        if not name:
            continue
        key = name.lower()
        if "@" in key:
            names: Sequence[str] = (_windowed(name, key),)
        elif key in GROUPS:
            names = GROUPS[key]
        elif key in REGISTRY:
            names = (key,)
        elif key in ALIASES:
            names = (ALIASES[key],)
        else:
            close = difflib.get_close_matches(key, valid_names(), n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise UserError(
                f"unknown dataset {name!r}{hint} valid: groups {', '.join(GROUPS)}; "
                f"sets {', '.join(REGISTRY)}"
            )
        out.extend(n for n in names if n not in out)
    if not out:
        raise UserError(f"no dataset named; valid: groups {', '.join(GROUPS)}; sets {', '.join(REGISTRY)}")
    return out


def get_spec(name: str) -> DatasetSpec:
    """The spec of one benchmark (aliases accepted)."""
    names = resolve_names(name)
    if len(names) != 1:
        raise UserError(f"{name!r} is a group of {len(names)} sets; name one of: {', '.join(names)}")
    return REGISTRY[split_selector(names[0])[0]]


# ------------------------------------------------------------------------------------------- mapping
# ------------------------------------------------------------------------------------------- loading
def project_eval_dir() -> Path:
    """``data/processed/eval`` of the project (where ``prepare`` writes the benchmarks)."""
    return project_data_dir() / "processed" / "eval"


def release_eval_dirs(data: Path | None = None) -> list[Path]:
    """Where the paper's evaluation files already are for its users: ``data/evaluation`` (its download
    scripts) and ``data/raw/evaluation`` (ours, which keeps the hub's paths under ``data/raw``)."""
    data = data or project_data_dir()
    return [data / "evaluation", data / "raw" / "evaluation"]


def search_dirs(data_dir: str | Path | None = None) -> list[Path]:
    """Local folders searched, in order: the argument, ``$E2C_DATA_DIR``, ``data/processed/eval``, then
    the paper's raw evaluation files (:func:`release_eval_dirs`)."""
    dirs = [Path(d) for d in (data_dir, os.environ.get(DATA_DIR_ENV)) if d]
    dirs.append(project_eval_dir())
    dirs.extend(release_eval_dirs())
    return list(dict.fromkeys(dirs))


def find_local(spec: DatasetSpec, dirs: Sequence[Path]) -> Path | None:
    """The first ``<dir>/<stem><suffix>`` that exists for a spec."""
    for d in dirs:
        for stem in spec.file_stems:
            for suffix in ROW_SUFFIXES:
                p = d / f"{stem}{suffix}"
                if p.is_file():
                    return p
    return None


def records_from_rows(rows: Iterable[Mapping[str, Any]], spec: DatasetSpec, source: str) -> list[Record]:
    """Map rows to records; the first bad row raises UserError naming the source, row and problem."""
    out = []
    convert = spec.convert or to_record
    for i, row in enumerate(rows):
        if spec.subject and "subject" in row and row["subject"] != spec.subject:
            continue
        try:
            rec = convert(row, spec, i)
        except ValueError as e:
            raise UserError(f"{source} row {i}: {e}") from None
        if rec is not None:
            out.append(rec)
    if not out:
        raise UserError(
            f"{source}: no rows for {spec.name}" + (f" (subject {spec.subject})" if spec.subject else "")
        )
    return out


def _no_local_file(spec: DatasetSpec, dirs: Sequence[Path]) -> str:
    looked = ", ".join(str(d) for d in dirs)
    return f"benchmark {spec.name!r}: no local file ({'|'.join(spec.file_stems)}.jsonl/.parquet) in {looked}"


def _from_hub(spec: DatasetSpec, dirs: Sequence[Path], files: Sequence[str] | None = None) -> list[Record]:
    """Records from the hub copy: ``datasets.load_dataset``, or the spec's ``hub_files`` (``files``: the
    ones a selection needs) read one by one."""
    hint = f"{_no_local_file(spec, dirs)}, and the hub copy ({spec.hub_source}) is unavailable"
    fix = "; run `bash scripts/download_datasets.sh --dataset eval` or pass --data-dir DIR"
    if not spec.hf_id:
        raise UserError(f"{hint}; build it with `bash scripts/prepare_all_data.sh --skip-download`")
    why = hub_unreachable()
    if why:
        raise UserError(f"{hint} ({why}){fix}")
    if spec.hub_files:
        paths = []
        for f in files or spec.hub_files:
            try:
                from huggingface_hub import hf_hub_download

                paths.append(Path(hf_hub_download(spec.hf_id, f, repo_type="dataset")))
            except Exception as e:  # no network, no such file, gated, ...
                raise UserError(f"{hint} ({f}: {type(e).__name__}){fix}") from None
        return [r for p in paths for r in records_from_rows(read_rows(p), spec, f"{spec.hf_id}/{p.name}")]
    try:
        import datasets

        ds = datasets.load_dataset(spec.hf_id, spec.hf_config, split=spec.split)
    except Exception as e:  # no network, no such repo, gated, ...
        raise UserError(f"{hint} ({type(e).__name__}){fix}") from None
    return records_from_rows(ds, spec, f"{spec.hf_id}[{spec.split}]")


def in_window(records: Sequence[Record], window: lcb_windows.Window, source: str) -> list[Record]:
    """The records of a windowed set inside ``window`` (by ``extra["contest_date"]``); one line when a record
    has no date, or when none is left."""
    if window.start is None and window.end is None:
        return list(records)
    try:
        kept = lcb_windows.in_window(records, window, lambda r: str(r.extra.get("contest_date") or ""))
    except code_sets.CodeSetError as e:
        raise UserError(f"{source}: {e}") from None
    if not kept:
        raise UserError(f"{source}: no problem in {window.text!r} ({len(records)} problems outside it)")
    return kept


def hub_records(name: str) -> list[Record]:
    """One benchmark's records from its hub copy, local files ignored (one line when the hub cannot
    serve it, naming the offline alternatives)."""
    spec = get_spec(name)
    return _from_hub(spec, search_dirs())


def _builtin_rows(spec: DatasetSpec) -> list[dict[str, Any]] | None:
    """The rows an installed package ships for ``spec`` (HumanEval's), or None when it has none or the package
    is missing (then the hub, or the line naming what to install, follows)."""
    if spec.builtin is None:
        return None
    try:
        return spec.builtin()
    except ValueError:  # the package is not installed
        return None


def load_benchmark(
    name: str, data_dir: str | Path | None = None, limit: int | None = None, use_hub: bool = True
) -> list[Record]:
    """Records of one benchmark: from a local file if one exists, else from the hub.

    Args:
        name: a registry name or alias (not a group); a windowed set may carry a selection
            (``livecodebench@release_v5``, ``livecodebench@2024-08-01..2025-02-01``).
        data_dir: searched first; then ``$E2C_DATA_DIR`` and ``data/processed/eval``.
        limit: keep the first ``limit`` records.
        use_hub: fall back to the hub when no local file (nor an installed package's rows) exists.
    """
    spec = get_spec(name)
    selector = split_selector(resolve_names(name)[0])[1]
    window = lcb_windows.parse_window(selector) if selector else None
    dirs = search_dirs(data_dir)
    if data_dir is not None and not Path(data_dir).is_dir():
        raise UserError(f"--data-dir {data_dir}: no such folder")
    path = find_local(spec, dirs)
    if path is not None:
        recs = records_from_rows(read_rows(path), spec, str(path))
    elif (rows := _builtin_rows(spec)) is not None:
        recs = records_from_rows(rows, spec, f"{spec.name} (installed package data)")
    elif use_hub:
        recs = _from_hub(spec, dirs, window.files if window and spec.hub_files else None)
        if window is not None and window.files and spec.hub_files:
            window = None  # a release read from its own files is exact; its dates are the card's months
    elif spec.builtin is not None:
        raise UserError(
            f"{_no_local_file(spec, dirs)}, and the package that ships its rows is not installed "
            "(pip install -r requirements.txt)"
        )
    else:
        raise UserError(_no_local_file(spec, dirs))
    if window is not None:
        recs = in_window(recs, window, name)
    return recs[:limit] if limit else recs


def load_benchmarks(
    names: str | Iterable[str],
    data_dir: str | Path | None = None,
    limit: int | None = None,
    use_hub: bool = True,
) -> dict[str, list[Record]]:
    """Load a selection (groups allowed): ``{name: records}`` in selection order."""
    return {n: load_benchmark(n, data_dir, limit, use_hub) for n in resolve_names(names)}
