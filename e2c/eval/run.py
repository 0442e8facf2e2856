"""Evaluate a model on math, medical and code benchmarks (``bash scripts/eval.sh`` wraps this).

    python -m e2c.eval.run --model embedded --dataset gsm8k --limit 20 --sample 4 --max-tokens 256
    python -m e2c.eval.run --model M --temperature 0 --output-dir greedy \\
        --then --sample 8 --temperature 1 --output-dir avg8

Defaults follow the paper's script. Prints a table, the run's cost, and as its last line one JSON object
(the results file's path and headline numbers). A killed run restarted with the same arguments resumes;
Ctrl-C or SIGTERM names what was saved (exit 130 / 143). ``--then`` chains evaluations of one loaded model,
each from the flags of the one before, the model's flags (:data:`SHARED_FLAGS`) fixed by the first. Every
evaluation is checked before the model loads; bad settings are refused in one line before anything is written.
More: docs/generation-and-evaluation.md, "Evaluation".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import FORMATS
from e2c.commandline.argtypes import INT_MAX, OUTPUT_DIR, TEXT, ValueType, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_values, setting
from e2c.commandline.parsing import (
    DTYPES,
    ArgumentParser,
    count_lines,
    exit_interrupted,
    interrupt_on_sigterm,
    plural,
    quiet_libraries,
    resume_command,
    slug,
)
from e2c.core.errors import UserError
from e2c.core.files import check_output_dir
from e2c.core.models import default_subfolder, model_context, resolve_model
from e2c.core.progress import evaluation_line
from e2c.core.run_folder import FORCE_HELP
from e2c.data.registry import load_benchmarks, resolve_names
from e2c.eval.runner import (
    EvalConfig,
    check_context,
    check_resume,
    chunk_size_for,
    dataset_budget,
    eval_run_folder,
    format_table,
    merge_shards,
    note,
    read_predictions,
    run_eval,
    tracker_payload,
    write_config,
)
from e2c.generation import pick_backend, run_generator
from e2c.launch.devices import gpu_count
from e2c.launch.tracking import RESULT_TRACKERS, RESULTS_LOGGER_HELP, log_results, result_trackers
from e2c.rewards.kinds import runs_programs
from e2c.sandbox import SANDBOX_HELP, Sandbox, use
from e2c.sandbox import setting as sandbox_setting
from e2c.view import write_view

# The paper's evaluation folder; each model and setting gets its own run folder inside it (resume needs that).
EVAL_ROOT = Path("evaluation") / "e2c-eval"


def default_save_path(cfg: EvalConfig) -> Path:
    """A folder named by the settings, so a restart with the same flags finds its own run."""
    model = slug(Path(cfg.model).name if Path(cfg.model).exists() else cfg.model)
    if cfg.subfolder:
        model += f"-{slug(cfg.subfolder)}"
    parts = [slug(cfg.dataset), f"n{cfg.samples}", f"t{cfg.temperature:g}", f"seed{cfg.seed}"]
    if cfg.max_tokens:
        parts.append(f"max{cfg.max_tokens}")
    if cfg.explore_budget:
        parts.append(f"eb{cfg.explore_budget}-xb{cfg.execute_budget or 'rest'}")
    # Prompt settings off their defaults get their own folder, so both variants of a run can coexist.
    if not cfg.prefill:
        parts.append("noprefill")
    if cfg.medical_prompt != "none":
        parts.append(f"med-{slug(cfg.medical_prompt)}")
    return EVAL_ROOT / model / "_".join(parts)


def _gpu_devices(value: str) -> list[str] | None:
    """The device ids of a ``--gpus`` list (``0,1,2,3``; a lone ``01`` too), None for a count."""
    if "," in value or (value.isdigit() and len(value) > 1 and value.startswith("0")):
        return [d.strip() for d in value.split(",") if d.strip()]
    return None


class GpuSpec(ValueType):
    """``--gpus``: a count (``8``) or device ids (``0,1,2,3``)."""

    name = "a GPU count (8) or device ids (0,1,2,3)"

    def parse(self, text: str) -> str:
        value = str(text).strip()
        devices = _gpu_devices(value)
        if devices is None:
            ok = value.isascii() and value.isdigit() and len(value) <= 10 and 1 <= int(value) <= INT_MAX
        else:
            ok = bool(devices) and all(d.isascii() and d.isdigit() for d in devices)
        if not ok:
            raise UserError(f"must be {self.name}, got {value!r}")
        return value


def parse_gpus(value: str | None) -> int | None:
    """``--gpus``: a count (``8``) or a device list (``0,1,2,3``, which also sets CUDA_VISIBLE_DEVICES)."""
    if value is None or value == "":
        return None
    try:
        value = GPUS.parse(value)
    except UserError as e:
        raise UserError(f"--gpus {e}") from None
    devices = _gpu_devices(value)
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        return len(devices)
    return int(value)


class ShardSpec(ValueType):
    """``--shard RANK/WORLD``, set by a data-parallel parent for its workers."""

    name = "RANK/WORLD with RANK < WORLD"

    def parse(self, text: str) -> str:
        rank, _, world = str(text).partition("/")
        digits = all(p.isascii() and p.isdigit() and len(p) <= 10 for p in (rank, world))
        if not digits or not int(rank) < int(world) <= INT_MAX:
            raise UserError(f"must be {self.name}, got {str(text)!r}")
        return str(text)


GPUS = GpuSpec()
SHARD = ShardSpec()


def saved_predictions(save: Path | None) -> str:
    """What an interrupted run leaves: prediction lines per dataset in the run folder."""
    files = sorted((save / "predictions").glob("*.jsonl")) if save is not None else []
    counts = {f.stem: count_lines(f) for f in files}
    if not sum(counts.values()):
        return "no predictions saved yet" + (f" in {save}" if save is not None else "")
    per = ", ".join(f"{k} {v}" for k, v in counts.items())
    return f"{plural(sum(counts.values()), 'prediction')} saved in {save / 'predictions'} ({per})"


@dataclass(frozen=True)
class RunControl:
    """How an evaluation runs, beside what it measures (:class:`EvalConfig`): devices and workers, the run
    folder, the model's loading, where programs run, what else it writes. Each field is its flag, declared
    here once; the parsed flags keep the fields' names."""

    gpus: str | None = field(
        default=None,
        metadata=setting(
            "GPUs to use: a count or device ids 0,1,..; split into data-parallel workers of --tp GPUs each, "
            "as the paper's script (default: all visible)",
            flag="--gpus",
            value=GPUS,
        ),
    )
    sandbox: str | None = field(
        default=None, metadata=setting(SANDBOX_HELP, flag="--sandbox", metavar="SPEC", value=TEXT)
    )
    tp: int = field(
        default=1,
        metadata=setting(
            "vLLM tensor-parallel GPUs per worker; more for a model that does not fit one GPU (default: 1)",
            flag="--tp",
            value=whole(1),
        ),
    )
    workers: int | None = field(
        default=None,
        metadata=setting(
            "data-parallel worker processes, each with its own model (default: GPUs / --tp on GPUs, 1 on "
            "CPU); their predictions are merged, and equal one process's (chunks are seeded, not workers)",
            flag="--workers",
            value=whole(1),
        ),
    )
    shard: str | None = field(  # RANK/WORLD: set by a data-parallel parent for its workers
        default=None, metadata=setting("this worker's share", flag="--shard", hidden=True, value=SHARD)
    )
    output_dir: str | None = field(
        default=None,
        metadata=setting(
            "run folder (default: evaluation/e2c-eval/<model>/<settings>, under the paper's folder)",
            flag="--output-dir",
            value=OUTPUT_DIR,
        ),
    )
    batch_size: int = field(
        default=16,
        metadata=setting(
            "transformers backend: rows decoded at once (default: 16)", flag="--batch-size", value=whole(1)
        ),
    )
    dtype: str = field(
        default="auto",
        metadata=setting(
            "model dtype (default: auto: bf16 on GPUs and on CPUs with native bf16, else float32)",
            flag="--dtype",
            choices=DTYPES,
        ),
    )
    max_model_len: int | None = field(
        default=None,
        metadata=setting(
            "vLLM context length (default: the model's)", flag="--max-model-len", value=whole(1)
        ),
    )
    trust_remote_code: bool = field(
        default=False,
        metadata=setting("allow the model repo's own Python code to run", flag="--trust-remote-code"),
    )
    hub: bool = field(
        default=True,
        metadata=setting("use local benchmark files only, never the HF hub", flag="--no-hub", negate=True),
    )
    quiet: bool = field(default=False, metadata=setting("no progress lines", flag="--quiet"))
    logger: str = field(
        default="", metadata=setting(RESULTS_LOGGER_HELP, flag="--logger", value=RESULT_TRACKERS)
    )
    view: bool = field(
        default=False,
        metadata=setting(
            "after the results, write <run folder>/view.html: one self-contained page of every chain "
            "(python -m e2c.view)",
            flag="--view",
        ),
    )
    force: bool = field(default=False, metadata=setting(FORCE_HELP, flag="--force"))


THEN = "--then"  # chains another evaluation of the same loaded model (the module's docstring)

# The flags that build the generator, or pick the processes it runs in: the evaluations of one command share
# one loaded model, so these stay as the first evaluation sets them.
SHARED_FLAGS = (
    "--model",
    "--subfolder",
    "--format",
    "--backend",
    "--gpus",
    "--tp",
    "--workers",
    "--batch-size",
    "--dtype",
    "--max-model-len",
    "--trust-remote-code",
    "--seed",
    "--shard",
)


def build_parser() -> argparse.ArgumentParser:
    """The run's flags: what it measures (:class:`EvalConfig`) and how it runs (:class:`RunControl`), each
    declared once in its dataclass."""
    p = ArgumentParser(
        prog="scripts/eval.sh",
        description=__doc__.split("\n\n")[0],
        epilog=f"{THEN} FLAG ...: then another evaluation of the same loaded model, into its own --output-dir: it "
        "starts from the flags before it and changes what it names (not "
        f"{', '.join(SHARED_FLAGS[:-1])}), e.g. --temperature 0 --output-dir greedy {THEN} --sample 8 "
        "--temperature 1 --output-dir avg8",
    )
    add_setting_flags(p, EvalConfig)
    add_setting_flags(p, RunControl)
    return p


def parse_shard(value: str | None) -> tuple[int, int]:
    """``RANK/WORLD`` (internal, set for data-parallel workers) -> (rank, world); (0, 1) when absent."""
    if not value:
        return 0, 1
    try:
        SHARD.parse(value)
    except UserError as e:
        raise UserError(f"--shard {e}") from None
    rank, _, world = value.partition("/")
    return int(rank), int(world)


def plan_workers(visible: list[str], gpus: int | None, tp: int, workers: int | None) -> list[list[str]]:
    """The device ids of each data-parallel worker: ``workers`` (default ``gpus // tp``) groups of ``tp``
    ids from the first ``gpus`` visible ones; on a CPU (no ids) ``workers`` empty groups.

    >>> plan_workers(["0", "1", "2", "3"], None, 1, None)
    [['0'], ['1'], ['2'], ['3']]
    >>> plan_workers(["0", "1", "2", "3"], 4, 2, None)
    [['0', '1'], ['2', '3']]
    >>> plan_workers([], None, 1, 2)
    [[], []]
    """
    if not visible:
        return [[] for _ in range(workers or 1)]
    use = visible[: gpus or len(visible)]
    n = workers or max(1, len(use) // tp)
    if n * tp > len(use):
        raise UserError(
            f"{n} worker(s) x --tp {tp} need {n * tp} GPUs; {len(use)} are there (--gpus, CUDA_VISIBLE_DEVICES)"
        )
    return [use[r * tp : (r + 1) * tp] for r in range(n)]


def check_max_model_len(value: int | None, folder: Path) -> None:
    """vLLM refuses a --max-model-len past the model's context with a long traceback; say it in one line."""
    if value is None or os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
        return
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # resolve_model checked it; a hub folder without one is vLLM's to report
    if not isinstance(config, dict) or config.get("rope_scaling"):
        return  # a scaled RoPE stretches the context: vLLM derives it
    context = model_context(argparse.Namespace(**config))
    if context is not None and value > context:
        raise UserError(f"--max-model-len {value} is more than the model's context of {context} tokens")


def split_then(argv: list[str]) -> list[list[str]]:
    """The evaluations of a command line, split at each ``--then``.

    >>> split_then(["--model", "m", "--then", "--sample", "4"])
    [['--model', 'm'], ['--sample', '4']]
    >>> split_then(["--model", "m"])
    [['--model', 'm']]
    """
    out: list[list[str]] = [[]]
    for word in argv:
        if word == THEN:
            out.append([])
        else:
            out[-1].append(word)
    return out


def parse_evaluations(argv: list[str]) -> list[argparse.Namespace]:
    """Every evaluation's flags: the first as given, each later one from the one before with what its
    ``--then`` names changed (a switch such as ``--no-prefill`` stays on; ``--force`` is each one's own).
    A later one that names nothing, or changes a :data:`SHARED_FLAGS` flag, is refused in one line."""
    parser = build_parser()
    segments = split_then(argv)
    first = parser.parse_args(segments[0])
    runs = [first]
    for i, words in enumerate(segments[1:], 2):
        if not words:
            parser.error(f"{THEN} must be followed by the flags evaluation {i} changes")
        # --force moves a folder's run aside: only for the evaluation that names it.
        args = parser.parse_args(words, namespace=argparse.Namespace(**{**vars(runs[-1]), "force": False}))
        for flag in SHARED_FLAGS:
            dest = parser._option_string_actions[flag].dest
            if getattr(args, dest) != getattr(first, dest):
                parser.error(
                    f"evaluation {i} changes {flag}: the evaluations of one command share one loaded model "
                    f"({', '.join(SHARED_FLAGS[:-1])} stay as the first sets them); run it as its own command"
                )
        runs.append(args)
    return runs


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    runs = parse_evaluations(argv)
    where: dict[str, Path] = {}
    try:
        evaluate(runs, where, split_then(argv), finished=report)
    except KeyboardInterrupt as e:  # the guard's line would not say what was saved or how to resume
        exit_interrupted(
            e, saved_predictions(where.get("save")), resume_command(["-m", "e2c.eval.run"], argv)
        )
    return 0


def report(run: Planned) -> None:
    """One evaluation's table, cost line, optional page and, last, its headline JSON line."""
    save, results = run.save, run.results
    print(format_table(results["datasets"]))
    cost = results["usage"]  # the run's, from its prediction lines (a rerun or a resume changes none of it)
    partial = " (partial: lines of an older toolkit)" if cost.get("partial") else ""
    print(
        f"results: {save / 'results.json'}  ({plural(cost['generated_tokens'], 'generated token')}, "
        f"{plural(cost['calls'], 'generation call')}, {cost['seconds']:.1f}s of generation{partial})"
    )
    if run.args.view:  # after the results are written: a page that cannot be built loses nothing of the run
        try:
            write_view([save], save / "view.html")
            print(f"view: {save / 'view.html'}")
        except (UserError, OSError) as e:  # nor stops the evaluations chained after this one
            note(f"view: {save / 'view.html'} not written ({e})")
    head = {
        "results": str(save / "results.json"),
        **{
            name: {k: round(m[k], 4) for k in ("pass@1", "format_rate")}
            for name, m in results["datasets"].items()
        },
    }
    print(json.dumps(head), flush=True)


@dataclass
class Planned:
    """One evaluation of a command, every input checked (:func:`plan`); ``results`` once it ran."""

    args: argparse.Namespace
    cfg: EvalConfig
    res: Any
    data: dict[str, list[Any]]
    save: Path
    shard: tuple[int, int]
    groups: list[list[str]]
    trackers: list[str]
    visible: list[str]
    programs: Sandbox | None
    results: dict = field(default_factory=dict)


def plan(args: argparse.Namespace, where: dict[str, Path], sandboxes: dict[str, Sandbox]) -> Planned:
    """Check one evaluation's inputs (the flags by their types already, then the settings together, the run
    folder, the model folder, the data, an earlier run in the folder and the GPUs) without loading a model
    or changing a file. ``sandboxes``: the ones built so far, by setting (one per command and setting)."""
    trackers = result_trackers(args.logger)
    backend = pick_backend(args.backend)
    cfg = EvalConfig(
        **{
            **flag_values(args, EvalConfig),
            "data_dir": None if args.data_dir is None else str(args.data_dir),
            "subfolder": default_subfolder(args.model, args.subfolder),
            "backend": backend,
            "chunk_size": args.chunk_size
            if args.chunk_size is not None
            else chunk_size_for(backend, args.batch_size),
        }
    )
    sandbox = sandbox_setting(args.sandbox)  # where programs run (code sets); not part of a run's identity
    names = resolve_names(args.dataset)
    save = args.output_dir or default_save_path(cfg)
    check_output_dir(save, "--output-dir")
    where["save"] = save
    # The model first: with no hub its one-line error (use --model embedded or tiny) is the one to see.
    res = resolve_model(args.model, cfg.subfolder, fmt=FORMATS[args.format])
    if backend == "vllm":
        check_max_model_len(args.max_model_len, Path(res.path))
    data = load_benchmarks(names, cfg.data_dir, args.limit, use_hub=not args.no_hub)
    shard = parse_shard(args.shard)
    # A data-parallel worker writes its own file in the folder its parent holds.
    check_resume(save, data, cfg, args.force, worker=shard[1] > 1)
    gpus = parse_gpus(args.gpus)
    visible = visible_devices()
    groups = plan_workers(visible, gpus, args.tp, args.workers) if shard[1] == 1 else []
    programs = None
    if runs_programs(r.kind for recs in data.values() for r in recs):
        # Built here (a missing tool is one line, before any model load); exported to $E2C_SANDBOX for the
        # data-parallel workers this process starts, which build their own the same way.
        key = str(sandbox)
        if key not in sandboxes:
            sandboxes[key] = use(sandbox, print, "eval")
        programs = sandboxes[key]
    return Planned(args, cfg, res, data, Path(save), shard, groups, trackers, visible, programs)


def evaluate(
    runs: list[argparse.Namespace],
    where: dict[str, Path],
    segments: list[list[str]] | None = None,
    finished: Callable[[Planned], None] = lambda p: None,
) -> list[Planned]:
    """Check every evaluation's inputs, then load the model once and run each in turn; returns them with
    their results, each handed to ``finished`` as soon as it has them (the command reports each evaluation
    before the next runs). ``where["save"]`` is the run folder being checked or run (for the message of an
    interrupted run). With several data-parallel workers (:func:`plan_workers`) this process starts them
    (with ``segments``, the command line's evaluations), merges and reports; a worker has no results.

    Everything that can be refused is refused before :func:`e2c.commandline.entry.checks_done`, for every evaluation,
    so a bad command costs no model load and changes no file."""
    quiet_libraries()
    sandboxes: dict[str, Sandbox] = {}
    planned: list[Planned] = []
    for i, args in enumerate(runs, 1):
        p = plan(args, where, sandboxes)
        for j, q in enumerate(planned, 1):
            if q.save.resolve() == p.save.resolve():
                raise UserError(
                    f"evaluations {j} and {i} write the same run folder {p.save}: give each its own --output-dir"
                )
        planned.append(p)
    checks_done()
    interrupt_on_sigterm()

    def done(p: Planned) -> None:
        if p.trackers:  # one process's results or the workers' merged: logged the same way
            # Before the report: verl's trackers print on stdout, whose last line is the results' JSON.
            scalars, samples = tracker_payload(p.results, p.save)
            log_results(p.trackers, p.save, p.save.name, scalars, samples)
        finished(p)

    if len(planned[0].groups) > 1:
        return run_workers(planned, segments or [[]], where, done)
    return run_checked(planned, where, done)


def run_checked(
    planned: list[Planned], where: dict[str, Path], finished: Callable[[Planned], None]
) -> list[Planned]:
    """The evaluations in this process, once every check passed: the model loads once; every evaluation's
    prompts are checked against its context before the first runs; each claims its folder in
    :func:`run_eval` and goes to ``finished`` when it has its results (none in a data-parallel worker)."""
    first = planned[0]
    args = first.args
    where["save"] = first.save  # the model loads for the first evaluation
    gen, extra = run_generator(
        first.cfg.backend,
        first.res,
        FORMATS[args.format],
        (lambda s: None) if args.quiet else note,
        f"run folder {first.save}" + (f" (and {len(planned) - 1} more)" if len(planned) > 1 else ""),
        gpus=args.tp if first.visible else None,
        batch_size=args.batch_size,
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
        seed=args.seed,
        max_model_len=args.max_model_len,
    )
    for p in planned:  # every one before the first runs: a later one that does not fit stops nothing run
        check_context(gen, p.data, p.cfg, {name: dataset_budget(p.cfg, name) for name in p.data})
    for n, p in enumerate(planned, 1):
        where["save"] = p.save
        p.cfg.extra = dict(extra)
        log = (lambda s: None) if p.args.quiet else note
        if len(planned) > 1:
            # Marks where each evaluation starts, for a reader of the progress lines (the quickstart's): a
            # resumed evaluation that is already complete prints no problem line of its own.
            log(evaluation_line(n, len(planned), p.save))
        p.results = run_eval(
            gen, p.data, p.cfg, p.save, log, p.shard, force=p.args.force, sandbox=p.programs, checked=True
        )
        if p.results:
            finished(p)
    return planned


def visible_devices() -> list[str]:
    """The GPU ids this process may use (``CUDA_VISIBLE_DEVICES``, else torch's count); [] on a CPU."""
    n = gpu_count()
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if n and env:
        return [d.strip() for d in env.split(",") if d.strip()][:n]
    return [str(i) for i in range(n)]


def worker_argv(
    segments: list[list[str]], planned: list[Planned], rank: int, world: int, devices: list[str]
) -> list[str]:
    """A data-parallel worker's command line: every evaluation's flags with its share and its folder."""
    out: list[str] = []
    for i, (words, p) in enumerate(zip(segments, planned, strict=True)):
        extra = ["--shard", f"{rank}/{world}", "--workers", "1", "--output-dir", str(p.save)]
        if devices:
            extra += ["--gpus", str(len(devices))]
        out += [*([THEN] if i else []), *words, *extra]
    return out


def run_workers(
    planned: list[Planned],
    segments: list[list[str]],
    where: dict[str, Path],
    finished: Callable[[Planned], None],
) -> list[Planned]:
    """Data-parallel evaluation: one worker process per device group, each loading the model once and
    sampling its share of every evaluation's chunks into its own files; then merge, grade and report here.
    A killed run resumes: finished chunks (merged or still in a worker's file) are not sampled again."""
    import subprocess
    from contextlib import ExitStack

    groups = planned[0].groups
    world = len(groups)
    log = (lambda s: None) if planned[0].args.quiet else note
    logs = planned[0].save / "workers"
    where["save"] = planned[0].save
    with ExitStack() as held:
        # This process holds the folders for its workers, which write their own files in them: every one
        # claimed before any is written.
        for p in planned:
            held.enter_context(eval_run_folder(p.save, p.cfg, p.args.force).claim(note))
        for p in planned:
            write_config(p.save, p.cfg)  # written once, before the workers read it
        logs.mkdir(parents=True, exist_ok=True)
        procs = []
        try:
            for rank, devices in enumerate(groups):
                env = dict(os.environ)
                if devices:
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
                argv = worker_argv(segments, planned, rank, world, devices)
                with (logs / f"rank{rank}.log").open("w") as out:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "e2c.eval.run", *argv], env=env, stdout=out, stderr=out
                        )
                    )
                log(
                    f"worker {rank}/{world} on {'GPUs ' + ','.join(devices) if devices else 'the CPU'}: {logs / f'rank{rank}.log'}"
                )
            codes = [p.wait() for p in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait()
        bad = [(r, c) for r, c in enumerate(codes) if c != 0]
        if bad:
            r, c = bad[0]
            tail = (logs / f"rank{r}.log").read_text(errors="replace").strip().splitlines()[-1:] or [
                "(no output)"
            ]
            raise UserError(
                f"data-parallel worker {r} exited with status {c} ({tail[0][:300]}); see "
                f"{logs / f'rank{r}.log'}; the same command resumes"
            )
        for p in planned:
            where["save"] = p.save
            p.results = merge_workers(p, world, log)
            finished(p)
    return planned


def merge_workers(p: Planned, world: int, log: Any) -> dict:
    """One evaluation's worker files merged, checked complete, graded and reported (its folder held)."""
    import types

    for name, recs in p.data.items():
        merge_shards(p.save, name)
        got = read_predictions(p.save / "predictions" / f"{name}.jsonl")
        short = sum(max(0, p.cfg.samples - len(got.get(i, {}))) for i in range(len(recs)))
        if short:
            raise UserError(f"{name}: the workers left {short} samples unsampled; the same command resumes")
    from transformers import AutoTokenizer

    summary = types.SimpleNamespace(
        name=f"{p.cfg.backend} x{world} workers", tokenizer=AutoTokenizer.from_pretrained(p.res.path)
    )
    p.cfg.extra = {"model_path": p.res.path, "model_description": p.res.description, "workers": world}
    return run_eval(summary, p.data, p.cfg, p.save, log)


if __name__ == "__main__":
    run_main(main)
