"""Fail cleanly everywhere: bad input to the benchmark scripts (``python bench/<name>.py``).

Reported: bad flags gave tracebacks (an unknown ``--backend`` or ``--dtype``, ``--n 0``, ``--reg-frac 2``, a
``nan`` timeout); timeouts that parse but make no sense were taken (``python bench/grader_hostile.py
--timeout -1`` hung); and numeric flags of every script took ``nan``, ``inf``, negative, zero and huge
values. Each bad command here runs as a user runs it (a real process, with a time limit so that a hang
fails instead of stalling the suite) and must exit 2 with exactly one ``error:`` line and no traceback,
leaving every file that was there as it was. The full family of bad values per flag is the generated
test's (``tests/refusals/test_generated_cases_cpu.py``); the table below pins what was reported, flag by flag.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from bad_input import assert_one_line_error, run, snapshot, touch
from entry_fuzz import contract_broken, load, make_context, run_in_process, valued_flags
from fuzz_entries_bench import BENCH, ENTRIES

from e2c.commandline.argtypes import Number

# A refusal is a parse: seconds, even for the scripts that import torch. A hang is a failure, not a stall.
LIMIT_S = 120

# ---------------------------------------------------------------- 1. bad flags: one line, not a traceback
TRACEBACKS = {
    # name: (script and flags, words the one line must hold)
    "backend_not_a_choice": (
        ["bench/model_arithmetic.py", "--model", "tiny", "--backend", "nope"],
        ["--backend", "nope"],
    ),
    "dtype_not_a_choice": (
        ["bench/model_arithmetic.py", "--model", "tiny", "--backend", "hf", "--dtype", "nope"],
        ["--dtype", "nope"],
    ),
    "vllm_dtype_not_a_choice": (["bench/vllm_sampling.py", "--dtype", "int3"], ["--dtype", "int3"]),
    "count_not_a_number": (["bench/grader.py", "--n", "x"], ["--n", "got x"]),
    "zero_problems": (["bench/synthetic_data.py", "--n", "0"], ["--n", "got 0"]),
    "share_past_one": (["bench/synthetic_data.py", "--reg-frac", "2"], ["--reg-frac", "got 2"]),
    "share_of_one": (["bench/synthetic_data.py", "--reg-frac", "1"], ["--reg-frac", "< 1", "got 1"]),
    "unknown_arm": (["bench/eval_throughput.py", "--arms", "loop,warp"], ["--arms", "unknown arm 'warp'"]),
    "unknown_arm_dtype": (
        ["bench/eval_throughput.py", "--arms", "hf:int3"],
        ["--arms", "unknown dtype 'int3'"],
    ),
    "one_arm_to_compare": (
        ["bench/dtype_numerics.py", "--data-dir", BENCH, "--arms", "hf:float32"],
        ["--arms", "at least two arms"],
    ),
    "unknown_dataset": (
        ["bench/dtype_numerics.py", "--data-dir", BENCH, "--dataset", "gsm8k,nope"],
        ["--dataset", "'nope'"],
    ),
    "data_dir_missing": (
        ["bench/dtype_numerics.py", "--data-dir", "/nonexistent/e2c/bench"],
        ["--data-dir", "does not exist"],
    ),
    "unknown_lora_arm": (["bench/lora_cost.py", "--arms", "sft,warp"], ["--arms", "'warp'"]),
    "no_run": (["bench/multirank.py", "--runs", ","], ["--runs", "names no run"]),
    "unknown_init": (["bench/tag_init.py", "--inits", "zeros"], ["--inits", "zeros"]),
    "unknown_stage": (["bench/rl_cpu_step.py", "--stage", "3"], ["--stage", "3"]),
    "not_an_override": (["bench/rl_cpu_step.py", "--", "nokey"], ["override 'nokey'"]),
    "model_not_there": (["bench/vllm_sampling.py", "--model", "/nonexistent/e2c/model"], ["--model"]),
    "more_problems_than_gsm8k": (
        ["bench/rl_cpu_step.py", "--data-dir", BENCH, "--prompts", "1000", "--steps", "100"],
        ["--prompts x --steps", "100000"],
    ),
}


@pytest.mark.parametrize("case", TRACEBACKS, ids=str)
def test_bad_flag_is_one_line_not_a_traceback(case: str) -> None:
    argv, words = TRACEBACKS[case]
    assert_one_line_error(run(*argv, timeout=LIMIT_S), *words)


def test_benchmark_copies_without_the_files_are_one_line(tmp_path: Path) -> None:
    """A --data-dir that exists but lacks the benchmark files: named before any timing (was a traceback
    from the GSM8K read after the symbolic pairs were timed)."""
    r = run("bench/grader.py", "--data-dir", str(tmp_path), timeout=LIMIT_S)
    assert_one_line_error(r, "minerva_math.jsonl", "--data-dir")
    r = run("bench/eval_throughput.py", "--data-dir", str(tmp_path), timeout=LIMIT_S)
    assert_one_line_error(r, "--data-dir", "gsm8k")


# ------------------------------------------------------------ 2. timeouts that parse but make no sense
TIMEOUTS = ["-1", "0", "nan", "inf", "-inf", "1e300"]


@pytest.mark.parametrize("script", ["bench/grader_hostile.py", "bench/grader.py"])
@pytest.mark.parametrize("value", TIMEOUTS)
def test_nonsense_timeout_is_refused_fast(script: str, value: str) -> None:
    """``--timeout -1`` hung the hostile benchmark (the pool waited forever); 1e300 overflows select()."""
    t0 = time.monotonic()
    r = run(script, f"--timeout={value}", timeout=LIMIT_S)  # "=": argparse takes "-inf" for a flag
    assert_one_line_error(r, "--timeout", f"got {value}")
    assert time.monotonic() - t0 < 30, "a refusal is a parse, not a wait on the pool"


# ------------------------------------------ 3. every numeric flag: nan, inf, negative, zero, huge counts
# Flags where zero is a real setting (a seed, "list none", "no extra weight", "no full chains").
ZERO_MEANS_SOMETHING = {"--seed", "--top", "--explore-adv-coef", "--reg-frac"}


def numeric_flags(target: str) -> list[tuple[str, Number]]:
    return [(f, a.type) for f, a in valued_flags(load(target).build_parser()) if isinstance(a.type, Number)]


def nonsense(flag: str, kind: Number) -> list[str]:
    values = ["nan", "inf", "-inf", "-1", "1e999"]
    if flag not in ZERO_MEANS_SOMETHING:
        values.append("0")
    if kind.kind is int:
        values += [str(10**12), "9" * 400]  # a count no machine holds, and one past any C integer
    return values


def test_every_bench_script_has_its_numeric_flags_typed() -> None:
    """The reported scripts' numbers are declared numbers (a plain ``type=int`` took -1 and 10**12)."""
    expected = {
        "bench/grader.py": {"--n", "--workers", "--timeout"},
        "bench/grader_hostile.py": {"--timeout", "--repeat", "--top"},
        "bench/dtype_numerics.py": {"--limit", "--max-tokens", "--batch-size"},
        "bench/eval_throughput.py": {"--problems", "--samples", "--max-tokens", "--batch-size", "--seed"},
        "bench/lora_cost.py": {"--steps", "--rank"},
        "bench/model_arithmetic.py": {"--per-kind", "--seed"},
        "bench/rl_cpu_step.py": {"--prompts", "--n", "--max-tokens", "--steps"},
        "bench/rl_overhead.py": {"--steps", "--explore-adv-coef", "--seed"},
        "bench/synthetic_data.py": {"--n", "--workers", "--seed", "--reg-frac"},
        "bench/tag_init.py": {"--steps", "--batch", "--lr", "--seed"},
        "bench/vllm_sampling.py": {"--prompts", "--tokens"},
    }
    for target, flags in expected.items():
        assert {f for f, _ in numeric_flags(target)} >= flags, target


@pytest.mark.parametrize("target", sorted(ENTRIES))
def test_every_numeric_flag_refuses_nonsense(target: str, tmp_path: Path) -> None:
    """Each numeric flag of each script, added to a command that passes every check: refused in one line
    (in-process under E2C_CHECK_ONLY=1, so a value that slipped through would end at "checks passed")."""
    entry = ENTRIES[target]
    mod = load(target)
    ctx = make_context(tmp_path / "ctx")
    good = [a.format(tmp=tmp_path, file=ctx.file, folder=ctx.folder) for a in entry.good]
    broken = []
    for flag, kind in numeric_flags(target):
        for value in nonsense(flag, kind):
            why = contract_broken(run_in_process(mod.main, [*good, f"{flag}={value}"], entry.env))
            if why:
                broken.append(f"{flag} {value[:20]}: {why}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("target", sorted(t for t in ENTRIES if numeric_flags(t)))
def test_a_real_process_refuses_a_huge_count_or_nan(target: str, tmp_path: Path) -> None:
    """The same through a real process per script: its first numeric flag, the worst value of its kind."""
    flag, kind = numeric_flags(target)[0]
    value = str(10**12) if kind.kind is int else "nan"
    assert_one_line_error(run(target, flag, value, timeout=LIMIT_S), flag, f"got {value}")


# ------------------------------------------------------------------ nothing already written is changed
def test_refused_command_leaves_earlier_results(tmp_path: Path) -> None:
    earlier = touch(tmp_path / "throughput.json")
    runs = tmp_path / "lora"
    runs.mkdir()
    touch(runs / "sft.json")
    before = snapshot(tmp_path)
    r = run("bench/eval_throughput.py", "--json", str(earlier), "--samples", "-1", timeout=LIMIT_S)
    assert_one_line_error(r, "--samples", "got -1")
    r = run("bench/lora_cost.py", "--out", str(runs), "--steps", "1", timeout=LIMIT_S)
    assert_one_line_error(r, "--steps", "got 1")
    assert snapshot(tmp_path) == before


def test_output_paths_are_checked_before_any_work(tmp_path: Path) -> None:
    plain = touch(tmp_path / "plain")
    r = run("bench/lora_cost.py", "--out", str(plain), timeout=LIMIT_S)
    assert_one_line_error(r, "--out", "not a folder")
    r = run("bench/eval_throughput.py", "--json", str(tmp_path), timeout=LIMIT_S)
    assert_one_line_error(r, "--json", "folder")
    assert plain.read_text() == "keep me\n"


def test_good_commands_pass_their_checks(tmp_path: Path) -> None:
    """The registry's good commands pass every check in a real process too (check-only: no work)."""
    for target in ("bench/grader_hostile.py", "bench/synthetic_data.py"):
        good = [a.format(tmp=tmp_path) for a in ENTRIES[target].good]
        r = run(target, *good, env={"E2C_CHECK_ONLY": "1"}, timeout=LIMIT_S)
        assert r.returncode == 0 and "checks passed" in r.stderr, r.stderr[-2000:]
