"""Threads sharing one generator (e2c.generation.batching): same completions and counts as running the calls
alone, fewer backend rounds, errors reach the callers, and TTS with workers writes what it writes alone."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from e2c.generation.base import Sampling
from e2c.generation.batching import Call, SharedGenerator, run_calls
from e2c.generation.scripted import ScriptedGenerator


def script(prompt: str, j: int) -> str:
    return f"{prompt[-12:]} sample {j} plan</EXPLORATION><EXECUTION>\\boxed{{{len(prompt) % 7}}}</EXECUTION>"


def calls_of(worker: int) -> list[Call]:
    return [
        Call((f"worker {worker} first",), Sampling(n=2, max_tokens=6)),
        Call((f"worker {worker} a", f"worker {worker} b"), Sampling(max_tokens=40, stop=("</EXPLORATION>",))),
        Call((f"worker {worker} last",), Sampling(n=3, max_tokens=9, temperature=0.0)),
    ]


def view(outs: list) -> list:
    # The scripted tokenizer numbers words in order of first sight, so ids depend on call order: compare the
    # rest (text, counts, reasons).
    return [
        [[(c.text, c.num_tokens, c.finish_reason, c.stop_reason) for c in row] for row in o] for o in outs
    ]


def run_threads(shared: SharedGenerator, workers: int) -> dict[int, list]:
    got: dict[int, list] = {}

    def work(w: int) -> None:
        with shared.handle() as h:
            outs = [h.generate(list(c.prompts), c.sampling) for c in calls_of(w)]
            got[w] = [outs, h.usage.snapshot()]

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return got


def test_shared_calls_equal_calls_alone_and_merge() -> None:
    shared_gen = ScriptedGenerator(script)
    shared = SharedGenerator(shared_gen, workers=4)
    got = run_threads(shared, 4)
    assert sorted(got) == [0, 1, 2, 3]
    for w in range(4):
        alone = ScriptedGenerator(script)
        ref = [r for r, _ in run_calls(alone, calls_of(w))]
        assert view(got[w][0]) == view(ref)
        assert got[w][1]["generated_tokens"] == alone.usage.generated_tokens
        assert got[w][1]["prompt_tokens"] == alone.usage.prompt_tokens > 0
    assert shared.calls == 12 and shared.merged_calls == 3  # every worker waits at each of its 3 calls
    assert sum(v[1]["generated_tokens"] for v in got.values()) == shared_gen.usage.generated_tokens


class Recorder:
    """A backend with ``generate_calls``: records how many calls each round held."""

    name = "rec"
    tokenizer = None

    def __init__(self) -> None:
        self.rounds: list[int] = []

    def generate_calls(self, calls: list[Call]) -> list:
        self.rounds.append(len(calls))
        if any("boom" in p for c in calls for p in c.prompts):
            raise RuntimeError("backend failed")
        return [([[] for _ in c.prompts], 0) for c in calls]


def test_rounds_wait_only_for_workers_still_running() -> None:
    rec = Recorder()
    shared = SharedGenerator(rec, workers=3)
    done = threading.Event()

    def short() -> None:
        with shared.handle() as h:
            h.generate(["x"])

    def long(k: int) -> None:
        with shared.handle() as h:
            for _ in range(k):
                h.generate(["y"])
        done.set()

    ts = [
        threading.Thread(target=short),
        threading.Thread(target=long, args=(3,)),
        threading.Thread(target=long, args=(3,)),
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=30)
    assert done.is_set() and rec.rounds == [3, 2, 2]


def test_a_backend_error_reaches_that_rounds_callers() -> None:
    rec = Recorder()
    shared = SharedGenerator(rec, workers=2)
    errors: list[str] = []

    def work(prompt: str) -> None:
        with shared.handle() as h:
            try:
                h.generate([prompt])
            except RuntimeError as e:
                errors.append(str(e))
            h.generate(["fine"])

    ts = [threading.Thread(target=work, args=(p,)) for p in ("boom", "ok")]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=30)
    assert errors == ["backend failed", "backend failed"] and rec.rounds == [2, 2]
    with pytest.raises(ValueError, match="workers must be >= 1"):
        SharedGenerator(rec, workers=0)


def test_run_tts_with_workers_writes_what_it_writes_alone(tmp_path: Path) -> None:
    from e2c.data.registry import Record
    from e2c.tts import TTSSettings
    from e2c.tts.run import run_tts

    recs = [
        Record(id=f"q{i}", problem=f"What is {i} + 12 - {i}?", answer="12", kind="math") for i in range(5)
    ]
    settings = TTSSettings(cot_tokens=30, explore_budget=10, execute_budget=20)
    out = {}
    for workers in (1, 4):
        gen = ScriptedGenerator(
            lambda p, j: f"plan {j}</EXPLORATION><EXECUTION>\\boxed{{{12 if j % 2 else 3}}}</EXECUTION>"
        )
        d = tmp_path / f"w{workers}"
        rows = run_tts(
            gen,
            recs,
            ["self_consistency", "e2c_sc"],
            [2, 3],
            settings,
            d,
            {"t": 1},
            log=lambda _m: None,
            workers=workers,
        )
        recs_out = sorted(
            (json.loads(x) for x in (d / "records.jsonl").read_text().splitlines()),
            key=lambda r: (r["method"], r["budget"], r["problem_id"]),
        )
        out[workers] = (
            [{k: v for k, v in r.items() if k != "seconds"} for r in recs_out],
            [{k: v for k, v in r.items() if k != "seconds"} for r in rows],
        )
    assert len(out[1][0]) == 20 and out[1] == out[4]
