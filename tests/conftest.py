"""Shared fixtures. Models are built into the toolkit cache (``$E2C_CACHE`` or ``~/.cache/e2c``) once
and reused across runs: the tiny model in seconds, the embedded one in about 40 s the first time."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest
from bench_fixture import HAVE_REAL, MISSING, REAL
from bench_fixture import bench_dir as _bench_dir

BENCH_DIR = _bench_dir()  # the real copies, else the stand-in (tests/bench_fixture.py)
# Commands the tests start read their default data folder from here, so they find the same files.
os.environ.setdefault("E2C_BENCH_DIR", str(BENCH_DIR))
# The RL memory check (e2c/rl/memory.py) still computes its estimate in every command the tests start, but
# against a machine this large, so no test depends on how much memory other jobs leave free;
# tests/rl/test_memory_cpu.py sets its own sizes.
os.environ.setdefault("E2C_MEMORY_GIB", "1024")
# vLLM's CPU KV cache, preallocated per engine (2 GiB per rollout replica, 4 per evaluation by default): 1 GiB
# (its smallest whole size) holds 2M of the tiny model's tokens and 46k of the embedded one's, more than any
# test asks for, and keeps two workers' runs (a 4-replica GRPO step beside another) inside 24 GiB.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture(scope="session")
def tiny_path() -> str:
    from e2c.core.models import resolve_model

    return resolve_model("tiny").path


@pytest.fixture(scope="session")
def tiny_tok(tiny_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_path)


@pytest.fixture(scope="session")
def embedded_path() -> str:
    from e2c.core.models import resolve_model

    return resolve_model("embedded").path


@pytest.fixture(scope="session")
def embedded_tok(embedded_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_path)


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    """Benchmark files in every source's layout: the real copies, else the stand-in."""
    return BENCH_DIR


@pytest.fixture(scope="session")
def real_bench_dir() -> Path:
    """The real benchmark copies, for tests about their content; skipped where they are missing."""
    if not HAVE_REAL:
        pytest.skip(MISSING)
    return REAL


@functools.lru_cache(maxsize=8)
def recipe_dry_run(**env: str) -> tuple[int, str, str]:
    """``DRY_RUN=1 bash scripts/gpu_recipe.sh`` with ``env``, from another folder: (exit, stdout, stderr).
    Kept per ``env`` for the session: each dry run composes and checks every training config (~20 s)."""
    recipe = Path(__file__).resolve().parents[1] / "scripts" / "gpu_recipe.sh"
    r = subprocess.run(
        ["bash", str(recipe)],
        env={**os.environ, "DRY_RUN": "1", **env},
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    return r.returncode, r.stdout, r.stderr


def run_at_most(commands: dict, at_once: int = 2, timeout: float = 300) -> dict:
    """Run every command (a mapping of ``subprocess.run`` keyword arguments, ``args`` included), at most
    ``at_once`` at a time: (exit, stdout, stderr) by key. Each interpreter that imports verl and torch holds
    about 1 GiB; started all together beside another worker's training run they pushed this machine (no
    swap) into re-reading its libraries from disk, and runs took several times as long."""
    from concurrent.futures import ThreadPoolExecutor

    def one(kwargs: dict) -> tuple[int, str, str]:
        r = subprocess.run(capture_output=True, text=True, timeout=timeout, **kwargs)
        return r.returncode, r.stdout, r.stderr

    with ThreadPoolExecutor(max_workers=at_once) as pool:
        futures = {key: pool.submit(one, kwargs) for key, kwargs in commands.items()}
        return {key: f.result() for key, f in futures.items()}


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, theirs, ...), read from ``/proc`` now: those in sessions of their
    own too, which a process-group kill misses (torchrun starts each worker in a new session)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ")"
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # ended while this read the table
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def ended(pid: int) -> bool:
    """Whether ``pid`` has ended: gone, or a zombie (its new parent, init, has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every process below it: what a scheduler's hard kill of a whole job
    does. The tree is read first: a child whose parent is killed is handed to init and can no longer be found."""
    import signal

    below = descendants(pid)
    for kill, target in ((os.killpg, pid), *((os.kill, p) for p in below)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_group(args: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a session of its own, whose whole process tree (:func:`kill_tree`) is killed on a
    timeout (then ``TimeoutExpired`` as usual). A training script's verl trainer and ray's processes outlive a killed
    ``bash``: an RL run left behind that way held 5 GiB and its CPU through the rest of a test run."""

    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(args, timeout, out, err) from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def arithmetic_rl_rows(n: int = 16) -> list[dict]:
    """verl RL rows of small sums (what the tiny-model training tests train on); difficulty 1-3 in turn."""
    rows = []
    for i in range(n):
        a, b = 3 + i, 4 + 2 * i
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"What is {a} + {b}? Put the answer in \\boxed{{}}."}],
                "data_source": "synthetic/arithmetic",
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"index": i, "kind": "math", "difficulty": 1 + i % 3},
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------ tiers
# Three tiers (README, "Tests"): unit tests (in process, no model: the ``unit`` marker, given here to every
# test that is neither of the others), integration tests (one component, a real model on CPU: ``integration``,
# given here to every test that asks for a model fixture, or marked so), and end-to-end runs (verl and ray
# trainers, vLLM, several ranks, the quickstart and claims ``--fast``, the paper's pipeline: ``slow``).
# ``bash scripts/test.sh`` runs the first two; ``.ci/run`` then the third (``-m slow``).
MODEL_FIXTURES = {"tiny_path", "tiny_tok", "embedded_path", "embedded_tok"}
# A test of the first two tiers that takes longer than its tier's limit is named at the end of the run, with
# the tier it belongs to: so nothing heavy hides in the command developers run. Seconds of the test's own call
# (fixtures apart) on a 2-core machine. The check reports rather than fails: a test's seconds depend on the
# machine and its load (CI's machine ran some launcher tests 2 to 6 times slower than this one), and a timing
# must not turn a correct change red. E2C_TIER_STRICT=1 makes them failures (for a developer on a quiet
# machine); E2C_TIER_LIMIT_SCALE scales the limits (0 turns the check off).
TIER_LIMITS = {"unit": 45.0, "integration": 60.0}
TIER_FIX = {
    "unit": "mark it integration (one component, a real model) or slow",
    "integration": "mark it slow",
}


# The files whose end-to-end runs take longest (seconds on 2 cores beside another worker, `.ci/run` of
# 2026-12-08), longest first. pytest-xdist (scripts/test.sh: two workers, whole files, --no-loadscope-reorder)
# hands out files in collection order: these go first, so the longest run does not start last, with one
# worker idle while it finishes.
LONG_FILES = (
    "pipeline/test_claims_fast_slow.py",  # ~730 s
    "rl/test_rl_train_cpu.py",  # ~620 s
    "rl/test_multirank_cpu.py",  # ~550 s; its two-ray-node GRPO step (marker alone) runs apart
    "pipeline/test_quickstart_cpu.py",  # ~420 s
    "study/test_reproduce_cpu.py",  # ~400 s
    "pipeline/test_paper_pipeline_slow.py",  # ~360 s
    "rl/test_rl_curriculum_cpu.py",  # ~310 s
    "study/test_study_fast_slow.py",  # ~305 s
    "sft/test_sft_run_cpu.py",  # ~250 s
    "sft/test_lora_train_cpu.py",  # ~210 s
    "generation/test_vllm_cpu.py",  # ~150 s
    "rl/test_slurm_cpu.py",  # ~40 s
)


def file_rank(nodeid: str) -> int:
    """Where a test's file comes in the run: its place in :data:`LONG_FILES`, else after all of them."""
    path = nodeid.split("::", 1)[0].removeprefix("tests/")
    return LONG_FILES.index(path) if path in LONG_FILES else len(LONG_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "real_bench_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_data)
        if item.get_closest_marker("slow") or item.get_closest_marker("gpu"):
            continue
        if item.get_closest_marker("integration") or MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)
    # a stable sort: each file's tests keep their order (and their module fixtures, one file to a worker)
    items.sort(key=lambda item: file_rank(item.nodeid))


def tier_of(item: pytest.Item) -> str:
    for name in ("slow", "gpu", "integration", "unit"):
        if item.get_closest_marker(name):
            return name
    return "unit"


def over_tier_limit(nodeid: str, tier: str, seconds: float, scale: float = 1.0) -> str | None:
    """Why a test that took ``seconds`` does not belong to ``tier`` (None: it does)."""
    if tier not in TIER_LIMITS or scale <= 0 or seconds <= TIER_LIMITS[tier] * scale:
        return None
    limit = TIER_LIMITS[tier] * scale
    return f"{nodeid}: a {tier} test took {seconds:.0f} s, over the {tier} tier's {limit:.0f} s; {TIER_FIX[tier]}"


TIER_OVER = "e2c_tier_over"  # the user property that carries a report's "over its tier's limit" line
OVER_TIER: list[str] = []  # the lines this run's reports carried (collected where the summary is printed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when == "call" and report.passed:
        scale = float(os.environ.get("E2C_TIER_LIMIT_SCALE", "1") or 1)
        why = over_tier_limit(item.nodeid, tier_of(item), call.duration, scale)
        if why and os.environ.get("E2C_TIER_STRICT") == "1":
            report.outcome = "failed"
            report.longrepr = why + " (README, 'Tests')"
        elif why:
            report.user_properties.append((TIER_OVER, why))  # travels from an xdist worker to the summary
    if os.environ.get(CONTAINMENT_ROWS_ENV):
        record_containment(item, report, os.environ[CONTAINMENT_ROWS_ENV])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    OVER_TIER.extend(why for key, why in report.user_properties if key == TIER_OVER)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if OVER_TIER:
        terminalreporter.section("tests over their tier's limit (E2C_TIER_STRICT=1 fails them)", yellow=True)
        for line in OVER_TIER:
            terminalreporter.line(line)


# --- docs/code.md's containment table: each hostile test's outcome (attack, backend, outcome), recorded when
# $E2C_CONTAINMENT_ROWS names a file (tests/sandbox/containment_table.py runs the tests that way).
CONTAINMENT_ROWS_ENV = "E2C_CONTAINMENT_ROWS"


def record_containment(item: pytest.Item, rep: pytest.TestReport, path: str) -> None:
    """Append a hostile test's row (attack: its docstring's first paragraph; case; backend; outcome)."""
    if item.module.__name__.rpartition(".")[2] != "test_hostile_cpu":
        return
    if rep.when == "call" or (rep.when == "setup" and rep.skipped):
        doc = (item.function.__doc__ or item.name).strip().splitlines()
        attack = " ".join(line.strip() for line in doc[: doc.index("") if "" in doc else len(doc)])
        params = getattr(item, "callspec", None)
        backend = ""
        case = ""
        if params is not None:
            backend = str(params.params.get("grader_sbx", params.params.get("sbx", "")))
            inside = item.name[item.name.index("[") + 1 : -1]
            case = inside.removeprefix(backend + "-").removesuffix("-" + backend)
            case = "" if case == backend else case
        if rep.passed:
            result = "held"
        elif rep.skipped:
            reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            result = "skipped: " + reason.removeprefix("Skipped: ")
        else:
            result = "NOT HELD"
        row = {
            "test": item.originalname,
            "attack": attack,
            "case": case,
            "backend": backend,
            "outcome": result,
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
