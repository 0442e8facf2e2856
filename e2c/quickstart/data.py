"""The quickstart's data stage: synthetic chains for SFT, RL prompts and held-out problems (the split is a
hash of the problem text), plus the first GSM8K problems of the shared copy."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import atomic_write_json, atomic_write_text
from e2c.core.models import ModelSpecError, hub_unreachable, resolve_model
from e2c.data.io import write_parquet
from e2c.data.registry import find_local, get_spec, read_rows, search_dirs
from e2c.data.synthetic.families import LEVELS, family_names
from e2c.data.synthetic.generate import eval_row, generate, rl_row, sft_row
from e2c.quickstart.config import RL_SIGNAL_FAMILIES, SPLIT_FRACTIONS, Config
from e2c.quickstart.context import Context, rel
from e2c.quickstart.progress import Reporter

MAX_GENERATE = 200_000  # problems generated at most while looking for enough that pass the filters


def generation_count(cfg: Config, length_keep: float = 0.8) -> int:
    """How many problems to generate so that about ``cfg.eval_problems`` held-out ones pass the length filter
    (with a 25% margin): the generator draws only the chosen families and levels."""
    return math.ceil(cfg.eval_problems / (SPLIT_FRACTIONS[2] * length_keep) * 1.25) + 50


def levels_upto(max_level: int) -> tuple[int, ...]:
    """The generator's levels 1..``max_level`` (at least level 1)."""
    return tuple(lv for lv in LEVELS if lv <= max(max_level, 1))


def keep_sample(
    sample: Any, families: Sequence[str], max_level: int, max_tokens: int, count: Callable[[str], int]
) -> bool:
    """A generated problem is kept when it is a plain problem (not a variable-tracing variant) of a chosen
    family, at most ``max_level``, and its exploration + execution is at most ``max_tokens`` tokens."""
    if sample.variant != "solve" or sample.family not in families or sample.level > max_level:
        return False
    return count(sample.exploration + sample.execution) <= max_tokens


def mix_counts(samples: Sequence[Any]) -> dict[str, int]:
    """``{"family/Lk": count}`` sorted by name."""
    c = Counter(f"{s.family}/L{s.level}" for s in samples)
    return dict(sorted(c.items()))


def stage_data(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """Synthetic SFT / RL / held-out eval sets (disjoint), and the first GSM8K problems."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the one-time model conversion would print bars between our lines
    cfg = ctx.cfg
    bad = [f for f in cfg.families if f not in family_names()]
    if bad:
        raise UserError(f"unknown task family {bad[0]!r}; valid: {', '.join(family_names())}")
    try:
        model = resolve_model(cfg.model)
    except ModelSpecError as e:
        raise UserError(str(e)) from None
    count = token_counter(AutoTokenizer.from_pretrained(model.path))

    need = {"sft": max(cfg.sft_batch, 1), "rl": 1, "eval": cfg.eval_problems}
    n = generation_count(cfg)
    while True:
        rep.say(f"generating {n} synthetic problems")
        samples, report = generate(
            n,
            seed=cfg.seed,
            trace_frac=0.0,
            fractions=SPLIT_FRACTIONS,
            workers=2,
            families=cfg.families,
            levels=levels_upto(cfg.max_level),
        )
        kept = [
            s for s in samples if keep_sample(s, cfg.families, cfg.max_level, cfg.max_chain_tokens, count)
        ]
        split = {k: [s for s in kept if s.split == k] for k in ("sft", "rl", "eval")}
        short = {k: (len(split[k]), v) for k, v in need.items() if len(split[k]) < v}
        if not short:
            break
        if n >= MAX_GENERATE:
            what = ", ".join(f"{k} {have}/{want}" for k, (have, want) in short.items())
            raise UserError(
                f"only {what} problems pass the filters (families {','.join(cfg.families)}, level <= "
                f"{cfg.max_level}, <= {cfg.max_chain_tokens} tokens) in {n} generated; widen them"
            )
        n = min(MAX_GENERATE, int(n * 1.6) + 100)
    rep.say(f"{report.line()}; kept {len(kept)} after filters", 0.7)
    split["eval"] = split["eval"][: cfg.eval_problems]
    texts = {k: {s.problem for s in v} for k, v in split.items()}
    overlap = {
        "sft_eval": len(texts["sft"] & texts["eval"]),
        "rl_eval": len(texts["rl"] & texts["eval"]),
        "sft_rl": len(texts["sft"] & texts["rl"]),
    }
    if overlap["sft_eval"] or overlap["rl_eval"]:
        raise RuntimeError(f"held-out problems leaked into training splits: {overlap}")
    d = ctx.data_dir
    files = {
        "sft": write_parquet([sft_row(s) for s in split["sft"]], d / "sft.parquet"),
        "rl": write_parquet([rl_row(s, i) for i, s in enumerate(split["rl"])], d / "rl.parquet"),
        "synthetic": write_parquet([eval_row(s) for s in split["eval"]], ctx.eval_dir / "synthetic.parquet"),
    }
    # The task family and level of each held-out problem, for the report's per-family accuracy.
    families = {eval_row(s)["id"]: f"{s.family}/L{s.level}" for s in split["eval"]}
    files["eval_families"] = d / "eval_families.json"
    atomic_write_json(files["eval_families"], families, indent=1)
    gsm8k = copy_gsm8k(Path(cfg.bench_dir), ctx.eval_dir / "gsm8k.jsonl", cfg.gsm8k_problems)
    if gsm8k["problems"]:
        files["gsm8k"] = ctx.eval_dir / "gsm8k.jsonl"
    chain_tokens = [count(s.exploration + s.execution) for s in split["sft"]]
    explore_tokens = [count(s.exploration) for s in split["sft"]]
    counts = {
        "generated": n,
        "generator": report.line(),
        "kept_after_filters": len(kept),
        "splits": {k: len(v) for k, v in split.items()},
        "mix": {k: mix_counts(v) for k, v in split.items()},
        "overlap": overlap,
        "split_fractions": list(SPLIT_FRACTIONS),
        "chain_tokens": {
            "tokenizer": model.description,
            "median": statistics.median(chain_tokens),
            "max": max(chain_tokens),
            "explore_median": statistics.median(explore_tokens),
        },
        "gsm8k": gsm8k,
    }
    atomic_write_json(d / "counts.json", counts)
    sizes = ", ".join(f"{k} {len(v)}" for k, v in split.items())
    rep.say(f"wrote {sizes}; gsm8k {gsm8k['problems']} ({gsm8k['note']})", 1.0)
    return {
        "outputs": {k: rel(v, ctx.out) for k, v in files.items()}
        | {"counts": rel(d / "counts.json", ctx.out)},
        "counts": counts,
        "commands": [
            f"e2c.data.synthetic.generate.generate({n}, seed={cfg.seed}, trace_frac=0.0, "
            f"fractions={SPLIT_FRACTIONS}, families={list(cfg.families)}, "
            f"levels={list(levels_upto(cfg.max_level))}) + filters"
        ],
    }


def token_counter(tok: Any) -> Callable[[str], int]:
    """Tokens of a text in ``tok`` (special tokens not added), each text encoded once."""
    lengths: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in lengths:
            lengths[text] = len(tok.encode(text, add_special_tokens=False))
        return lengths[text]

    return count


def write_rl_pool(ctx: Context, path: Path, rep: Reporter) -> dict[str, Any]:
    """The RL prompt pool (:func:`rl_pool`) written to ``path`` as verl RL rows; returns its counts."""
    from transformers import AutoTokenizer

    cfg = ctx.cfg
    count = token_counter(AutoTokenizer.from_pretrained(resolve_model(cfg.model).path))
    pool, generated = rl_pool(cfg, count, rep)
    write_parquet([rl_row(s, i) for i, s in enumerate(pool)], path)
    return {
        "prompts": len(pool),
        "generated": generated,
        "families": list(rl_families(cfg)),
        "max_level": rl_max_level(cfg),
        "mix": mix_counts(pool),
    }


def rl_families(cfg: Config) -> tuple[str, ...]:
    """The families RL prompts are drawn from: ``rl_families``, else the run's families among
    :data:`~e2c.quickstart.config.RL_SIGNAL_FAMILIES`, else every family of the run."""
    return cfg.rl_families or tuple(f for f in cfg.families if f in RL_SIGNAL_FAMILIES) or cfg.families


def rl_max_level(cfg: Config) -> int:
    """The highest level of RL prompts: ``rl_max_level``, else the run's ``max_level``."""
    return cfg.rl_max_level or cfg.max_level


def rl_pool(cfg: Config, count: Callable[[str], int], rep: Reporter) -> tuple[list[Any], int]:
    """The first ``cfg.rl_prompts`` problems of the RL families and levels whose hash puts them in the RL
    split, and how many problems were generated to find them.

    The split is a hash of the problem text and the seed, so these never share a text with the SFT or
    held-out problems of the same seed, however many are drawn: the pool is as large as asked, drawn in its
    own generation (the SFT and held-out sets are those of the main one, unchanged by the pool's size).
    """
    families, level = rl_families(cfg), rl_max_level(cfg)
    n = math.ceil(cfg.rl_prompts / (SPLIT_FRACTIONS[1] * 0.8)) + 50
    while True:
        rep.say(
            f"generating {n} problems for {cfg.rl_prompts} RL prompts ({', '.join(families)}, L<={level})"
        )
        samples, _ = generate(
            n,
            seed=cfg.seed,
            trace_frac=0.0,
            fractions=SPLIT_FRACTIONS,
            workers=2,
            families=families,
            levels=levels_upto(level),
        )
        pool = [
            s
            for s in samples
            if s.split == "rl" and keep_sample(s, families, level, cfg.max_chain_tokens, count)
        ]
        if len(pool) >= cfg.rl_prompts:
            return pool[: cfg.rl_prompts], n
        if n >= MAX_GENERATE:
            raise UserError(
                f"only {len(pool)}/{cfg.rl_prompts} RL prompts pass the filters (families {','.join(families)}, "
                f"level <= {level}, <= {cfg.max_chain_tokens} tokens) in {n} generated; lower --rl-prompts"
            )
        n = min(MAX_GENERATE, int(n * 1.6) + 100)


def copy_gsm8k(bench_dir: Path, target: Path, n: int) -> dict[str, Any]:
    """The first ``n`` GSM8K rows written to ``target``, found as every command finds a benchmark
    (:mod:`e2c.data.registry`): a local file in ``bench_dir`` (``--bench-dir``), ``$E2C_DATA_DIR`` or
    ``data/processed/eval``, else the hub copy (``openai/gsm8k``, test split) where the hub is reachable;
    the returned ``note`` says which (the report shows it), or why none."""
    import json

    if n <= 0:
        target.unlink(missing_ok=True)
        return {"problems": 0, "source": None, "note": "skipped (--gsm8k-problems 0)"}
    spec = get_spec("gsm8k")
    dirs = search_dirs(bench_dir if bench_dir.is_dir() else None)
    src = find_local(spec, dirs)
    if src is not None:
        rows, source = list(read_rows(src))[:n], str(src)
    else:
        try:
            import datasets

            why = hub_unreachable()
            if why:
                raise OSError(why)
            ds = datasets.load_dataset(spec.hf_id, spec.hf_config, split=spec.split)
            rows, source = (
                [dict(r) for r in ds.select(range(min(n, len(ds))))],
                f"{spec.hf_id} ({spec.split}, hub)",
            )
        except Exception as e:  # no network, no hub: the run goes on without GSM8K
            target.unlink(missing_ok=True)
            looked = ", ".join(str(d) for d in dirs)
            return {
                "problems": 0,
                "source": None,
                "note": f"skipped: no local copy in {looked} and the hub copy {spec.hf_id} is unavailable "
                f"({e if isinstance(e, OSError) and not e.errno else type(e).__name__}); pass --bench-dir DIR with gsm8k.jsonl",
            }
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))
    return {"problems": len(rows), "source": source, "note": f"first {len(rows)} of {source}"}
