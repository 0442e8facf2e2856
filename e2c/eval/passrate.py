"""Learnable RL prompts: keep the prompts the start model solves sometimes, but not always or never.

For each prompt of an RL parquet it samples ``k`` answers from the model RL starts from, built as the RL
rollout builds them, grades each with the RL reward, and keeps the prompts whose pass rate lies in ``--band``
(:data:`e2c.data.bands.BANDS`; default ``learnable``, 0 < p < 1) or, with ``--band varies``, whose reward
varies. Writes ``X.parquet`` (kept rows, ``extra_info.pass_rate`` added), ``X.passrate.json``,
``X.passrate.png`` and ``X.passrate.jsonl`` (per-prompt samples, appended batch by batch: a killed run
resumes, another ``--band`` costs no generation, and the reported cost is summed from its lines). Bad input,
and a band that keeps no prompt, is one ``error:`` line, exit 2, with no output written.
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import FORMATS, get_format
from e2c.commandline.argtypes import (
    ANY_TEXT,
    EXISTING_FILE,
    MODEL,
    OUTPUT_FILE,
    TEXT,
    positive,
    probability,
    whole,
)
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_values, setting
from e2c.commandline.parsing import (
    DTYPES,
    ArgumentParser,
    count_lines,
    exit_interrupted,
    interrupt_on_sigterm,
    quiet_libraries,
    resume_command,
)
from e2c.core import progress
from e2c.core.errors import UserError
from e2c.core.files import (
    RecordFile,
    atomic_write_json,
    check_output_file,
    read_file_bytes,
    read_records,
    temp_sibling,
)
from e2c.core.models import default_subfolder, resolve_model
from e2c.core.paths import configs_dir
from e2c.core.run_folder import check_lock, hold_lock, identity_diff
from e2c.core.runinfo import git_commit
from e2c.data.bands import (
    BAND,
    DEFAULT_BAND,
    Band,
    band_choices,
    format_histogram,
    histogram,
    kept_indices,
    parse_band,
    pass_rate,
    reward_varies,
)
from e2c.data.io import write_table
from e2c.data.schema import validate_rows
from e2c.eval.cost import batch_call, total_cost, usage_mark, usage_since
from e2c.eval.plots import pyplot
from e2c.eval.run import parse_gpus
from e2c.generation import ALIASES, BACKENDS, pick_backend, run_generator
from e2c.generation.base import Sampling, check_fits, context_length, derive_seed
from e2c.launch.checks import check_data_file
from e2c.rewards.shape import DEFAULT_REWARD_SHAPE, REWARD_SHAPES
from e2c.rewards.verl_score import compute_score

DEFAULT_K = 8
DEFAULT_MODEL = "models/checkpoints/sft/final"  # the RL configs' start model
DEFAULT_INPUT = "data/processed/rl/e2c_rl_train.parquet"
# the RL rollout's temperature (actor_rollout_ref.rollout.temperature in configs/e2c_common.yaml)
DEFAULT_TEMPERATURE = 1.0
FALLBACK_RESPONSE_LENGTH = 8192  # data.max_response_length of the paper's RL configs
HF_ROWS = 32  # transformers backend: sequences decoded at once (the quickstart's best batch on 2 cores)
VLLM_ROWS = 2048  # vLLM: sequences per call, as eval's chunks
# Settings that change what is sampled and how it is graded: a resumed run must use the same ones.
SAMPLE_FIELDS = (
    "model",
    "subfolder",
    "format",
    "k",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "reward_shape",
    "plan_bonus",
)
# What a sample setting a samples file does not record is compared as: None, which no run asks for, so a
# file whose lines hold no rewards is refused as any other change of settings is.
RECORDED_BEFORE: dict[str, Any] = {"reward_shape": None, "plan_bonus": None}


def rl_response_length() -> int:
    """The RL run's response length: ``data.max_response_length`` of ``configs/e2c_common.yaml`` (the
    settings every GRPO and DAPO stage starts from), so the filter and the run agree by default; 8,192 (the
    paper's) when the config cannot be read (a package installed outside a checkout)."""
    try:
        import yaml

        data = yaml.safe_load((configs_dir() / "e2c_common.yaml").read_text(encoding="utf-8"))
        value = data["data"]["max_response_length"]
        return int(value) if isinstance(value, int) and value > 0 else FALLBACK_RESPONSE_LENGTH
    except Exception:  # any unreadable config: the paper's value
        return FALLBACK_RESPONSE_LENGTH


def _format_names() -> tuple[str, ...]:

    return tuple(FORMATS)


@dataclass
class FilterConfig:
    """Settings of one filter run. A field with a flag in its metadata is a flag of ``python -m
    e2c.eval.passrate`` (:func:`e2c.commandline.flags.add_setting_flags`): its spelling, ``--help`` line, type and
    command-line default live here, and the parser checks it; the run trusts a config built from them."""

    model: str = field(
        metadata=setting(
            "the model RL starts from: folder, HF id, 'embedded' or 'tiny'",
            flag="--model",
            flag_help="the model RL starts from: folder, HF id, 'embedded' or 'tiny' "
            f"(default: {DEFAULT_MODEL}, the RL configs' start model)",
            flag_default=None,  # main() names the default; a missing one is then the model's own error line
            value=MODEL,
        )
    )
    subfolder: str | None = field(
        default=None,
        metadata=setting(
            "subfolder of the model (default: 8B for the released checkpoint, else none)",
            flag="--subfolder",
            value=ANY_TEXT,  # '' means none (not the release's 8B), as in eval and TTS
        ),
    )
    format: str = field(
        default="e2c",  # the RL run's chain format (e2c.rollout.format): its opener is prefilled
        metadata=setting(
            "chain format of the RL run (default: e2c)",
            flag="--format",
            choices=_format_names,
            choices_label="chain formats",
        ),
    )
    k: int = field(
        default=DEFAULT_K,
        metadata=setting(
            f"samples per prompt, at least 2: one gives pass rates of 0 or 1 only (default: {DEFAULT_K})",
            flag="--k",
            value=whole(2),
        ),
    )
    band: str = field(
        default=DEFAULT_BAND,
        metadata=setting(
            f"pass rates to keep: {band_choices()} (default: {DEFAULT_BAND})", flag="--band", value=BAND
        ),
    )
    temperature: float = field(
        default=DEFAULT_TEMPERATURE,
        metadata=setting(
            f"sampling temperature, > 0: 0 would be greedy, k copies of one answer (default: "
            f"{DEFAULT_TEMPERATURE:g}, the RL rollout's)",
            flag="--temperature",
            value=positive(),
        ),
    )
    top_p: float = field(
        default=1.0,
        metadata=setting(
            "nucleus sampling mass (default: 1.0, the RL rollout's)",
            flag="--top-p",
            value=probability(open_zero=True),
        ),
    )
    max_tokens: int = field(
        default=FALLBACK_RESPONSE_LENGTH,
        metadata=setting(
            "new tokens per sample; give the RL run's data.max_response_length (default: "
            "configs/e2c_common.yaml's; a sample cut there is graded as the rollout's would be)",
            flag="--max-tokens",
            flag_default=lambda: rl_response_length(),
            value=whole(1),
        ),
    )
    seed: int = field(
        default=0, metadata=setting("random seed of the sampling (default: 0)", flag="--seed", value=whole(0))
    )
    # the RL run's reward (e2c.rewards.shape and the plan bonus): each sample gets the reward RL would give
    # it, so the band "varies" keeps exactly the prompts whose GRPO groups have an advantage
    reward_shape: str = field(
        default=DEFAULT_REWARD_SHAPE,
        metadata=setting(
            "the RL run's reward shape, which every sample is graded with: "
            + "; ".join(f"{n}: {sh.help}" for n, sh in REWARD_SHAPES.items())
            + f" (default: {DEFAULT_REWARD_SHAPE})",
            flag="--reward-shape",
            choices=tuple(REWARD_SHAPES),
            choices_label="reward shapes",
        ),
    )
    plan_bonus: bool = field(
        default=False,
        metadata=setting("grade with the RL run's plan-adherence bonus (default: off)", flag="--plan-bonus"),
    )
    batch_size: int = field(
        default=4,  # prompts per generation call and per resume unit
        metadata=setting(
            f"prompts per generation call, each call one unit of resume (default: {VLLM_ROWS} // k on vllm, "
            f"{HF_ROWS} // k on hf, whose rows of a call decode together)",
            flag="--batch-size",
            flag_default=None,  # the run derives it from the backend (default_batch_size)
            value=whole(1),
        ),
    )
    limit: int | None = field(
        default=None,
        metadata=setting("first N prompts of the input only (default: all)", flag="--limit", value=whole(1)),
    )
    # stop once this many prompts are in the band (the input read in order): a run needing N prompts samples
    # about N / (share in band) of them, not the whole pool
    keep: int | None = field(
        default=None,
        metadata=setting(
            "stop once N prompts are in the band, reading the input in order (default: read every prompt)",
            flag="--keep",
            value=whole(1),
        ),
    )
    grader_threads: int = 4  # grading runs in threads; the grader's symbolic checks in its own processes
    extra: dict[str, Any] = field(default_factory=dict)  # recorded in the report, not compared

    @classmethod
    def from_flags(cls, args: argparse.Namespace, backend: str) -> FilterConfig:
        """The run's settings from parsed flags: the subfolder and the batch size resolved for the model and
        the backend."""

        values = flag_values(args, cls)
        return cls(
            **{
                **values,
                "subfolder": default_subfolder(values["model"], values["subfolder"]),
                "batch_size": values["batch_size"] or default_batch_size(backend, values["k"]),
            }
        )

    def sample_settings(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in SAMPLE_FIELDS}

    def reward_kwargs(self) -> dict[str, Any]:
        """The RL reward function's keywords this filter grades with."""
        return {**REWARD_SHAPES[self.reward_shape].reward_kwargs(), "plan_bonus": self.plan_bonus}


@dataclass(frozen=True)
class PassRateFiles:
    """The files of one run, named after its output parquet ``X.parquet``."""

    output: Path  # X.parquet: the kept rows
    samples: Path  # X.passrate.jsonl: per-prompt results, appended as batches finish (resume)
    report: Path  # X.passrate.json
    plot: Path  # X.passrate.png
    lock: Path  # X.passrate.lock: held by the filter that writes these files (e2c.core.run_folder.hold_lock)

    @classmethod
    def of(cls, output: str | Path) -> PassRateFiles:
        """The files beside ``output``.

        >>> PassRateFiles.of("rl/train.filtered.parquet").report.as_posix()
        'rl/train.filtered.passrate.json'
        """
        out = Path(output)
        stem = out.with_suffix("")
        return cls(
            out,
            Path(f"{stem}.passrate.jsonl"),
            Path(f"{stem}.passrate.json"),
            Path(f"{stem}.passrate.png"),
            Path(f"{stem}.passrate.lock"),
        )


def default_output(input_path: str | Path) -> Path:
    """``X.filtered.parquet`` beside the input ``X.parquet``.

    >>> default_output("data/processed/rl/e2c_rl_train.parquet").as_posix()
    'data/processed/rl/e2c_rl_train.filtered.parquet'
    """
    p = Path(input_path)
    return p.with_name(f"{p.with_suffix('').name}.filtered.parquet")


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


# -------------------------------------------------------------------------------------- resume file
def check_resume(path: Path, settings: dict[str, Any]) -> None:
    """Refuse a samples file written with other settings (its first line), without changing it: checked
    before the model is loaded, so the refusal costs nothing."""
    try:
        with path.open("rb") as f:
            first = f.readline()
    except FileNotFoundError:
        return
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None
    if not first.endswith(b"\n"):  # empty, or a settings line cut by a kill: the file starts again
        return
    try:
        before = json.loads(first)["settings"]
        # A setting the file does not record is compared as RECORDED_BEFORE's value (None, refused).
        diff = identity_diff(
            {f: before.get(f, RECORDED_BEFORE.get(f)) for f in SAMPLE_FIELDS},
            {f: settings[f] for f in SAMPLE_FIELDS},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{path} is not a pass-rate samples file; move it away to start over") from None
    if diff:
        what = ", ".join(diff)
        raise UserError(
            f"{path} holds samples drawn with other settings ({what}); delete it to start over, "
            "or give another --output"
        )


def read_samples(path: Path, settings: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """``{prompt index: line}`` from a samples file written with ``settings`` (its first line).

    A file written with other settings is refused (:func:`check_resume`); a last line cut by a kill is
    removed from the file, and its prompt is sampled again.
    """
    check_resume(path, settings)
    data = read_file_bytes(path)
    if b"\n" not in data:  # empty, or a settings line cut by a kill: start the file again
        if data:
            path.write_bytes(b"")
        return {}
    hint = "move the file away to start over"
    out: dict[int, dict[str, Any]] = {}
    for n, rec in read_records(path, repair=True, what="pass-rate line", hint=hint, data=data)[1:]:
        try:
            out[int(rec["index"])] = rec
            if len(rec["correct"]) != settings["k"] or len(rec["rewards"]) != settings["k"]:
                raise ValueError(f"{len(rec['correct'])} samples, not k={settings['k']}")
        except (ValueError, KeyError, TypeError) as e:
            raise UserError(f"{path} line {n}: not a pass-rate line ({e}); {hint}") from None
    return out


def sample_line(
    index: int,
    key: str,
    correct: Sequence[int],
    completions: Sequence[Any],
    call: dict[str, Any] | None = None,
    rewards: Sequence[float] | None = None,
) -> dict[str, Any]:
    """One prompt's line of the samples file: per sample, the evaluation's correctness and the RL reward
    (``rewards``, default: the correctness); ``call``: the generation figures of its batch
    (:func:`e2c.eval.cost.batch_call`)."""
    return {
        "index": index,
        "key": key,
        "correct": [int(c) for c in correct],
        "rewards": [float(r) for r in (correct if rewards is None else rewards)],
        "pass_rate": pass_rate(correct),
        "tokens": [c.num_tokens for c in completions],
        "truncated": sum(c.finish_reason == "length" for c in completions),
        **({"call": call} if call is not None else {}),
    }


def samples_cost(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The cost of the prompts' lines (:func:`e2c.eval.cost.total_cost`): a batch's one call counted once
    however its lines were written (a batch cut by a kill and finished by a later call included). A line
    without its batch's ``"call"`` (an older toolkit's) gives its tokens and sequences; its batch is
    unknown (the batch size is not a recorded setting), so calls, prompt tokens and seconds are partial."""

    return total_cost(
        results,
        lambda r: sum(int(t) for t in r.get("tokens") or ()),
        lambda r: {"sequences": len(r.get("tokens") or ()), "records": 1},
    )


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


def build_report(
    cfg: FilterConfig,
    band: Band,
    input_path: str | Path,
    files: PassRateFiles,
    results: Sequence[dict[str, Any]],
    counts: Sequence[int],
    keep: Sequence[int],
    gen: Any,
) -> dict[str, Any]:
    """The report's content (docs/data.md, the pass-rate filter). Its ``usage`` and ``seconds`` are the cost of the
    ``results`` lines (:func:`samples_cost`), not of this process's generator: a rerun that generates
    nothing reports what the samples cost."""

    kept = set(keep)
    rates = [r["pass_rate"] for r in results]
    samples = max(1, len(results) * cfg.k)
    usage = samples_cost(results)
    return {
        "input": str(input_path),
        "output": str(files.output),
        "samples_file": str(files.samples),
        "model": cfg.model,
        **({"subfolder": cfg.subfolder} if cfg.subfolder else {}),
        **cfg.extra,
        "backend": getattr(gen, "name", type(gen).__name__),
        "format": cfg.format,
        "k": cfg.k,
        "band": {"spec": cfg.band, "name": band.name, "interval": band.spec(), "describe": band.describe()},
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_tokens,
        "seed": cfg.seed,
        "reward_shape": cfg.reward_shape,
        "plan_bonus": cfg.plan_bonus,
        "prompts": len(results),
        # prompts whose samples' rewards differ: the GRPO groups with an advantage under the start model
        "reward_varies": sum(reward_varies(r["rewards"]) for r in results),
        "kept": len(keep),
        "dropped": len(results) - len(keep),
        "never_solved": counts[0],
        "always_solved": counts[-1],
        "mean_pass_rate": sum(rates) / max(1, len(rates)),
        "truncated_share": sum(r["truncated"] for r in results) / samples,
        "mean_response_tokens": sum(sum(r["tokens"]) for r in results) / samples,
        "histogram": [
            {"correct": j, "pass_rate": j / cfg.k, "prompts": c, "in_band": band.contains(j / cfg.k)}
            for j, c in enumerate(counts)
        ],
        "pass_rates": rates,
        "kept_rows": [i for i in range(len(results)) if i in kept],
        "usage": usage,
        "seconds": usage["seconds"],  # generation seconds the lines recorded
        "git_commit": git_commit(),
    }


def family_mix(
    rows: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]], keep: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Per ``family/L<level>`` of the rows' ``extra_info`` (``data_source`` when a row names no family):
    prompts read, kept, and their mean pass rate (the evaluation's correctness), sorted by name.

    >>> rows = [{"extra_info": {"family": "f", "difficulty": 1}}] * 2
    >>> family_mix(rows, [{"pass_rate": 0.5}, {"pass_rate": 0.0}], [0])
    {'f/L1': {'read': 2, 'kept': 1, 'mean_pass_rate': 0.25}}
    """
    kept = set(keep)
    out: dict[str, dict[str, Any]] = {}
    for i, (row, res) in enumerate(zip(rows, results, strict=True)):
        info = row.get("extra_info") or {}
        name = str(info.get("family") or row.get("data_source") or "?")
        if info.get("difficulty") is not None:
            name += f"/L{info['difficulty']}"
        m = out.setdefault(name, {"read": 0, "kept": 0, "rate_sum": 0.0})
        m["read"] += 1
        m["kept"] += i in kept
        m["rate_sum"] += float(res["pass_rate"])
    return {
        k: {"read": m["read"], "kept": m["kept"], "mean_pass_rate": m["rate_sum"] / m["read"]}
        for k, m in sorted(out.items())
    }


def with_pass_rates(table: Any, keep: Sequence[int], rates: Sequence[float]) -> Any:
    """The kept rows of ``table`` with every column as it was, and ``pass_rate`` added to (or replaced in)
    each row's ``extra_info`` struct; a table whose ``extra_info`` is not a struct keeps its rows unchanged."""
    import pyarrow as pa

    sub = table.take(pa.array(list(keep), type=pa.int64()))
    at = sub.schema.get_field_index("extra_info")
    if at < 0 or not pa.types.is_struct(sub.schema.field(at).type):
        return sub
    col = sub.column(at).combine_chunks()
    fields = [f for f in col.type if f.name != "pass_rate"]
    children = [col.field(f.name) for f in fields]
    fields.append(pa.field("pass_rate", pa.float64()))
    children.append(pa.array([float(rates[i]) for i in keep], type=pa.float64()))
    mask = col.is_null() if col.null_count else None
    merged = pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    return sub.set_column(at, pa.field("extra_info", merged.type), merged)


def write_rl_table(table: Any, path: Path) -> None:
    """Check the rows against the rl schema, then write the table (:func:`e2c.data.io.write_table`,
    atomically)."""

    validate_rows(table.to_pylist(), "rl", str(path))
    write_table(table, path)


def plot_histogram(report: dict[str, Any], path: Path) -> None:
    """Prompts per number of correct samples, the bins the band keeps coloured; written atomically."""

    plt = pyplot()
    bins = report["histogram"]
    k = report["k"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [b["correct"] for b in bins]
    ys = [b["prompts"] for b in bins]
    colors = ["C0" if b["in_band"] else "C7" for b in bins]
    ax.bar(xs, ys, 0.8, color=colors)
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(
            str(y), (x, y), ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points"
        )
    ax.set_xticks(xs, [f"{j}/{k}" for j in xs])
    ax.set_xlabel(f"correct samples out of k={k} (pass rate)")
    ax.set_ylabel("prompts")
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    kept = f"kept: {report['band']['describe']} ({report['kept']} prompts)"
    dropped = f"dropped ({report['dropped']} prompts)"
    ax.legend(handles=[Patch(color="C0", label=kept), Patch(color="C7", label=dropped)])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max([*ys, 1]) * 1.15)  # room for the counts above the bars
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"Pass rates of {report['prompts']} RL prompts, T={report['temperature']:g}")
    fig.tight_layout()
    tmp = temp_sibling(path)
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- CLI


def default_batch_size(backend: str, k: int) -> int:
    """Prompts per call: about 2,048 sequences on vLLM, 32 on transformers, at least one prompt."""
    return max(1, (VLLM_ROWS if backend == "vllm" else HF_ROWS) // k)


def _backend_choices() -> tuple[str, ...]:

    return (*BACKENDS, *ALIASES)


def _dtypes() -> tuple[str, ...]:

    return tuple(DTYPES)


@dataclass(frozen=True)
class RunControl:
    """Where the filter's files are and how it runs, beside what it keeps (:class:`FilterConfig`); each
    field is its flag, declared here once."""

    input: str | None = field(
        default=None,
        metadata=setting(
            "RL parquet in verl's schema (default: data/processed/rl/e2c_rl_train.parquet)",
            flag="--input",
            value=EXISTING_FILE,
        ),
    )
    output: str | None = field(
        default=None,
        metadata=setting(
            "kept rows (.parquet); the report, plot and samples file go beside it as "
            "<name>.passrate.{json,png,jsonl} (default: <input name>.filtered.parquet beside the input)",
            flag="--output",
            value=OUTPUT_FILE,
        ),
    )
    backend: str = field(
        default="auto",
        metadata=setting(
            "auto, vllm or hf (transformers) (default: auto: vllm when installed, GPU or CPU, else hf)",
            flag="--backend",
            choices=_backend_choices,
        ),
    )
    gpus: str | None = field(
        default=None,
        metadata=setting(
            "GPU count or device ids 0,1,..; vLLM tensor parallel size (default: all visible)",
            flag="--gpus",
            value=TEXT,
        ),
    )
    dtype: str = field(
        default="auto",
        metadata=setting(
            "model dtype (default: auto: bf16 on GPUs and on CPUs with native bf16, else float32)",
            flag="--dtype",
            choices=_dtypes,
        ),
    )
    trust_remote_code: bool = field(
        default=False,
        metadata=setting("allow the model repo's own Python code to run", flag="--trust-remote-code"),
    )
    quiet: bool = field(default=False, metadata=setting("no progress lines", flag="--quiet"))


# Older spellings of a setting's value, kept as flags that set it (declared by hand: they are not settings).
OLD_SPELLINGS = ("--require-format",)


def build_parser() -> argparse.ArgumentParser:
    """The run's flags: what it keeps (:class:`FilterConfig`) and how it runs (:class:`RunControl`), each
    declared once in its dataclass; and ``--require-format``, an older spelling of ``--reward-shape gate``."""

    p = ArgumentParser(prog="python -m e2c.eval.passrate", description=__doc__.split("\n\n")[0])
    add_setting_flags(p, FilterConfig)
    p.add_argument(
        "--require-format",
        dest="reward_shape",
        action="store_const",
        const="gate",
        help="the same as --reward-shape gate (an older spelling; default: off)",
    )
    add_setting_flags(p, RunControl)
    return p


def run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """Check every input, then load the model and filter; returns the report."""

    quiet_libraries()
    backend = pick_backend(args.backend)
    cfg = FilterConfig.from_flags(args, backend)
    output = Path(args.output) if args.output else default_output(args.input)
    files = check_paths(args.input, output)
    check_resume(files.samples, cfg.sample_settings())
    check_lock(files.lock, str(files.samples), "--output")
    gpus = None
    if args.gpus is not None:
        gpus = parse_gpus(args.gpus)
    # The model after the data: a bad input is named before minutes of model loading.
    res = resolve_model(args.model, cfg.subfolder, fmt=FORMATS[cfg.format])
    checks_done()
    gen, cfg.extra = run_generator(
        backend,
        res,
        FORMATS[cfg.format],
        log,
        f"k={cfg.k}, band {cfg.band}, output {output}",
        gpus=gpus,
        batch_size=cfg.batch_size * cfg.k,  # hf: every row of a call decodes at once
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
        seed=cfg.seed,
    )
    return filter_prompts(gen, args.input, output, cfg, log)


def one_line(message: str) -> str:
    """An error message on one line (a library's message may hold newlines)."""
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    # None in the parser, so that a missing default is named when it is checked, not while parsing
    args.model = args.model or DEFAULT_MODEL
    args.input = str(args.input or DEFAULT_INPUT)
    interrupt_on_sigterm()
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    try:
        report = run(args, log)
    except UserError as e:  # a library's message may span lines: the guard shows one, so all of it on one
        raise UserError(one_line(str(e))) from None
    except KeyboardInterrupt as e:
        output = Path(args.output) if args.output else default_output(args.input)
        samples = PassRateFiles.of(output).samples
        n = max(0, count_lines(samples) - 1)  # less the settings line
        exit_interrupted(
            e, f"{n} prompts' samples saved in {samples}", resume_command(["-m", "e2c.eval.passrate"], argv)
        )
    print(
        f"kept {report['kept']} of {report['prompts']} prompts ({report['band']['describe']}); "
        f"correct per prompt: {format_histogram([b['prompts'] for b in report['histogram']])}"
    )
    files = PassRateFiles.of(report["output"])
    print(f"output: {files.output}  report: {files.report}  plot: {files.plot}")
    print(
        json.dumps(
            {
                "output": str(files.output),
                "report": str(files.report),
                "prompts": report["prompts"],
                "kept": report["kept"],
                "histogram": [b["prompts"] for b in report["histogram"]],
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
