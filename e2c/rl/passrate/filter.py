"""Learnable RL prompts: sample ``k`` answers per RL prompt from the start model, as the RL rollout builds
them, grade them with the RL reward and keep the prompts whose pass rate lies in the band
(:func:`filter_prompts`).
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from e2c.chain import get_format
from e2c.core import progress
from e2c.core.errors import UserError
from e2c.core.files import (
    RecordFile,
    atomic_write_json,
    check_output_file,
)
from e2c.core.run_folder import hold_lock
from e2c.data.bands import (
    Band,
    format_histogram,
    histogram,
    kept_indices,
    parse_band,
)
from e2c.eval.cost import batch_call, usage_mark, usage_since
from e2c.generation.base import Sampling, check_fits, context_length, derive_seed
from e2c.launch.checks import check_data_file
from e2c.rewards.verl_score import compute_score
from e2c.rl.passrate.config import FilterConfig, PassRateFiles
from e2c.rl.passrate.samples import read_samples, sample_line
from e2c.rl.passrate.summary import build_report, family_mix, plot_histogram, with_pass_rates, write_rl_table


# ------------------------------------------------------------------------------------------- the data
def check_paths(input_path: str | Path, output_path: str | Path) -> PassRateFiles:
    """Refuse, before any work, an input that is not an RL parquet in verl's schema, and outputs that would
    overwrite the input or cannot be written. Returns the run's files."""

    src, out = Path(input_path), Path(output_path)
    if src.is_dir():
        raise UserError(f"--input {src} is a folder; give an RL .parquet file")
    if not src.is_file():
        raise UserError(f"--input {src}: no such file (prepare it with bash scripts/prepare_all_data.sh)")
    if src.suffix.lower() != ".parquet":
        raise UserError(
            f"--input {src}: the RL trainer reads .parquet files, not {src.suffix or 'no suffix'}"
        )
    if out.suffix.lower() != ".parquet":
        raise UserError(f"--output {out}: name it .parquet (the RL trainer reads parquet files)")
    files = PassRateFiles.of(out)
    for path in (files.output, files.samples, files.report, files.plot):
        check_output_file(path, "--output", inputs=[src])
    try:  # as the RL launcher checks its data: a missing column is named as such
        check_data_file(str(src), "--input", "rl", (".parquet",), "--input")
    except UserError as e:  # also an unreadable parquet, which names only the file
        msg = str(e)
        raise UserError(msg if msg.startswith("--input") else f"--input {msg}") from None
    return files


def read_table(input_path: str | Path, limit: int | None = None) -> Any:
    """The input as a pyarrow table (its first ``limit`` rows), read as the trainer reads it."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(input_path)
    except Exception as e:  # checked by check_paths; a file replaced since then
        raise UserError(
            f"--input {input_path}: not a readable parquet file ({type(e).__name__}: {e})"
        ) from None
    return table.slice(0, limit) if limit is not None else table


def row_key(row: dict[str, Any]) -> str:
    """A fingerprint of what decides a prompt's samples and grades (its prompt, source, reference and
    ``extra_info`` other than ``pass_rate``): a resumed run checks that row ``i`` is still the same prompt."""
    info = {k: v for k, v in (row.get("extra_info") or {}).items() if k != "pass_rate"}
    what = [
        row.get("prompt"),
        row.get("data_source"),
        (row.get("reward_model") or {}).get("ground_truth"),
        info,
    ]
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def rl_prompts(tokenizer: Any, rows: Sequence[dict[str, Any]], fmt: Any) -> list[str]:
    """Each row's prompt as the RL agent loop builds it (:mod:`e2c.rl.agent_loop`): the row's chat
    messages through the chat template with a generation prompt, then the format's prefilled opener."""
    return [fmt.render_chat(tokenizer, list(row["prompt"]), "full") for row in rows]


def grade_samples(
    row: dict[str, Any], responses: Sequence[str], reward_kwargs: Mapping[str, Any] | None = None
) -> list[tuple[int, float]]:
    """``(correct, reward)`` per response from one call of the RL reward,
    :func:`e2c.rewards.verl_score.compute_score`, with the row's data source, reference and ``extra_info``
    and the RL run's ``reward_kwargs`` (they win over the row's, as verl binds them): ``correct`` is the
    evaluation's correctness (``answer_correct``: the answer, whatever its chain's form), ``reward`` the
    score GRPO would see (the overlong penalty aside: the filter's samples stop at the run's length)."""

    gold = (row.get("reward_model") or {}).get("ground_truth")
    info = {**(row.get("extra_info") or {}), **(reward_kwargs or {})}
    out = []
    for r in responses:
        res = compute_score(row.get("data_source"), r, gold, info)
        out.append((int(res["answer_correct"] > 0), float(res["score"])))
    return out


# ------------------------------------------------------------------------------------------ the runner
def enough(done: Mapping[int, Mapping[str, Any]], upto: int, band: Band, keep: int | None) -> bool:
    """Whether the first ``upto`` prompts are all sampled and at least ``keep`` of them are in ``band``
    (never, without ``keep``)."""
    if keep is None or any(i not in done for i in range(upto)):
        return False
    rates = [done[i]["pass_rate"] for i in range(upto)]
    return len(kept_indices(rates, band, [done[i]["rewards"] for i in range(upto)])) >= keep


def filter_prompts(
    gen: Any,
    input_path: str | Path,
    output_path: str | Path,
    cfg: FilterConfig,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Sample, grade and filter the prompts of an RL parquet; writes the kept rows, the report and the plot
    (docs/data.md, "Learnable RL prompts: the pass-rate filter") and returns the report.

    ``gen`` is any :class:`~e2c.generation.base.Generator` (vLLM, transformers, scripted). Raises
    :class:`UserError` for bad input and when no prompt is left in the band; then nothing but the samples
    file (which a rerun with another band reuses) is written.
    """

    band = parse_band(cfg.band)
    files = check_paths(input_path, output_path)
    table = read_table(input_path, cfg.limit)
    rows = table.to_pylist()
    fmt = get_format(cfg.format)
    prompts = rl_prompts(gen.tokenizer, rows, fmt)
    keys = [row_key(r) for r in rows]
    context = context_length(gen)
    if context is not None and prompts:
        lengths = [len(gen.tokenizer.encode(p, add_special_tokens=False)) for p in prompts]
        i = max(range(len(prompts)), key=lengths.__getitem__)
        check_fits(lengths[i], cfg.max_tokens, context, f"--input row {i}'s prompt", "--max-tokens")

    # One filter at a time writes these files (a second one would append the same prompts again).
    with hold_lock(files.lock, "pass-rate filter", str(files.samples), "--output", log):
        settings = cfg.sample_settings()
        done = read_samples(files.samples, settings)
        for i, rec in done.items():
            if i < len(rows) and rec.get("key") != keys[i]:
                raise UserError(
                    f"{files.samples}: prompt {i} differs from --input row {i}; the input changed since these "
                    "samples were drawn: delete the file to start over, or give another --output"
                )
        sampling = Sampling(
            n=cfg.k,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            stop=fmt.stop_strings("full"),  # the rollout stops at the execution's closing tag, as inference
        )
        t0, new_tokens = time.perf_counter(), 0
        reward = cfg.reward_kwargs()
        have = sum(1 for i in done if i < len(rows))
        batches = [range(s, min(s + cfg.batch_size, len(rows))) for s in range(0, len(rows), cfg.batch_size)]
        pbar = progress.bar(len(rows), "pass rate", unit="prompt", initial=have)
        fresh = not files.samples.exists() or files.samples.stat().st_size == 0
        files.samples.parent.mkdir(parents=True, exist_ok=True)
        with pbar, RecordFile(files.samples) as f, ThreadPoolExecutor(cfg.grader_threads) as pool:
            if fresh:
                f.write([{"settings": settings}])
            for b, batch in enumerate(batches):
                if enough(done, batch.start, band, cfg.keep):
                    break  # the batches before this one kept enough (this run's, or a resumed file's)
                todo = [i for i in batch if i not in done]
                if not todo:
                    continue
                # One seed per fixed batch: a resumed batch is drawn as it was (same machine and backend).
                mark, started = usage_mark(gen), time.perf_counter()
                outs = gen.generate(
                    [prompts[i] for i in todo], sampling.replace(seed=derive_seed(cfg.seed, "passrate", b))
                )
                grown = usage_since(gen, mark)
                calls, sequences, prompt_tokens = grown or (1, sum(len(r) for r in outs), None)
                call = batch_call(
                    b,
                    calls,
                    len(todo),
                    sequences,
                    prompt_tokens,
                    time.perf_counter() - started,
                    batch_size=cfg.batch_size,  # batches of another size are other batches
                )
                # text_with_stop: the closing tag the rollout's response keeps (it stops on the tag's id). The
                # whole batch is graded at once, so slow symbolic checks of one prompt overlap the others'.
                flat = [
                    (rows[i], c.text_with_stop) for i, comps in zip(todo, outs, strict=True) for c in comps
                ]
                grades = list(pool.map(lambda rc: grade_samples(rc[0], [rc[1]], reward)[0], flat))
                for n, (i, comps) in enumerate(zip(todo, outs, strict=True)):
                    mine = grades[n * cfg.k : (n + 1) * cfg.k]
                    done[i] = sample_line(i, keys[i], [c for c, _ in mine], comps, call, [r for _, r in mine])
                    new_tokens += sum(c.num_tokens for c in comps)
                f.write([done[i] for i in todo])  # the batch's lines, all or none
                f.sync()
                pbar.update(len(todo))
                secs = time.perf_counter() - t0
                counts = histogram([sum(done[i]["correct"]) for i in done if i < len(rows)], cfg.k)
                status = f"p=0: {counts[0]}, 0<p<1: {sum(counts[1:-1])}, p=1: {counts[-1]}"
                if pbar.disable:
                    log(
                        f"pass rate: {sum(counts)}/{len(rows)} prompts ({status}), "
                        f"{new_tokens / max(secs, 1e-9):.0f} tok/s"
                    )
                else:
                    pbar.set_postfix_str(status)

        # The prompts read: every row, or with --keep the rows up to the batch that had enough.
        read = len(rows)
        if cfg.keep is not None:
            read = next((b.stop for b in batches if enough(done, b.stop, band, cfg.keep)), len(rows))
        results = [done[i] for i in range(read)]
        table = table.slice(0, read)
        rates = [r["pass_rate"] for r in results]
        counts = histogram([sum(r["correct"]) for r in results], cfg.k)
        keep = kept_indices(rates, band, [r["rewards"] for r in results])
        if not keep:
            raise UserError(
                f"no prompt left in --band {cfg.band} ({band.describe()}): correct samples per prompt out of "
                f"k={cfg.k} over {len(rows)} prompts: {format_histogram(counts)}; no output written (the samples "
                f"stay in {files.samples}: a rerun with another --band reuses them)"
            )
        out_table = with_pass_rates(table, keep, rates)
        report = build_report(cfg, band, input_path, files, results, counts, keep, gen)
        report["mix"] = family_mix(rows[:read], results, keep)
        write_rl_table(out_table, files.output)

        atomic_write_json(files.report, report)
        plot_histogram(report, files.plot)
        log(f"kept {len(keep)} of {len(rows)} prompts ({band.describe()}): {files.output}")
        return report
