"""Prepare every processed dataset: ``python -m e2c.data.prepare`` (``bash scripts/prepare_all_data.sh``).

Steps, each printing what it wrote: download the paper's data into ``data/raw`` (unless ``--skip-download``;
either the hub's layout or the release's download scripts' is found); convert its SFT pairs and RL prompts;
write the 16 benchmarks in the registry schema; generate ``--synthetic N`` verified synthetic problems; build
EF-SFT data; with ``--code-rl SOURCE ...``, code RL prompts; validate every written file against its schema.
A failed step is reported and the others still run; exit 0 when every requested step succeeded, 1 otherwise
(what succeeded is kept).
More: docs/data.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import E2C
from e2c.commandline.argtypes import EXISTING_DIR, MODEL, OUTPUT_DIR, TEXT, probability, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_fields, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core import progress
from e2c.core.errors import UserError
from e2c.core.files import check_output_dir
from e2c.core.models import ModelSpecError, resolve_model
from e2c.core.paths import data_dir
from e2c.data import code_records, code_sets, efsft, paper, registry
from e2c.data.download import DATA_REPO, download, endpoint, hf_token
from e2c.data.io import read_rows, write_parquet
from e2c.data.schema import validate_file
from e2c.data.synthetic.generate import generate, rows_by_split
from e2c.rewards.kinds import prompt_format

# The paper's README spells the processed files it passes as TRAIN_DATA with hyphens (its
# data/processed/sft/e2c-sft-train.parquet); each of ours is also reachable under that spelling, as a link in
# the same folder. The SFT name is the README's; the validation and RL names follow the release's raw files
# (e2c-rl.parquet, e2c-rl-valid.parquet).
PAPER_NAMES = {
    "e2c_sft_train.parquet": "e2c-sft-train.parquet",
    "e2c_sft_val.parquet": "e2c-sft-valid.parquet",
    "e2c_rl_train.parquet": "e2c-rl-train.parquet",
    "e2c_rl_val.parquet": "e2c-rl-valid.parquet",
}


def link_paper_name(path: Path) -> Path | None:
    """Link the paper's spelling of ``path`` (:data:`PAPER_NAMES`) to it; returns the link, or None when the
    file has no paper name or a real file of that name is there (never replaced)."""
    name = PAPER_NAMES.get(path.name)
    if name is None:
        return None
    alias = path.with_name(name)
    if alias.exists() and not alias.is_symlink():
        return None
    if alias.is_symlink():
        alias.unlink()
    alias.symlink_to(path.name)
    return alias


class Run:
    """Collects what was written and what failed, for the final summary."""

    def __init__(self) -> None:
        self.written: list[tuple[Path, str, int]] = []
        self.failed: list[str] = []
        self.notes: list[str] = []

    def write(self, rows: Sequence[dict[str, Any]], path: Path, schema: str) -> None:
        write_parquet(rows, path)
        n = validate_file(path, schema)
        self.written.append((path, schema, n))
        alias = link_paper_name(path)
        print(
            f"wrote {path} ({n} rows, {schema} schema{f'; also {alias.name}' if alias else ''})", flush=True
        )

    def fail(self, step: str, message: str) -> None:
        self.failed.append(f"{step}: {message}")
        print(f"FAILED {step}: {message}", file=sys.stderr, flush=True)


def _raw_files(raw: Path, pattern: str) -> list[Path]:
    return sorted(p for p in raw.glob(pattern) if p.is_file() and p.suffix in (".parquet", ".jsonl", ".json"))


def raw_files(raw: Path, kind: str) -> list[Path]:
    """The paper's raw ``kind`` files (``sft`` or ``rl``), sorted by name, in both layouts.

    Ours keeps the hub's names at the top of ``raw`` (``e2c-sft.parquet``, ``ef-rl.parquet``,
    ``ef-rl-valid.parquet``); the release's download scripts save them as ``raw/sft/e2c-sft.parquet``
    and ``raw/rl/e2c-rl.parquet`` / ``e2c-rl-valid.parquet``. A name present in both is read once.
    """
    found: dict[str, Path] = {}
    for p in [*_raw_files(raw, f"*{kind}*"), *_raw_files(raw / kind, "*")]:
        found.setdefault(p.name, p)
    return sorted(found.values(), key=lambda p: p.name)


def raw_eval_dirs(raw: Path) -> list[Path]:
    """Folders that may hold the paper's evaluation files: ``raw/evaluation`` (our download) and the
    ``evaluation`` folder next to ``raw`` (the release's scripts write ``data/evaluation``)."""
    return [raw / "evaluation", raw.parent / "evaluation"]


def prepare_paper(
    run: Run, raw: Path, out: Path, val_frac: float, seed: int, skip_rl: bool, skip_sft: bool = False
) -> list[dict] | None:
    """Convert the downloaded SFT and RL files; returns the SFT train rows (or None)."""
    sft_train = None
    sft_files = [] if skip_sft else raw_files(raw, "sft")
    if skip_sft:
        run.notes.append("paper SFT: skipped (--skip-sft)")
    elif sft_files:
        rows, dropped = paper.sft_rows(r for f in sft_files for r in read_rows(f))
        if dropped:
            run.notes.append(f"paper SFT: dropped {dict(dropped)}")
        train, val = paper.split_train_val(rows, paper.first_user, val_frac, seed)
        run.write(train, out / "sft" / "e2c_sft_train.parquet", "sft")
        if val:
            run.write(val, out / "sft" / "e2c_sft_val.parquet", "sft")
        sft_train = train
    else:
        run.notes.append(f"paper SFT: no raw file in {raw} or {raw / 'sft'} (download it with --dataset sft)")
    if skip_rl:
        return sft_train
    rl_files = raw_files(raw, "rl")
    train_files = [f for f in rl_files if "valid" not in f.name and "val." not in f.name]
    val_files = [f for f in rl_files if f not in train_files]
    if train_files:
        rows, dropped = paper.rl_rows(r for f in train_files for r in read_rows(f))
        if dropped:
            run.notes.append(f"paper RL: dropped {dict(dropped)}")
        if val_files:
            val, _ = paper.rl_rows(r for f in val_files for r in read_rows(f))
            keys = {paper.norm_question(paper.first_user(r)) for r in val}
            train = [r for r in rows if paper.norm_question(paper.first_user(r)) not in keys]
        else:
            train, val = paper.split_train_val(rows, paper.first_user, val_frac, seed)
        run.write(train, out / "rl" / "e2c_rl_train.parquet", "rl")
        if val:
            run.write(val, out / "rl" / "e2c_rl_val.parquet", "rl")
    else:
        run.notes.append(f"paper RL: no raw file in {raw} or {raw / 'rl'} (download it with --dataset rl)")
    return sft_train


def prepare_eval(run: Run, raw: Path, out: Path, data_dir: str | None, use_hub: bool) -> None:
    """One registry-schema file per benchmark, from the first source that has it."""
    # The paper's files, --data-dir, $E2C_DATA_DIR; never data/processed/eval, which is where this writes.
    candidates = [*raw_eval_dirs(raw), *registry.search_dirs(data_dir)]
    dirs = [d for d in dict.fromkeys(candidates) if d.is_dir() and d != registry.project_eval_dir()]
    missing = []
    for name in registry.resolve_names("all,med"):
        spec = registry.REGISTRY[name]
        path = registry.find_local(spec, dirs)
        if path is None and not use_hub:
            missing.append(name)
            continue
        try:
            if path is not None:
                recs = registry.records_from_rows(read_rows(path), spec, str(path))
            else:
                recs = registry.load_benchmark(name, data_dir=None, use_hub=True)
        except UserError as e:
            # A local file that cannot be read is a failure to report (not "no local copy"): it names the
            # file and line, so the user can fix it.
            run.fail(f"eval {name}", str(e))
            continue
        run.write([r.to_dict() for r in recs], out / "eval" / f"{name}.parquet", "eval")
    if missing:
        run.notes.append(
            f"eval: no local copy of {', '.join(missing)}; run `bash scripts/download_datasets.sh --dataset eval` "
            f"or pass --data-dir DIR"
        )


def prepare_synthetic(run: Run, out: Path, n: int, seed: int, workers: int = 2) -> list[dict]:
    with progress.bar(n, "synthetic", unit="problem") as pbar:

        def show(kept: int, total: int) -> None:
            if pbar.disable:
                print(f"synthetic: {kept}/{total} problems verified", flush=True)
            else:
                pbar.update(kept - pbar.n)

        samples, report = generate(n, seed=seed, progress=show, workers=workers)
    print(report.line(), flush=True)
    rows = rows_by_split(samples, E2C)
    run.write(rows["sft"], out / "sft" / "synthetic_sft.parquet", "sft")
    run.write(rows["rl"], out / "rl" / "synthetic_rl.parquet", "rl")
    run.write(rows["eval"], out / "eval" / "synthetic.parquet", "eval")
    run.notes.append(report.line())
    return rows["sft"]


# --code-rl deepcoder: DeepCoder-Preview's training splits (its test splits are test_livecodebench and
# test_codeforces in the registry, kept out of training).
DEEPCODER_REPO = "agentica-org/DeepCoder-Preview-Dataset"
DEEPCODER_TRAIN = ("primeintellect", "taco", "lcbv5")


def code_rl_files(source: str) -> list[Path]:
    """The row files of one ``--code-rl`` source: a file, or a folder's .jsonl/.json/.parquet files (sorted);
    UserError naming the source when there are none."""
    p = Path(source)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = _raw_files(p, "*")
        if files:
            return files
        raise UserError(f"--code-rl {source}: no .jsonl, .json or .parquet file in that folder")
    raise UserError(
        f"--code-rl {source}: no such file or folder; valid: a file, a folder, or 'deepcoder' (hub)"
    )


def _deepcoder_rows(use_hub: bool) -> list[tuple[str, Any]]:
    if not use_hub:
        raise UserError("--code-rl deepcoder reads the hub; without --skip-download, or give local files")
    try:
        import datasets

        return [
            (f"deepcoder_{c}", datasets.load_dataset(DEEPCODER_REPO, c, split="train"))
            for c in DEEPCODER_TRAIN
        ]
    except Exception as e:  # no network, no such repo, ...
        raise UserError(
            f"--code-rl deepcoder: {DEEPCODER_REPO} is unavailable ({type(e).__name__})"
        ) from None


def prepare_code_rl(
    run: Run, sources: Sequence[str], out: Path, val_frac: float, seed: int, use_hub: bool
) -> None:
    """Code RL rows from every source, split by a hash of the prompt (as the paper's RL prompts)."""
    parts: list[tuple[str, Any]] = []
    for src in sources:
        if src == "deepcoder":
            parts.extend(_deepcoder_rows(use_hub))
        else:
            parts.extend((f.stem, read_rows(f)) for f in code_rl_files(src))
    fmt = prompt_format(E2C, code_sets.CODE_KIND)
    rows: list[dict[str, Any]] = []
    for name, part in parts:
        got, dropped = code_records.code_rl_rows(part, name, fmt.messages)
        if dropped:
            run.notes.append(f"code RL {name}: dropped {dict(dropped)}")
        rows.extend(got)
    if not rows:
        raise UserError(f"--code-rl: no code problem in {', '.join(sources)}")
    train, val = paper.split_train_val(rows, paper.first_user, val_frac, seed)
    for split in (train, val):  # each file's rows are numbered from 0
        for i, r in enumerate(split):
            r["extra_info"]["index"] = i
    run.write(train, out / "rl" / "code_rl_train.parquet", "rl")
    if val:
        run.write(val, out / "rl" / "code_rl_val.parquet", "rl")


# Any tokenizer with a vocabulary makes tokens of this; one without makes none.
PROBE_TEXT = "Explore first, then execute: 12 + 30 = 42."


def load_tokenizer(spec: str) -> Any:
    """The tokenizer EF-SFT counts tokens with, loaded and tried before any work: a model folder whose
    tokenizer files hold no vocabulary (a bare ``tokenizer_config.json``) loads as a tokenizer that turns
    every text into no tokens, and EF-SFT data built with it would say "trained tokens 0 of 0". UserError
    naming ``--tokenizer`` otherwise."""
    from transformers import AutoTokenizer

    try:
        path = resolve_model(spec).path
    except ModelSpecError as e:
        raise UserError(f"--tokenizer: {e}") from None
    try:
        tok = AutoTokenizer.from_pretrained(path)
        n = efsft.tokenizer_counter(tok)(PROBE_TEXT)
    except Exception as e:  # transformers raises anything (ValueError, OSError, KeyError) for a bad folder
        detail = " ".join(str(e).split())[:200]
        raise UserError(
            f"--tokenizer {spec}: cannot load its tokenizer ({type(e).__name__}: {detail})"
        ) from None
    if not n:
        raise UserError(
            f"--tokenizer {spec}: its tokenizer turns text into no tokens (no vocabulary: tokenizer.json, "
            "vocab.json or tokenizer.model missing?); EF-SFT token counts need a complete tokenizer"
        )
    return tok


def prepare_efsft(
    run: Run, out: Path, sft_rows: list[dict], reg_frac: float, seed: int, tokenizer: str, tok: Any = None
) -> None:
    """EF-SFT rows from ``sft_rows``, counted with ``tok`` (loaded from ``tokenizer`` when not given)."""
    tok = tok if tok is not None else load_tokenizer(tokenizer)
    rows, stats = efsft.build(sft_rows, efsft.tokenizer_counter(tok), reg_frac=reg_frac, seed=seed)
    run.write(rows, out / "ef_sft" / "ef_sft.parquet", "ef_sft")
    print(stats.line(), flush=True)
    run.notes.append(stats.line() + f" [tokenizer: {tokenizer}]")


@dataclass(frozen=True)
class PrepareSettings:
    """The settings of ``python -m e2c.data.prepare`` (``bash scripts/prepare_all_data.sh``); each field is the
    flag its metadata names, declared here once (help line, value type, default)."""

    mirror: bool = field(default=False, metadata=setting("download from hf-mirror.com", flag="--mirror"))
    endpoint: str | None = field(
        default=None,
        metadata=setting(
            "hub base URL (default: $HF_ENDPOINT or huggingface.co)", flag="--endpoint", value=TEXT
        ),
    )
    skip_download: bool = field(
        default=False, metadata=setting("use only files already on disk", flag="--skip-download")
    )
    skip_rl: bool = field(
        default=False, metadata=setting("do not download or convert the RL prompts", flag="--skip-rl")
    )
    skip_sft: bool = field(
        default=False,
        metadata=setting(
            "do not download or convert the paper's SFT pairs (EF-SFT data then comes from the synthetic "
            "SFT set, if any)",
            flag="--skip-sft",
        ),
    )
    num_workers: int = field(
        default=2,
        metadata=setting(
            "parallel processes that verify the synthetic problems by running their traces (default 2)",
            flag="--num-workers",
            value=whole(1, 256),
        ),
    )
    synthetic: int = field(
        default=2000,
        metadata=setting(
            "synthetic problems to generate (0: none; default 2000)", flag="--synthetic", value=whole(0)
        ),
    )
    code_rl: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            "code RL prompts from DeepCoder-style rows: files, folders, or 'deepcoder' (the hub's "
            f"{DEEPCODER_REPO} training splits); written to rl/code_rl_{{train,val}}.parquet (default: none)",
            flag="--code-rl",
            value=TEXT,
        ),
    )
    seed: int = field(
        default=0,
        metadata=setting("seed for synthetic data and splits (default 0)", flag="--seed", value=whole(0)),
    )
    val_frac: float = field(
        default=0.02,
        metadata=setting(
            "validation share of the paper's data, in [0, 1) (default 0.02)",
            flag="--val-frac",
            value=probability(),
        ),
    )
    reg_frac: float = field(
        default=0.05,
        metadata=setting(
            "share of full chains in EF-SFT, in [0, 1) (default 0.05)", flag="--reg-frac", value=probability()
        ),
    )
    tokenizer: str = field(
        default="embedded",
        metadata=setting(
            "tokenizer for EF-SFT token counts: tiny, embedded, a folder or a hub id (default embedded)",
            flag="--tokenizer",
            value=MODEL,
        ),
    )
    data_dir: str | None = field(
        default=None,
        metadata=setting(
            f"local benchmark files <name>.jsonl|parquet (default ${registry.DATA_DIR_ENV})",
            flag="--data-dir",
            value=EXISTING_DIR,
        ),
    )
    # --raw is only read with --skip-download (a read-only folder is fine then), so it is checked in check_args
    raw: str = field(
        default_factory=lambda: str(data_dir() / "raw"),
        metadata=setting("raw download folder (default data/raw)", flag="--raw", value=TEXT),
    )
    out: str = field(
        default_factory=lambda: str(data_dir() / "processed"),
        metadata=setting("output folder (default data/processed)", flag="--out", value=OUTPUT_DIR),
    )

    @classmethod
    def from_flags(cls, args: argparse.Namespace) -> PrepareSettings:
        return cls(**flag_fields(args, cls))


def build_parser() -> ArgumentParser:
    """The command line of ``python -m e2c.data.prepare``: :class:`PrepareSettings`' flags."""
    ap = ArgumentParser(prog="prepare_all_data", description="Prepare SFT, RL, EF-SFT and eval data.")
    add_setting_flags(ap, PrepareSettings)
    return ap


def check_args(args: PrepareSettings) -> Any:
    """Everything the flags' types cannot see, before any work (a bad output folder would otherwise fail
    every step, one by one); returns the EF-SFT tokenizer when a step will need it, else None."""
    for flag in ("val_frac", "reg_frac"):  # a share of 1 leaves nothing on the other side
        if getattr(args, flag) >= 1.0:
            raise UserError(f"--{flag.replace('_', '-')} must be in [0, 1), got {getattr(args, flag)}")
    raw, out = Path(args.raw), Path(args.out)
    check_output_dir(out, "--out")
    if not args.skip_download:
        check_output_dir(raw, "--raw")
        endpoint(args.mirror, args.endpoint)
        hf_token()
    elif raw.exists() and not raw.is_dir():
        raise UserError(f"--raw {raw}: {raw.absolute()} is a file, not a folder")
    for src in args.code_rl or ():
        if src == "deepcoder" and args.skip_download:
            raise UserError("--code-rl deepcoder reads the hub; drop --skip-download, or give local files")
        if src != "deepcoder":
            code_rl_files(src)
    if args.synthetic or not (args.skip_download or args.skip_sft) or raw_files(raw, "sft"):
        return load_tokenizer(args.tokenizer)  # EF-SFT runs last: a bad tokenizer is refused now
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = PrepareSettings.from_flags(build_parser().parse_args(argv))
    tok = check_args(args)
    checks_done()
    raw, out = Path(args.raw), Path(args.out)

    run = Run()
    if not args.skip_download:
        base = endpoint(args.mirror, args.endpoint)
        for which in (*(() if args.skip_sft else ("sft",)), *(() if args.skip_rl else ("rl",)), "eval"):
            print(f"download {which} from {base}/{DATA_REPO}", flush=True)
            try:
                download(which, raw, base=base)
            except UserError as e:
                run.fail(f"download {which}", str(e))
                if "cannot reach" in str(e):
                    break
    steps = [
        (
            "paper data",
            lambda: prepare_paper(run, raw, out, args.val_frac, args.seed, args.skip_rl, args.skip_sft),
        ),
        ("eval", lambda: prepare_eval(run, raw, out, args.data_dir, use_hub=not args.skip_download)),
    ]
    if args.code_rl:
        steps.append(
            (
                "code RL",
                lambda: prepare_code_rl(
                    run, args.code_rl, out, args.val_frac, args.seed, use_hub=not args.skip_download
                ),
            )
        )
    results: dict[str, Any] = {}
    for name, fn in steps:
        try:
            results[name] = fn()
        except UserError as e:
            run.fail(name, str(e))
    synth_sft: list[dict] = []
    if args.synthetic:
        try:
            synth_sft = prepare_synthetic(run, out, args.synthetic, args.seed, args.num_workers)
        except UserError as e:
            run.fail("synthetic", str(e))
    ef_source = results.get("paper data") or synth_sft
    if ef_source:
        try:
            prepare_efsft(run, out, ef_source, args.reg_frac, args.seed, args.tokenizer, tok)
        except UserError as e:
            run.fail("ef_sft", str(e))

    print("\nsummary:")
    for path, schema, n in run.written:
        print(f"  {schema:7s} {n:7d}  {path}")
    for note in run.notes:
        print(f"  note: {note}")
    for f in run.failed:
        print(f"  FAILED {f}")
    return 1 if run.failed else 0


if __name__ == "__main__":
    run_main(main)
