"""Sample, grade and score benchmarks; resumable.

A run folder holds ``config.json`` (the generation settings; a restart must match them),
``predictions/<dataset>.jsonl`` (one line per (problem, sample), appended as each chunk finishes),
``results.json`` (config, commit, versions, metrics, cost) and, with several datasets, ``accuracy.png`` and
``tokens.png``. Work is cut into fixed chunks chosen from the data order alone, each seeded from (seed,
dataset, chunk index): a killed run restarted skips finished chunks, re-samples an unfinished one with the
same seed and appends only missing lines, so its metrics equal an uninterrupted run's. The cost is summed from
the prediction lines (:mod:`e2c.eval.cost`; a chunk is a batch), never read off this process's generator.
More: docs/generation-and-evaluation.md, "Evaluation".
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import FORMATS, MEDICAL_PROMPT_SUFFIX, MEDICAL_SYSTEM_PROMPT, ChainFormat, get_format
from e2c.chain.budget import FLAG_NAMES, PhaseBudget
from e2c.commandline.argtypes import ANY_TEXT, EXISTING_DIR, MODEL, TEXT, at_least, probability, whole
from e2c.commandline.flags import setting
from e2c.core import progress
from e2c.core.errors import UserError
from e2c.core.files import RecordFile, atomic_write_json, json_kind, read_records
from e2c.core.models import RELEASED_REPO
from e2c.core.run_folder import RunFolder
from e2c.core.runinfo import git_commit, versions
from e2c.data.registry import Record, get_spec, options_of, question_text
from e2c.eval.compare import run_summary
from e2c.eval.cost import add_costs, batch_call, total_cost, usage_mark, usage_since
from e2c.eval.metrics import summarize
from e2c.eval.plots import plot_accuracy, plot_tokens
from e2c.generation import ALIASES as BACKEND_ALIASES
from e2c.generation import BACKENDS
from e2c.generation.base import check_fits, context_length, derive_seed
from e2c.generation.chains import ChainResult, generate_chains
from e2c.launch.tracking import SAMPLE_CHAINS
from e2c.rewards.grader import grade_many
from e2c.rewards.kinds import prompt_format, runs_programs
from e2c.sandbox import Sandbox

# Settings that change what is generated: a resumed run must use the same ones.
GENERATION_FIELDS = (
    "model",
    "subfolder",
    "backend",
    "samples",
    "temperature",
    "top_p",
    "max_tokens",
    "explore_budget",
    "execute_budget",
    "seed",
    "format",
    "opener",
    "chunk_size",
    "prefill",
    "medical_prompt",
)
# What a config.json without one of these keys stands for, so that its run resumes under the same settings.
FIELD_DEFAULTS: dict[str, Any] = {"prefill": True, "medical_prompt": "none"}
# --medical-prompt: "none" (the release's default) or "release" (its optional medical system prompt and
# question suffix, for the medical sets only).
MEDICAL_PROMPTS = ("none", "release")
# What a run folder that cannot be resumed asks for.
RESTART_HINT = "move the file away to start over"
VLLM_CHUNK = 2048  # sequences per vLLM call: one call for most benchmarks, resumable for the big ones
# hf: sequences per call, in batches: rows that finish are refilled from the rest of the call (continuous
# batching), so only the last quarter of a call runs with a part-empty batch; a resume redoes at most one call.
HF_CHUNK_BATCHES = 4


def chunk_size_for(backend: str, batch_size: int) -> int:
    """Sequences per generation call (and per resume unit) when ``--chunk-size`` is not given."""
    return VLLM_CHUNK if backend == "vllm" else HF_CHUNK_BATCHES * batch_size


@dataclass
class EvalConfig:
    """Settings of one evaluation run. A field with a flag in its metadata is a flag of ``scripts/eval.sh``
    (:func:`e2c.commandline.flags.add_setting_flags`): its spelling, ``--help`` line and command-line default live here."""

    model: str = field(
        metadata=setting(
            "model: HF id, folder, 'embedded' or 'tiny'",
            flag="--model",
            flag_help=f"model: HF id, folder, 'embedded' or 'tiny' (default: {RELEASED_REPO})",
            flag_default=RELEASED_REPO,
            value=MODEL,
        )
    )
    subfolder: str | None = field(
        default=None,
        metadata=setting(
            "subfolder of the model (8B, 4B, or a path) (default: 8B for the released checkpoint, else none)",
            flag="--subfolder",
            value=ANY_TEXT,
        ),
    )
    dataset: str = field(
        default="gsm8k",
        metadata=setting(
            "benchmark, alias or group: gsm8k, math, aime24, aime25, amc23, all, medqa, medmcqa, med, ... "
            "(comma-separated for several; default: gsm8k)",
            flag="--dataset",
            value=TEXT,
        ),
    )
    samples: int = field(
        default=8,
        metadata=setting(
            "samples per problem (default: 1, as the paper's script; its reported numbers use --sample 8)",
            flag="--sample",
            flag_default=1,
            value=whole(1),
        ),
    )
    temperature: float = field(
        default=1.0,
        metadata=setting(
            "sampling temperature; 0 = greedy (default: 1.0)", flag="--temperature", value=at_least(0)
        ),
    )
    top_p: float = field(
        default=1.0,
        metadata=setting(
            "nucleus sampling mass (default: 1.0)", flag="--top-p", value=probability(open_zero=True)
        ),
    )
    max_tokens: int | None = field(
        default=None,  # None: each dataset's budget (8192 math, 1500 medical)
        metadata=setting(
            "new tokens per sample (default: 8192 math, 1500 medical)", flag="--max-tokens", value=whole(1)
        ),
    )
    explore_budget: int | None = field(
        default=None,  # set: two-phase generation (e2c.chain.budget)
        metadata=setting(
            "two-phase: exploration budget in tokens (default: off)", flag="--explore-budget", value=whole(1)
        ),
    )
    execute_budget: int | None = field(
        default=None,
        metadata=setting(
            "two-phase: execution budget (default: max tokens minus the exploration budget)",
            flag="--execute-budget",
            value=whole(1),
        ),
    )
    seed: int = field(default=0, metadata=setting("random seed (default: 0)", flag="--seed", value=whole(0)))
    backend: str = field(
        default="hf",
        metadata=setting(
            "auto, vllm or hf (transformers) (default: auto: vllm when installed, GPU or CPU, else hf)",
            flag="--backend",
            flag_default="auto",  # the run resolves it (e2c.generation.pick_backend) before this is set
            choices=(*BACKENDS, *BACKEND_ALIASES),
        ),
    )
    format: str = field(
        default="e2c",
        metadata=setting("chain format (default: e2c)", flag="--format", choices=tuple(FORMATS)),
    )
    opener: str = field(
        default="",
        metadata=setting(
            "text that starts the exploration for the model (default: none)", flag="--opener", value=ANY_TEXT
        ),
    )
    chunk_size: int = field(
        default=16,
        metadata=setting(
            "sequences per generation call and per resume unit (default: "
            f"{HF_CHUNK_BATCHES} x batch size for hf, {VLLM_CHUNK} for vllm)",
            flag="--chunk-size",
            flag_default=None,  # the run derives it from the backend (chunk_size_for)
            value=whole(1),
        ),
    )
    prefill: bool = field(
        default=True,
        metadata=setting(
            "the release's evaluation prompt: question + suffix, assistant turn not prefilled with "
            "<EXPLORATION> (default: prefilled, as the release's RL and TTS)",
            flag="--no-prefill",
            negate=True,
        ),
    )
    medical_prompt: str = field(
        default="none",
        metadata=setting(
            "medical sets: 'release' adds the release's medical system prompt and question suffix "
            "(default: none, as in the release)",
            flag="--medical-prompt",
            choices=MEDICAL_PROMPTS,
        ),
    )
    limit: int | None = field(
        default=None,
        metadata=setting("first N problems of each dataset (default: all)", flag="--limit", value=whole(1)),
    )
    data_dir: str | None = field(
        default=None,
        metadata=setting(
            "folder with local benchmark files, searched first (default: none)",
            flag="--data-dir",
            value=EXISTING_DIR,
        ),
    )
    ks: list[int] | None = field(
        default=None,
        metadata=setting(
            "k values for pass@k and maj@k (default: 1, 2, 4, ..., samples)", flag="--k", value=whole(1)
        ),
    )
    grade_timeout: float = 5.0
    extra: dict[str, Any] = field(default_factory=dict)  # recorded, not compared (e.g. resolved model path)

    def generation_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in GENERATION_FIELDS}

    def __post_init__(self) -> None:
        """The checks across settings, once, where the config is made. Each value alone was checked by its
        type where it entered (a flag's ``value=``, or the caller's own checked settings); what is left is
        how they go together. A dataset's own default ``--max-tokens`` is checked with it, in
        :func:`dataset_budget`."""
        max_tokens = self.max_tokens if self.max_tokens is not None else sys.maxsize
        PhaseBudget(max_tokens, self.explore_budget, self.execute_budget, names=FLAG_NAMES)
        if self.ks is not None:
            bad = [k for k in self.ks if not 1 <= k <= self.samples]
            if bad or not self.ks:
                raise UserError(
                    f"--k {' '.join(map(str, bad or self.ks))}: each k must be from 1 to --sample {self.samples}"
                )
        if not self.prefill and self.opener:
            # The opener is written inside the exploration; with no prefill there is no open exploration yet.
            raise UserError("--opener needs the prefilled exploration; drop --opener or --no-prefill")


def dataset_format(cfg: EvalConfig, name: str) -> ChainFormat:
    """The chain format one dataset is prompted and parsed with.

    ``cfg.format``, with the answer kind's own prompt suffix where it has one (programs), the release's
    medical system prompt and question suffix for the medical sets when
    ``cfg.medical_prompt == "release"``, and without the prefilled opening tag when ``cfg.prefill`` is
    off (the release's evaluation prompt: the question and suffix only). Parsing then expects the model
    to write the opening tag itself.
    """
    fmt = get_format(cfg.format)
    fmt = prompt_format(fmt, get_spec(name).kind)
    if cfg.medical_prompt == "release" and get_spec(name).group == "med":
        fmt = fmt.replace(
            system_prompt=MEDICAL_SYSTEM_PROMPT, prompt_suffix=MEDICAL_PROMPT_SUFFIX, suffix_separator=""
        )
    if not cfg.prefill:
        fmt = fmt.replace(prefill_assistant=False)
    return fmt


def dataset_budget(cfg: EvalConfig, name: str) -> PhaseBudget:
    """The token budget of dataset ``name``'s chains: the config's budgets with ``--max-tokens`` or, unset,
    the dataset's own default (checked here, where that default enters; one line naming it)."""
    max_tokens = cfg.max_tokens or get_spec(name).max_new_tokens
    label = f"--max-tokens {max_tokens}" if cfg.max_tokens else f"{name}'s budget of {max_tokens} tokens"
    return PhaseBudget(max_tokens, cfg.explore_budget, cfg.execute_budget, names=FLAG_NAMES, max_label=label)


def budget_flag(cfg: EvalConfig, name: str, budget: PhaseBudget) -> str:
    """The flag that sets a dataset's whole-chain budget, for an error line."""
    if budget.two_phase:
        return "--explore-budget + --execute-budget"
    return "--max-tokens" if cfg.max_tokens else f"--max-tokens ({name}'s default)"


def check_context(
    gen: Any, data: dict[str, list[Record]], cfg: EvalConfig, budgets: dict[str, PhaseBudget]
) -> None:
    """Refuse, before anything is written, a dataset whose longest prompt and budget exceed the model's
    context: one up-front line rather than a run that fails (vLLM) or crawls (transformers) part-way."""
    context = context_length(gen)
    for name, recs in data.items():
        if context is None or not recs:
            continue
        budget, flag = budgets[name].total, budget_flag(cfg, name, budgets[name])
        fmt = dataset_format(cfg, name)
        lengths = [
            len(
                gen.tokenizer.encode(
                    fmt.render_prompt(gen.tokenizer, question_text(r)) + cfg.opener, add_special_tokens=False
                )
            )
            for r in recs
        ]
        i = max(range(len(recs)), key=lengths.__getitem__)
        check_fits(lengths[i], budget, context, f"{name} problem {i} ({recs[i].id}) with its prompt", flag)


# ------------------------------------------------------------------------------------ predictions
def read_predictions(path: Path, repair: bool = True) -> dict[int, dict[int, dict[str, Any]]]:
    """``{problem index: {sample: line}}`` from a predictions file.

    A last line without its newline (cut by a kill) is left out, and with ``repair`` also removed from the
    file, so that the resumed run appends after a whole line; the check before a run
    (:func:`check_resume`) reads with ``repair=False`` and changes nothing. Any other unreadable line is a
    :class:`UserError` naming the file and the line.
    """
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for n, row in read_records(path, repair=repair, what="prediction line", hint=RESTART_HINT):
        try:
            out.setdefault(int(row["index"]), {})[int(row["sample"])] = row
        except (ValueError, KeyError, TypeError) as e:
            raise UserError(f"{path} line {n}: not a prediction line ({e}); {RESTART_HINT}") from None
    return out


def check_same_problems(
    path: Path, done: dict[int, dict[int, dict[str, Any]]], records: Sequence[Record]
) -> None:
    """Refuse to resume predictions of other problems: the data changed since the run started."""
    for i, lines in done.items():
        if i < len(records) and any(line.get("id") != records[i].id for line in lines.values()):
            raise UserError(
                f"{path}: problem {i} was {next(iter(lines.values())).get('id')!r}, now {records[i].id!r}; "
                "the data changed since this run started: use another --output-dir, or --force to start over"
            )


def check_resume(
    save_path: Path, data: dict[str, list[Record]], cfg: EvalConfig, force: bool = False, worker: bool = False
) -> None:
    """Refuse, before the model is loaded and without changing a file, a run folder this run cannot
    resume: one in use by another command or holding another run (:func:`eval_run_folder`; ``force``
    moves that one aside instead; a data-parallel ``worker`` skips the lock, which its parent holds), a predictions file (a data-parallel
    worker's included) with a line that is not a prediction, or predictions of problems that changed."""
    if eval_run_folder(save_path, cfg, force).check(lock=not worker):
        return  # --force: the old run's files move aside; nothing of theirs is resumed
    for name, recs in data.items():
        path = save_path / "predictions" / f"{name}.jsonl"
        shards = sorted(path.parent.glob(f"{name}.rank*.jsonl")) if path.parent.is_dir() else []
        for f in [path, *shards]:
            check_same_problems(f, read_predictions(f, repair=False), recs)


def chunk_problems(n_problems: int, samples: int, chunk_size: int) -> list[range]:
    """Fixed chunks of problem indices, about ``chunk_size`` sequences each (at least one problem)."""
    per = max(1, chunk_size // samples)
    return [range(s, min(s + per, n_problems)) for s in range(0, n_problems, per)]


def prediction_lines(
    name: str,
    index: int,
    record: Record,
    chains: Sequence[ChainResult],
    cfg: EvalConfig,
    fmt: ChainFormat | None = None,
    call: dict[str, Any] | None = None,
    sandbox: Sandbox | None = None,
) -> list[dict[str, Any]]:
    """Grade one problem's samples into prediction lines (``fmt``: the dataset's, see
    :func:`dataset_format`; ``call``: the generation figures of the chunk they came from,
    :func:`e2c.eval.cost.batch_call`, kept on every line; ``sandbox``: where programs run, see
    :func:`run_eval`)."""
    fmt = fmt or dataset_format(cfg, name)
    results = grade_many(
        [c.response for c in chains],
        [record.answer] * len(chains),
        record.kind,
        options=[options_of(record)] * len(chains),
        fmt=fmt,
        timeout=cfg.grade_timeout,
        # Responses are continuations after the prompt: with the tag prefilled, a response that writes
        # it again has it twice (not well formed); without, the model must write it.
        prefilled=fmt.prefill_assistant,
        sandbox=sandbox,
    )
    return [
        {
            "dataset": name,
            "index": index,
            "id": record.id,
            "sample": j,
            "gold": record.answer,
            "kind": record.kind,
            "extracted": r.extracted,
            "correct": r.correct,
            "reason": r.reason,
            "chain_status": r.chain_status,
            "explore_tokens": c.explore_tokens,
            "execute_tokens": c.execute_tokens,
            "explore_stop": c.explore_stop,
            "forced_close": c.forced_close,
            "finish_reason": c.finish_reason,
            **(
                {"tests_passed": r.tests_passed, "tests_total": r.tests_total, "sandbox_s": r.sandbox_s}
                if runs_programs([record.kind])  # a program that never ran passed none of its tests
                else {}
            ),
            **({"call": call} if call is not None else {}),
            "response": c.response,
        }
        for j, (c, r) in enumerate(zip(chains, results, strict=True))
    ]


def shard_path(save_path: Path, name: str, rank: int) -> Path:
    """Where data-parallel worker ``rank`` writes its lines of dataset ``name`` (merged by the parent)."""
    return save_path / "predictions" / f"{name}.rank{rank}.jsonl"


def merge_shards(save_path: Path, name: str) -> int:
    """Append the workers' lines of ``name`` that its predictions file lacks, then remove their files.
    Returns the number of lines added. Chunks are seeded by (seed, dataset, chunk), not by worker, so a
    merged run equals one worker's run of every chunk."""
    path = save_path / "predictions" / f"{name}.jsonl"
    shards = sorted(path.parent.glob(f"{name}.rank*.jsonl"))
    if not shards:
        return 0
    done = read_predictions(path)
    added = 0
    with RecordFile(path) as f:
        for shard in shards:
            new = []
            for i, lines in sorted(read_predictions(shard).items()):
                for j, line in sorted(lines.items()):
                    if j not in done.get(i, {}):
                        new.append(line)
                        done.setdefault(i, {})[j] = line
            f.write(new)
            added += len(new)
        f.sync()
    for shard in shards:
        shard.unlink()
    return added


def evaluate_dataset(
    gen: Any,
    name: str,
    records: Sequence[Record],
    cfg: EvalConfig,
    save_path: Path,
    log: Callable[[str], None] = lambda s: None,
    shard: tuple[int, int] = (0, 1),
    *,
    budget: PhaseBudget,
    sandbox: Sandbox | None = None,
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Sample and grade one dataset (resuming from its predictions file); returns its metrics and its cost
    (:func:`prediction_cost`, from the lines the metrics rest on). ``budget``: the dataset's checked budget
    (:func:`dataset_budget`, built by the caller once).

    ``shard`` = (rank, world): a data-parallel worker samples only the chunks ``c`` with
    ``c % world == rank`` into its own file (:func:`shard_path`) and returns None; the parent merges."""
    rank, world = shard
    path = save_path / "predictions" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    done = read_predictions(path)
    if world > 1:
        for i, lines in read_predictions(shard_path(save_path, name, rank)).items():
            done.setdefault(i, {}).update(lines)
        path = shard_path(save_path, name, rank)
    check_same_problems(path, done, records)
    fmt = dataset_format(cfg, name)
    chunks = chunk_problems(len(records), cfg.samples, cfg.chunk_size)
    t0, made, new_tokens = time.perf_counter(), 0, 0
    have = sum(min(len(v), cfg.samples) for i, v in done.items() if i < len(records))
    pbar = progress.bar(len(records) * cfg.samples, name, unit="sample", initial=have)
    with pbar, RecordFile(path) as f:
        for ci, chunk in enumerate(chunks):
            if ci % world != rank or all(len(done.get(i, {})) >= cfg.samples for i in chunk):
                continue
            mark, started = usage_mark(gen), time.perf_counter()
            chains = generate_chains(
                gen,
                [question_text(records[i]) for i in chunk],
                fmt,
                cfg.samples,
                budget=budget,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                seed=derive_seed(cfg.seed, name, ci),
                opener=cfg.opener,
            )
            call = chunk_call(ci, len(chunk) * cfg.samples, budget, usage_since(gen, mark), started)
            new = []
            for i, row in zip(chunk, chains, strict=True):
                for line in prediction_lines(name, i, records[i], row, cfg, fmt, call, sandbox):
                    if line["sample"] not in done.get(i, {}):
                        new.append(line)
                        done.setdefault(i, {})[line["sample"]] = line
                        new_tokens += line["explore_tokens"] + line["execute_tokens"]
            f.write(new)  # the chunk's lines, all or none
            f.sync()
            made += len(new)
            pbar.update(len(new))
            secs = time.perf_counter() - t0
            finished = sum(len(done.get(i, {})) >= cfg.samples for i in range(len(records)))
            rate = f"{new_tokens / max(secs, 1e-9):.0f} tok/s"
            if pbar.disable:
                log(
                    f"{name}: {finished}/{len(records)} problems, {made} new samples in {secs:.0f}s "
                    f"({made / max(secs, 1e-9):.2f} samples/s, {rate})"
                )
            else:
                pbar.set_postfix_str(f"{finished}/{len(records)} problems, {rate}")
    if world > 1:
        return None
    per_problem = [[done[i][j] for j in sorted(done[i])][: cfg.samples] for i in range(len(records))]
    return summarize(per_problem, cfg.ks), prediction_cost(per_problem, cfg, budget)


def chunk_call(
    ci: int, samples: int, budget: PhaseBudget, grown: tuple[int, int, int] | None, started: float
) -> dict[str, Any]:
    """The ``"call"`` figures of chunk ``ci`` (:func:`e2c.eval.cost.batch_call`), which generated
    ``samples`` chains since ``started`` (``time.perf_counter``); ``grown``: what the generator's tally grew
    by meanwhile (None for a generator that keeps none: its calls are the phases, its prompt tokens unknown)."""
    phases = 2 if budget.two_phase else 1
    calls, sequences, prompt_tokens = grown if grown is not None else (phases, phases * samples, None)
    return batch_call(ci, calls, samples, sequences, prompt_tokens, time.perf_counter() - started)


def prediction_cost(
    per_problem: Sequence[Sequence[dict[str, Any]]], cfg: EvalConfig, budget: PhaseBudget
) -> dict[str, Any]:
    """The cost of a dataset's prediction lines (:func:`e2c.eval.cost.total_cost`). A line without its
    chunk's ``"call"`` (an older toolkit's) still gives its tokens, and its chunk and calls, which the data
    order and the run's settings fix (:func:`chunk_problems`; 2 calls per chunk for two-phase chains)."""
    per = max(1, cfg.chunk_size // cfg.samples)  # problems per chunk, as chunk_problems cuts them
    phases = 2 if budget.two_phase else 1

    def derive(line: Any) -> dict[str, Any]:
        return {"batch": int(line["index"]) // per, "calls": phases, "records": 1, "sequences": phases}

    return total_cost(
        (line for lines in per_problem for line in lines),
        lambda line: int(line.get("explore_tokens") or 0) + int(line.get("execute_tokens") or 0),
        derive,
    )


# ---------------------------------------------------------------------------------------- run files
def legacy_config(save_path: Path) -> dict[str, Any] | None:
    """The settings a run folder of an older toolkit recorded in ``config.json`` only (None: none), with
    the defaults of settings added since; UserError, changing nothing, for one that cannot be read."""
    path = save_path / "config.json"
    if not path.exists():
        return None
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror or e}); {RESTART_HINT}") from None
    except ValueError:  # UnicodeDecodeError included
        raise UserError(f"{path} is not valid JSON; move the run folder away to start over") from None
    if not isinstance(before, dict):
        raise UserError(
            f"{path} is not a run config (a JSON object of settings, got a {json_kind(before)}); "
            "move the run folder away to start over"
        )
    return {k: before.get(k, FIELD_DEFAULTS.get(k)) for k in GENERATION_FIELDS}


def note(line: str) -> None:
    """An informational line (a lock taken over, a run moved aside): on stderr, beside the progress."""
    print(line, file=sys.stderr, flush=True)


def eval_run_folder(save_path: Path, cfg: EvalConfig, force: bool = False) -> RunFolder:
    """The run folder's claim: an eval run is its generation settings (the model among them); the
    datasets are not part of it (a run takes more datasets later; each one's problems are checked by
    :func:`check_same_problems`)."""
    return RunFolder(
        save_path,
        "eval",
        cfg.generation_settings(),
        force=force,
        legacy=lambda: legacy_config(save_path),
        own=("config.json",),
        defaults=FIELD_DEFAULTS,
    )


def write_config(save_path: Path, cfg: EvalConfig) -> None:
    """``config.json``: the settings, for the reports that read a run folder."""
    save_path.mkdir(parents=True, exist_ok=True)
    atomic_write_json(save_path / "config.json", cfg.generation_settings())


def run_eval(
    gen: Any,
    data: dict[str, list[Record]],
    cfg: EvalConfig,
    save_path: Path,
    log: Callable[[str], None] = lambda s: None,
    shard: tuple[int, int] = (0, 1),
    force: bool = False,
    sandbox: Sandbox | None = None,
    checked: bool = False,
) -> dict[str, Any]:
    """Evaluate every dataset in ``data`` and write ``results.json``; returns its content. A data-parallel
    worker (``shard``, see :func:`evaluate_dataset`) samples its chunks only and returns ``{}``. The run
    holds ``save_path`` while it runs (:func:`eval_run_folder`; ``force``: start over there). ``sandbox``:
    where programs run (a code set's answers; the command's, :func:`e2c.sandbox.use`; None: the one
    ``$E2C_SANDBOX`` names). ``checked``: the caller already ran :func:`check_context` on ``data`` (a
    command of several evaluations checks them all before the first runs)."""
    budgets = {name: dataset_budget(cfg, name) for name in data}  # each checked once, here
    if not checked:
        check_context(gen, data, cfg, budgets)
    if shard[1] > 1:  # a data-parallel worker: the folder is its parent's
        return _run_eval(gen, data, cfg, save_path, log, shard, budgets, sandbox)
    # A lock taken over or a run moved aside is said even with --quiet (which silences progress only).
    with eval_run_folder(save_path, cfg, force).claim(note):
        return _run_eval(gen, data, cfg, save_path, log, shard, budgets, sandbox)


def _run_eval(
    gen: Any,
    data: dict[str, list[Record]],
    cfg: EvalConfig,
    save_path: Path,
    log: Callable[[str], None],
    shard: tuple[int, int],
    budgets: dict[str, PhaseBudget],
    sandbox: Sandbox | None,
) -> dict[str, Any]:
    write_config(save_path, cfg)
    if shard[1] > 1:
        for name, recs in data.items():
            evaluate_dataset(
                gen, name, recs, cfg, save_path, log, shard, budget=budgets[name], sandbox=sandbox
            )
        return {}
    for name in data:
        merge_shards(save_path, name)  # what data-parallel workers left, a killed run's included
    metrics, costs = {}, {}
    for name, recs in data.items():
        done = evaluate_dataset(gen, name, recs, cfg, save_path, log, budget=budgets[name], sandbox=sandbox)
        assert done is not None  # one process: every chunk is its own
        metrics[name], costs[name] = done
    # The run's cost, from its prediction lines (e2c.eval.cost): a restart or a resume changes none of it.
    usage = {**add_costs(list(costs.values())), "datasets": costs}
    results = {
        "config": asdict(cfg),
        # The exact text sent for each dataset's first problem, to compare prompts across runs and releases.
        "prompts": {
            name: dataset_format(cfg, name).render_prompt(gen.tokenizer, question_text(recs[0]))
            for name, recs in data.items()
            if recs and hasattr(gen, "tokenizer")
        },
        "git_commit": git_commit(),
        "versions": versions(),
        "backend": getattr(gen, "name", type(gen).__name__),
        "datasets": metrics,
        "average": {
            k: sum(m[k] for m in metrics.values()) / len(metrics)
            for k in ("pass@1", "format_rate", "truncation_rate")
            if metrics
        },
        # The generation seconds the lines recorded: the run's, not this launch's.
        "seconds": usage["seconds"],
        "usage": usage,
    }
    atomic_write_json(save_path / "results.json", results)
    if len(metrics) > 1:
        write_run_plots(save_path, log)
    return results


def write_run_plots(save_path: Path, log: Callable[[str], None]) -> None:
    """``accuracy.png`` and ``tokens.png`` beside a finished run's ``results.json`` (its datasets side by side).

    The results are already written: a plot that cannot be drawn is one log line, never a failed run."""
    try:
        runs = {save_path.name or "run": run_summary(save_path)}
        plot_accuracy(runs, save_path / "accuracy.png", "Accuracy per dataset")
        plot_tokens(runs, save_path / "tokens.png", "Exploration and execution tokens per dataset")
    except (ImportError, OSError, ValueError, RuntimeError, UserError) as e:
        log(f"plots skipped: {type(e).__name__}: {e}")
        return
    log(f"plots: {save_path / 'accuracy.png'}, {save_path / 'tokens.png'}")


def format_table(metrics: dict[str, dict[str, Any]]) -> str:
    """A fixed-width table of the headline metrics per dataset."""
    if not metrics:
        return ""
    ks = sorted({int(k.split("@")[1]) for m in metrics.values() for k in m if k.startswith("pass@")})
    kmax = ks[-1] if ks else 1
    cols = ["problems", "samples", "pass@1", f"pass@{kmax}", f"maj@{kmax}", "format", "trunc", "no_ans"]
    cols += ["explore_tok", "execute_tok"]
    width = max(12, *(len(n) + 2 for n in metrics))
    lines = [f"{'dataset':<{width}}" + "".join(f"{c:>12}" for c in cols)]
    for name, m in metrics.items():
        vals = [
            m["problems"],
            m["samples"],
            m["pass@1"],
            m.get(f"pass@{kmax}", float("nan")),
            m.get(f"maj@{kmax}", float("nan")),
            m["format_rate"],
            m["truncation_rate"],
            m["no_answer_rate"],
            m["explore_tokens"],
            m["execute_tokens"],
        ]
        cells = [f"{v:>12d}" if isinstance(v, int) else f"{v:>12.4f}" for v in vals[:8]]
        cells += [f"{v:>12.1f}" for v in vals[8:]]
        lines.append(f"{name:<{width}}" + "".join(cells))
    return "\n".join(lines)


def tracker_payload(
    results: dict[str, Any], save_path: Path, per_dataset: int = SAMPLE_CHAINS
) -> tuple[dict[str, float], list[tuple[str, str, float]]]:
    """What a finished eval run sends to trackers (:func:`e2c.launch.tracking.log_results`): every numeric metric
    as ``eval/<dataset>/<metric>`` (and ``eval/average/...``), and the first sample of the first
    ``per_dataset`` problems of each dataset as ``(label, response, correct)``."""
    scalars = {
        f"eval/{name}/{k}": float(v)
        for name, m in {**results["datasets"], "average": results.get("average", {})}.items()
        for k, v in m.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    samples = []
    for name in results["datasets"]:
        done = read_predictions(save_path / "predictions" / f"{name}.jsonl")
        for i in sorted(done)[:per_dataset]:
            line = done[i][min(done[i])]
            label = f"{name} {line['id']} (gold {line['gold']}; parse status {line['chain_status']})"
            samples.append((label, line["response"], float(bool(line["correct"]))))
    return scalars, samples
