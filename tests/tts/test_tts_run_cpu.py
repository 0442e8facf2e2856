"""tts/run_tts.py end to end on the tiny model: every method, two budgets, outputs, resume, bad input."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2c.tts.run import read_done, record_key, summarize
from e2c.view.page import extract_json

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "--set",
    "explore_budget=12",
    "--set",
    "execute_budget=16",
    "--set",
    "cot_tokens=24",
    "--set",
    "judge_tokens=4",
    "--set",
    "refine_tokens=8",
    "--set",
    "tree_step_tokens=6",
    "--set",
    "tree_branching=2",
    "--set",
    "tree_beam=1",
    "--set",
    "react_rounds=1",
]


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "tts/run_tts.py", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


@pytest.mark.slow  # TTS on the tiny model, every method, then resumed (15 s or more on 2 cores)
def test_run_tts_tiny_all_methods_and_resume_cpu(tmp_path: Path, bench_dir: Path) -> None:
    args = [
        "--model",
        "tiny",
        "--backend",
        "hf",
        "--dataset",
        "gsm8k",
        "--data-dir",
        str(bench_dir),
        "--limit",
        "2",
        "--budgets",
        "1",
        "2",
        "--output-dir",
        str(tmp_path),
        *SMALL,
    ]
    res = _run(args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    last = json.loads(res.stdout.strip().splitlines()[-1])
    rows = last["summary"]
    assert len(rows) == 10 * 2  # every method at both budgets
    assert {r["method"] for r in rows} == {
        "greedy_cot",
        "self_consistency",
        "e2c_sc",
        "e2c_rp",
        "e2c_select_lm_judge",
        "e2c_select_semantic_cluster",
        "e2c_react_loop",
        "e2c_tot",
        "tree_of_thoughts",
        "forest_of_thought",
    }
    assert all(r["problems"] == 2 and r["tokens_k"] > 0 for r in rows)
    by = {(r["method"], r["budget"]): r for r in rows}
    # self-consistency samples N whole chains: twice the chains at N=2 (each at most cot_tokens).
    assert by[("self_consistency", 2)]["tokens_k"] <= 2 * 2 * 24 / 1000 + 1e-9
    assert by[("e2c_rp", 1)]["tokens_k"] <= (12 + 16) / 1000 + 1e-9
    out = Path(last["results"]).parent
    assert (out / "accuracy_vs_tokens.png").stat().st_size > 1000
    with (out / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 20
    assert len(read_done(out / "records.jsonl")) == 40
    assert not (out / "view.html").exists()
    # A rerun with the same settings finds every result and generates nothing; --view adds the run's page.
    again = _run([*args, "--view"], timeout=300)
    assert again.returncode == 0 and "40/40 results already" in again.stdout
    assert json.loads(again.stdout.strip().splitlines()[-1])["summary"] == rows
    assert f"view: {out / 'view.html'}" in again.stdout
    page = extract_json((out / "view.html").read_text(encoding="utf-8"))
    assert len(page["problems"]) == 2 and all(len(p["runs"][0]) == 20 for p in page["problems"])
    # Other settings in the same folder are refused rather than mixed in.
    other = _run([*args, "--set", "temperature=0.5"], timeout=300)
    assert (
        other.returncode == 2
        and "holds another run (settings.temperature 0.9 -> 0.5); use another --output-dir, or --force to start over"
        in other.stderr
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--methods", "beam_search"],
            "--methods must be a registered TTS method, got 'beam_search'; valid: e2c_react_loop",
        ),
        (["--set", "explore_steps=3"], "--set explore_steps=3: unknown TTS setting 'explore_steps'; valid:"),
        (["--set", "oops"], "--set must be KEY=VALUE (a TTS setting and its value), got 'oops'"),
        (["--budgets", "0"], "--budgets must be >= 1, got 0"),
        (["--dataset", "aime2099"], "aime2099"),
    ],
)
def test_run_tts_bad_input_cpu(tmp_path: Path, extra: list[str], message: str) -> None:
    res = _run(["--model", "tiny", "--backend", "hf", "--output-dir", str(tmp_path), *extra], timeout=120)
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing written


def test_summary_and_resume_keys_cpu(tmp_path: Path) -> None:
    recs = [
        {
            "method": "m",
            "budget": 2,
            "problem_id": "a",
            "correct": True,
            "generated_tokens": 1000,
            "prompt_tokens": 50,
            "calls": 2,
            "seconds": 1.0,
        },
        {
            "method": "m",
            "budget": 2,
            "problem_id": "b",
            "correct": False,
            "generated_tokens": 3000,
            "prompt_tokens": 150,
            "calls": 4,
            "seconds": 3.0,
        },
    ]
    (row,) = summarize(recs)
    assert row == {
        "method": "m",
        "budget": 2,
        "problems": 2,
        "accuracy": 0.5,
        "tokens_k": 2.0,
        "prompt_tokens_k": 0.1,
        "calls": 3.0,
        "seconds": 2.0,
    }
    p = tmp_path / "records.jsonl"
    p.write_text(json.dumps(recs[0]) + "\n" + '{"method": "m", "bud')  # a line cut by a kill
    assert list(read_done(p)) == [record_key("m", 2, "a")]


@pytest.mark.slow
def test_run_tts_embedded_small_slow(tmp_path: Path, bench_dir: Path) -> None:
    """The embedded SmolLM2 through three methods at K/N=2 on one GSM8K problem (about half a minute)."""
    args = [
        "--model",
        "embedded",
        "--backend",
        "hf",
        "--dataset",
        "gsm8k",
        "--data-dir",
        str(bench_dir),
        "--limit",
        "1",
        "--budgets",
        "2",
        "--output-dir",
        str(tmp_path),
        "--methods",
        "self_consistency",
        "e2c_sc",
        "e2c_select_lm_judge",
        "--set",
        "explore_tokens=24",
        "--set",
        "execute_tokens=48",
        "--set",
        "cot_tokens=72",
    ]
    res = _run(args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {r["method"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])["summary"]}
    assert set(rows) == {"self_consistency", "e2c_sc", "e2c_select_lm_judge"}
    assert 0 < rows["e2c_sc"]["tokens_k"] <= 2 * (24 + 48) / 1000
    assert 0 < rows["self_consistency"]["tokens_k"] <= 2 * 72 / 1000


def test_budget_free_method_runs_once_per_problem_cpu(tmp_path: Path) -> None:
    from e2c.data.registry import Record
    from e2c.generation.scripted import ScriptedGenerator
    from e2c.tts import TTSSettings
    from e2c.tts.run import run_tts

    gen = ScriptedGenerator(lambda prompt, j: "plan</EXPLORATION><EXECUTION>\\boxed{12}</EXECUTION>")
    recs = [
        Record(id=f"q{i}", problem=f"What is {i} + 12 - {i}?", answer="12", kind="math") for i in range(2)
    ]
    rows = run_tts(
        gen,
        recs,
        ["greedy_cot"],
        [1, 4, 8],
        TTSSettings(cot_tokens=20),
        tmp_path,
        {"t": 1},
        log=lambda _m: None,
    )
    assert len(gen.calls) == 2  # one greedy chain per problem, reused at every budget
    assert [(r["budget"], r["accuracy"]) for r in rows] == [(1, 1.0), (4, 1.0), (8, 1.0)]
    assert rows[0]["tokens_k"] == rows[2]["tokens_k"] > 0


# ------------------------------------------------------------- the package entry and the paper's shim
ENTRIES = {"package": [sys.executable, "-m", "e2c.tts"], "shim": [sys.executable, "tts/run_tts.py"]}
PROGS = {"package": "python -m e2c.tts", "shim": "tts/run_tts.py"}


def test_package_entry_and_shim_have_the_same_options_cpu() -> None:
    """``python -m e2c.tts --help`` works and offers exactly the flags and help of ``tts/run_tts.py``; only
    the program's name (and the usage lines' wrapping around it) differs."""
    env = {**os.environ, "COLUMNS": "100"}  # one help width for both
    seen = {}
    for name, cmd in ENTRIES.items():
        r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert r.returncode == 0 and not r.stderr, r.stderr[-2000:]
        usage, rest = r.stdout.split("\n\n", 1)
        assert usage.startswith(f"usage: {PROGS[name]} ")
        seen[name] = (re.findall(r"\[(--?[\w-]+)", usage), rest)
    assert seen["package"] == seen["shim"]
    flags, rest = seen["package"]
    assert "--methods" in flags and "--nested-budgets" in flags and "--config" in rest


def test_shim_parses_and_loads_configs_as_the_package_cpu() -> None:
    """The shim's ``parse_args`` / ``load_config`` (the paper's-command tests use them) are the package's."""
    import importlib.util

    from e2c.tts import cli as cli

    spec = importlib.util.spec_from_file_location("run_tts_shim", ROOT / "tts" / "run_tts.py")
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    argv = ["--methods", "e2c_sc", "--budgets", "2", "--set", "explore_tokens=8", "--model", "tiny"]
    assert shim.parse_args(argv) == cli.parse_args(argv)
    assert shim.load_config(shim.parse_args(argv)) == cli.load_config(cli.parse_args(argv))
    assert shim.load_config is cli.load_config


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus (see {prog} --help)"),
        (
            ["--methods", "beam_search"],
            "--methods must be a registered TTS method, got 'beam_search'; valid: e2c_react_loop",
        ),
    ],
)
def test_bad_flag_is_one_error_line_through_both_entries_cpu(
    tmp_path: Path, entry: str, extra: list[str], message: str
) -> None:
    r = subprocess.run(
        [*ENTRIES[entry], "--model", "tiny", "--output-dir", str(tmp_path), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert message.format(prog=PROGS[entry]) in lines[0]
    assert not any(tmp_path.iterdir())  # nothing written


# ------------------------------------------------------ a new method: one decorated function, no lists
@pytest.fixture
def probe_methods() -> Iterator[dict[str, list[tuple[int, bool]]]]:
    """Two throwaway methods registered for one test, the registry restored afterwards; each logs its
    calls as ``(budget, got an embedder)``. ``probe_whole`` declares whole chains and no budget
    dependence; ``probe_draws`` nestable budgets and an embedder."""
    from e2c.tts.base import METHODS, TRAITS, register, weighted_vote
    from e2c.tts.methods import execute, explore_counted, prefix_votes, sample_full

    saved = dict(METHODS), dict(TRAITS)
    calls: dict[str, list[tuple[int, bool]]] = {"probe_whole": [], "probe_draws": []}

    @register("probe_whole", chains=True, budget_free=True)
    def probe_whole(ctx, budget):
        calls["probe_whole"].append((budget, ctx.embed is not None))
        return sample_full(ctx, 1, 0.0, "probe")[0], {}

    @register("probe_draws", nestable=True, needs_embedder=True)
    def probe_draws(ctx, budget):
        calls["probe_draws"].append((budget, ctx.embed is not None))
        plans, tokens = explore_counted(ctx, budget)
        cands = execute(ctx, plans, plan_tokens=tokens)
        return weighted_vote(cands), {"prefix": prefix_votes(cands)}

    try:
        yield calls
    finally:
        METHODS.clear()
        METHODS.update(saved[0])
        TRAITS.clear()
        TRAITS.update(saved[1])


def test_a_registered_method_is_run_by_its_traits_with_no_other_edit_cpu(
    probe_methods: dict[str, list[tuple[int, bool]]],
    tmp_path: Path,
    bench_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Registered in the test and nowhere else, the methods are offered by ``--methods`` and
    ``--nested-budgets``, accepted, and run as their traits say: the budget-free one once per problem,
    the nestable one at the largest budget only, the embedder loaded for the one that needs it."""
    import numpy as np

    from e2c.generation.scripted import ScriptedGenerator
    from e2c.tts import cli as cli

    help_text = " ".join(cli.build_parser().format_help().split())
    assert "probe_draws" in help_text and "probe_whole" in help_text
    assert "self_consistency, e2c_sc and probe_draws run at the largest budget only" in help_text

    gen = ScriptedGenerator(lambda prompt, j: "add</EXPLORATION><EXECUTION>\\boxed{12}</EXECUTION>")
    gen.max_context = 4096
    monkeypatch.setattr(cli, "make_generator", lambda *a, **k: (gen, None))
    embedders: list[str] = []

    def load_embedder(name: str):
        embedders.append(name)
        return lambda texts: np.ones((len(texts), 2))

    monkeypatch.setattr(cli, "load_embedder", load_embedder)
    monkeypatch.setattr(cli, "interrupt_on_sigterm", lambda: None)  # keep pytest's own SIGTERM handling
    args = [
        *["--model", "tiny", "--backend", "hf", "--dataset", "gsm8k", "--data-dir", str(bench_dir)],
        *["--limit", "2", "--budgets", "1", "2", "--methods", "probe_whole", "probe_draws"],
        *["--nested-budgets", "--output-dir", str(tmp_path), *SMALL],
    ]
    assert cli.main(args) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["summary"]
    assert {(r["method"], r["budget"], r["problems"]) for r in rows} == {
        (m, b, 2) for m in ("probe_whole", "probe_draws") for b in (1, 2)
    }
    assert [b for b, _ in probe_methods["probe_whole"]] == [1, 1]  # budget_free: once per problem
    assert probe_methods["probe_draws"] == [(2, True), (2, True)]  # nestable: the largest budget only
    assert len(embedders) == 1  # needs_embedder: loaded, once, and handed to the method
    done = read_done(tmp_path / "gsm8k" / "tiny" / "records.jsonl").values()
    assert {
        r["details"].get("same_as_budget") for r in done if r["method"] == "probe_whole" and r["budget"] == 2
    } == {1}
    assert {
        r["details"].get("nested_from") for r in done if r["method"] == "probe_draws" and r["budget"] == 1
    } == {2}


def test_context_check_sizes_a_registered_method_by_its_chains_trait_cpu(
    probe_methods: dict[str, list[tuple[int, bool]]],
) -> None:
    """Whole-chain methods are checked against ``cot_tokens``; the others against explore + execute."""
    from e2c.core.errors import UserError
    from e2c.data.registry import Record
    from e2c.generation.scripted import ScriptedGenerator
    from e2c.tts import TTSSettings
    from e2c.tts.run import check_context

    gen = ScriptedGenerator(lambda prompt, j: "")
    gen.max_context = 4096
    recs = [Record(id="q", problem="What is 7 + 5?", answer="12", kind="math")]
    long_chains = TTSSettings(cot_tokens=5000, explore_budget=100, execute_budget=100)
    with pytest.raises(UserError, match=re.escape("cot_tokens (--set) is 5000")):
        check_context(gen, recs, long_chains, ["probe_whole"])
    check_context(gen, recs, long_chains, ["probe_draws"])  # no whole chains: cot_tokens does not apply
    long_plans = TTSSettings(cot_tokens=100, explore_budget=5000, execute_budget=100)
    with pytest.raises(UserError, match=re.escape("explore_budget + execute_budget (--set) is 5100")):
        check_context(gen, recs, long_plans, ["probe_draws"])
    check_context(gen, recs, long_plans, ["probe_whole"])  # whole chains only: cot_tokens decides
