#!/usr/bin/env python3
"""How long ``python -m e2c.view`` takes to build the page of a large run, and how big the page is.

    python bench/view.py [--chains 20000] [--samples 1] [--chars 400] [--out FILE] [--browser auto|none|PATH]

Writes a synthetic evaluation run folder (``--chains`` chains of about ``--chars`` characters each: a tenth
malformed, a tenth truncated, a tenth code problems with a program) in a temporary folder, then times the
build the command does: reading the folder (every chain split by the project's parser) and writing the one
HTML file. Goal: under 10 s for 20,000 chains.

With a chromium binary (``--browser auto`` finds one on PATH), it also times headless chromium loading the
page and drawing its first 50 problems (``--dump-dom``: the whole run of the browser, from start to the
printed DOM), minus the same for an empty page: an upper bound on the page's cost. A copy of the page that
writes ``performance.now()`` into its title after its script and at the next animation frame gives the time
from navigation start to the drawn DOM and to the frame after it, by the browser's own clock.
Without one it says so. Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import OUTPUT_FILE, TEXT, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.view import view_payload, write_page
from e2c.view.browser import chromium_on_path

WORDS = "add the groups then multiply each count by its size and check the total against the plan".split()


def sentence(rng: random.Random, chars: int) -> str:
    """Filler text of about ``chars`` characters (words drawn from a small list)."""
    out: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def synthetic_line(i: int, sample: int, rng: random.Random, chars: int) -> dict[str, Any]:
    """One prediction line as e2c.eval.run writes it; every tenth malformed, truncated or a code problem."""
    plan, work = sentence(rng, chars // 3), sentence(rng, 2 * chars // 3)
    kind = "code" if i % 10 == 3 else "math"
    response = f"\n{plan}\n</EXPLORATION><EXECUTION>\n{work}\nso \\boxed{{{i % 97}}}\n</EXECUTION>"
    status, finish = "ok", "stop"
    if i % 10 == 1:
        response, status = f"{plan} {work}", "no_tags"
    elif i % 10 == 2:
        response, status, finish = (
            f"\n{plan}\n</EXPLORATION><EXECUTION>\n{work}",
            "truncated_execution",
            "length",
        )
    elif kind == "code":
        response = f"\n{plan}\n</EXPLORATION><EXECUTION>\n```python\ndef f(x):\n    return x + {i}\n```\n</EXECUTION>"
    correct = rng.random() < 0.4
    row: dict[str, Any] = {
        "dataset": "synthetic",
        "index": i,
        "id": f"synthetic-{i:06d}",
        "sample": sample,
        "gold": str(i % 97),
        "kind": kind,
        "extracted": str(i % 97) if correct else None,
        "correct": correct,
        "reason": "correct" if correct else "wrong",
        "chain_status": status,
        "explore_tokens": len(plan) // 4,
        "execute_tokens": len(work) // 4,
        "explore_stop": "tag",
        "forced_close": False,
        "finish_reason": finish,
        "response": response,
    }
    if kind == "code":
        row |= {"tests_passed": rng.randint(0, 5), "tests_total": 5, "sandbox_s": 0.01}
    return row


def write_run(folder: Path, chains: int, samples: int, chars: int, seed: int = 0) -> int:
    """A synthetic eval run folder of ``chains`` chains; returns the size of its predictions file."""
    rng = random.Random(seed)
    (folder / "predictions").mkdir(parents=True)
    problems = max(1, chains // samples)
    lines = [synthetic_line(i, s, rng, chars) for i in range(problems) for s in range(samples)]
    metrics = {
        "problems": problems,
        "samples": len(lines),
        "pass@1": sum(r["correct"] for r in lines) / len(lines),
        "format_rate": 0.8,
        "truncation_rate": 0.1,
        "no_answer_rate": 0.5,
        "explore_tokens": 30.0,
        "execute_tokens": 60.0,
    }
    config = {
        "model": "synthetic",
        "dataset": "synthetic",
        "samples": samples,
        "format": "e2c",
        "prefill": True,
    }
    (folder / "results.json").write_text(json.dumps({"config": config, "datasets": {"synthetic": metrics}}))
    text = "".join(json.dumps(r) + "\n" for r in lines)
    (folder / "predictions" / "synthetic.jsonl").write_text(text)
    return len(text.encode())


def find_browser(choice: str) -> str | None:
    """The browser binary ``--browser`` names: ``none``, ``auto`` (the first chromium on PATH), or a path."""
    if choice == "none":
        return None
    if choice == "auto":
        return chromium_on_path()
    found = shutil.which(choice)
    if found is None:
        raise UserError(f"--browser {choice}: no such program; give a chromium binary, auto or none")
    return found


def dump_dom_seconds(binary: str, page: Path, profile: Path) -> tuple[float, str]:
    """Wall seconds of headless chromium loading ``page`` and printing its DOM, and the DOM."""
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
    t = time.perf_counter()
    r = subprocess.run(
        [*cmd, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=600
    )
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        raise UserError(f"{binary} failed on {page}: {(r.stderr.strip().splitlines() or ['no output'])[-1]}")
    return seconds, r.stdout


# Appended to a copy of the page: runs right after the page's own script (scripts run in order), so the
# title says when the first 50 problems were in the DOM and when the next frame came, by the browser's clock
# (milliseconds from the start of navigation). No DevTools protocol needed: --dump-dom prints the title.
TIMER = (
    "<script>document.title = 'drawn ' + performance.now().toFixed(0);"
    "requestAnimationFrame(() => { document.title += ' frame ' + performance.now().toFixed(0); });</script>"
)


def timed_copy(page: Path, out: Path) -> Path:
    """A copy of ``page`` that writes its own drawing times into its title (:data:`TIMER`)."""
    html = page.read_text(encoding="utf-8")
    cut = html.rindex("</body>")
    out.write_text(html[:cut] + TIMER + html[cut:], encoding="utf-8")
    return out


def page_times(dom: str) -> tuple[float | None, float | None]:
    """(ms to the drawn DOM, ms to the next frame) from a timed copy's dumped title; None where absent."""
    m = re.search(r"<title>drawn (\d+)(?: frame (\d+))?</title>", dom)
    if m is None:
        return None, None
    return float(m.group(1)), (float(m.group(2)) if m.group(2) else None)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="bench/view.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--chains", type=whole(1, 1_000_000), default=20_000, help="chains in the run (default 20000)"
    )
    p.add_argument("--samples", type=whole(1, 64), default=1, help="samples per problem (default 1)")
    p.add_argument("--chars", type=whole(10, 100_000), default=400, help="characters per chain (default 400)")
    p.add_argument("--out", type=OUTPUT_FILE, default=None, help="keep the page here (default: thrown away)")
    p.add_argument(
        "--browser", type=TEXT, default="auto", help="auto (a chromium on PATH), none, or a browser binary"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    binary = find_browser(args.browser)
    checks_done()
    with tempfile.TemporaryDirectory(prefix="e2c-bench-view-") as tmp:
        folder = Path(tmp) / "run"
        predictions_bytes = write_run(folder, args.chains, args.samples, args.chars)
        page = args.out or Path(tmp) / "view.html"
        t = time.perf_counter()
        payload = view_payload([folder], ["synthetic"])
        t_load = time.perf_counter() - t
        size = write_page(payload, page)
        t_build = time.perf_counter() - t
        samples = sum(len(s) for p in payload["problems"] for s in p["runs"])
        browser_s = empty_s = draw_ms = frame_ms = None
        drawn = None
        if binary is not None:
            empty = Path(tmp) / "empty.html"
            empty.write_text("<!doctype html><title>e</title><p>e</p>")
            empty_s = min(dump_dom_seconds(binary, empty, Path(tmp) / "p")[0] for _ in range(2))
            browser_s, dom = dump_dom_seconds(binary, page, Path(tmp) / "p")
            drawn = dom.count('class="problem"')
            timed = timed_copy(page, Path(tmp) / "timed.html")
            draw_ms, frame_ms = page_times(dump_dom_seconds(binary, timed, Path(tmp) / "p")[1])
    print(f"{'step':<44}{'seconds':>10}")
    print(f"{'read the run (parse every chain)':<44}{t_load:>10.2f}")
    print(f"{'build: read + write the page':<44}{t_build:>10.2f}")
    print(
        f"chains {samples}, predictions {predictions_bytes / 1e6:.1f} MB, page {size / 1e6:.1f} MB, cpus {os.cpu_count()}"
    )
    if browser_s is None:
        print("time to first paint: not measured (no chromium binary; --browser PATH names one)")
    else:
        print(
            f"headless chromium --dump-dom: {browser_s:.2f} s for the page, {empty_s:.2f} s for an empty page "
            f"(page cost {browser_s - empty_s:.2f} s), {drawn} problems drawn"
        )
        print(
            f"in the page, by the browser's clock: first 50 problems drawn at {draw_ms} ms, next frame at {frame_ms} ms"
        )
    print(
        json.dumps(
            {
                "chains": samples,
                "chars": args.chars,
                "load_s": round(t_load, 3),
                "build_s": round(t_build, 3),
                "page_mb": round(size / 1e6, 2),
                "goal_build_s": 10.0,
                "under_goal": t_build < 10.0,
                "browser": binary,
                "browser_dump_dom_s": None if browser_s is None else round(browser_s, 3),
                "browser_empty_page_s": None if empty_s is None else round(empty_s, 3),
                "problems_drawn": drawn,
                "first_draw_ms": draw_ms,
                "first_frame_ms": frame_ms,
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
