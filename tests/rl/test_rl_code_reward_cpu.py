"""RL on code rows: the reward (all tests or a fraction of them), a sandbox failure as an error, the reward
manager's concurrent and bounded scoring of a batch, the health panel's code metrics, and the launcher's
``--sandbox`` / ``--code-reward``.

The sandbox is a fake (:class:`EchoSandbox`): a program's "output" is its own source, after a sleep; so a
test says exactly what runs, for how long, and how many at once. One test runs the real local sandbox."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

import e2c.sandbox as sandbox
from e2c.core.errors import UserError
from e2c.rewards.verl_score import compute_score
from e2c.rl import health
from e2c.sandbox import Limits, RunResult

PLAN = "I need a plan.\n1. Print the answer.</EXPLORATION><EXECUTION>Step 1: Print the answer.\n"


def chain(program: str) -> str:
    """A well-formed chain whose answer is ``program`` in a fenced block."""
    return f"{PLAN}```python\n{program}\n```</EXECUTION>"


def stdin_tests(*outputs: str) -> str:
    """A code row's reference: one stdin test per expected output (the input is unused)."""
    return json.dumps({"mode": "stdin", "tests": [{"input": "", "output": o} for o in outputs]})


class EchoSandbox:
    """A sandbox whose program prints its own source: ``7`` "prints" 7. It sleeps ``seconds`` per run,
    counts the runs going at once and the threads they ran on; ``status`` is what every run returns."""

    name = "echo"

    def __init__(self, seconds: float = 0.0, status: str = "ok") -> None:
        self.seconds, self.status = seconds, status
        self.lock = threading.Lock()
        self.active = self.peak = self.runs = 0
        self.threads: set[str] = set()

    def run(self, files: Mapping[str, str], main: str, stdin: str, limits: Limits) -> RunResult:
        with self.lock:
            self.active += 1
            self.runs += 1
            self.peak = max(self.peak, self.active)
            self.threads.add(threading.current_thread().name)
        try:
            time.sleep(self.seconds)
        finally:
            with self.lock:
                self.active -= 1
        if self.status == "sandbox_error":
            return RunResult("sandbox_error", None, "", "server did not answer", self.seconds)
        return RunResult("ok", 0, files[main].strip() + "\n", "", self.seconds)

    def describe(self) -> str:
        return "echo: no isolation (a test double)"


@pytest.fixture
def use_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Install a sandbox (and a fresh bound of ``workers`` programs at once) for one test; the code threads
    the reward manager built are shut down after it."""
    import e2c.rl.reward as reward

    def install(sbx: Any, workers: int = 4) -> Any:
        monkeypatch.setenv(sandbox.WORKERS_ENV, str(workers))
        monkeypatch.setattr(sandbox, "_from_env", sbx)
        monkeypatch.setattr(sandbox, "_slots", None)
        monkeypatch.setattr(reward, "_code_pool", None)
        return sbx

    yield install
    if reward._code_pool is not None:
        reward._code_pool.shutdown(wait=True)


# ------------------------------------------------------------------------------------ the reward itself
def test_all_tests_pass_scores_one_and_a_wrong_program_zero_cpu(use_sandbox: Any) -> None:
    use_sandbox(EchoSandbox())
    right = compute_score("livecodebench", chain("7"), stdin_tests("7", "7"))
    assert (right["score"], right["acc"], right["correct_reward"]) == (1.0, 1.0, 1.0)
    assert right["code"] == 1.0 and right["tests_fraction"] == 1.0 and right["sandbox_error"] == 0.0
    half = compute_score("livecodebench", chain("7"), stdin_tests("7", "8"))
    assert (half["score"], half["acc"], half["tests_fraction"], half["error"]) == (0.0, 0.0, 0.5, 0.0)


def test_fraction_mode_scores_the_share_of_tests_passed_cpu(use_sandbox: Any) -> None:
    use_sandbox(EchoSandbox())
    gold = stdin_tests("7", "7", "7", "8")
    row = compute_score("x", chain("7"), gold, {"kind": "code", "code_reward": "fraction"})
    # acc stays "every test passed"; the reward's correctness term is the fraction.
    assert (row["score"], row["correct_reward"], row["acc"]) == (0.75, 0.75, 0.0)
    # The reward function's configured keywords (reward_kwargs) win over the row's extra_info.
    kw = compute_score("x", chain("7"), gold, {"kind": "code", "code_reward": "fraction"}, code_reward="all")
    assert kw["score"] == 0.0
    # With the plan bonus a fraction is scaled as a correct answer is: all tests scores what "all" scores.
    full = stdin_tests("7", "7")
    for mode in ("all", "fraction"):
        out = compute_score("x", chain("7"), full, {"kind": "code", "code_reward": mode, "plan_bonus": True})
        assert out["score"] == 1.0  # the one plan step is carried out
    off_plan = chain("7").replace("Step 1: Print the answer.", "Something else.")
    base = compute_score("x", off_plan, full, {"kind": "code", "plan_bonus": True})
    frac = compute_score("x", off_plan, gold, {"kind": "code", "plan_bonus": True, "code_reward": "fraction"})
    assert base["score"] == 0.5 and frac["score"] == pytest.approx(0.75 * 0.5)
    with pytest.raises(ValueError, match="valid: all, fraction"):
        compute_score("x", chain("7"), gold, {"kind": "code", "code_reward": "most"})


def test_a_sandbox_failure_is_an_error_never_a_wrong_answer_cpu(use_sandbox: Any) -> None:
    use_sandbox(EchoSandbox(status="sandbox_error"))
    out = compute_score("x", chain("7"), stdin_tests("7"), {"kind": "code", "format_credit": 0.1})
    assert out["error"] == 1.0 and out["sandbox_error"] == 1.0
    # The documented reward: no correctness (verl cannot skip a sample), the chain's format credit kept.
    assert out["acc"] == 0.0 and out["correct_reward"] == 0.0 and out["score"] == pytest.approx(0.1)
    # A wrong answer is not an error.
    use_sandbox(EchoSandbox())
    wrong = compute_score("x", chain("8"), stdin_tests("7"), {"kind": "code"})
    assert wrong["error"] == 0.0 and wrong["sandbox_error"] == 0.0


def test_every_row_has_the_same_keys_cpu(use_sandbox: Any) -> None:
    # verl stacks each reward_extra_info key over the batch from its first row: a mixed batch needs them all.
    use_sandbox(EchoSandbox())
    math = compute_score("gsm8k", f"{PLAN}\\boxed{{4}}</EXECUTION>", "4")
    code = compute_score("mbpp", chain("7"), stdin_tests("7"))
    assert list(math) == list(code)
    assert (math["code"], math["sandbox_s"], math["sandbox_error"], math["tests_fraction"]) == (0, 0, 0, 0)


def test_the_real_local_sandbox_scores_a_program_cpu(use_sandbox: Any) -> None:
    use_sandbox(sandbox.make("local"))
    gold = json.dumps(
        {"mode": "stdin", "tests": [{"input": "1 2", "output": "3"}, {"input": "2 5", "output": "7"}]}
    )
    add = chain("a, b = map(int, input().split())\nprint(a + b)")
    mul = chain("a, b = map(int, input().split())\nprint(a * b if a == 2 else a + b)")
    assert compute_score("x", add, gold, {"kind": "code"})["score"] == 1.0
    out = compute_score("x", mul, gold, {"kind": "code", "code_reward": "fraction"})
    assert out["score"] == 0.5 and out["sandbox_s"] > 0


# -------------------------------------------------------------------- the reward manager, over a batch
def _manager(tok: Any, tmp_path: Path, reward: dict | None = None) -> Any:
    from omegaconf import OmegaConf

    from e2c.rl.reward import E2CRewardManager

    cfg = {"reward": reward or {}, "actor_rollout_ref": {"model": {"path": str(tmp_path)}}}
    return E2CRewardManager(OmegaConf.create(cfg), tok)


def _batch(tok: Any, rows: list[tuple[str, str, str, dict]]) -> Any:
    """A DataProto of ``(data_source, response text, ground truth, extra_info)`` rows, responses padded."""
    from verl import DataProto

    ids = [tok.encode(text, add_special_tokens=False) for _, text, _, _ in rows]
    width, prompt = max(len(i) for i in ids), 3
    responses = torch.full((len(rows), width), tok.pad_token_id or 0, dtype=torch.long)
    mask = torch.zeros(len(rows), prompt + width, dtype=torch.long)
    for r, seq in enumerate(ids):
        responses[r, : len(seq)] = torch.tensor(seq)
        mask[r, : prompt + len(seq)] = 1
    return DataProto.from_dict(
        tensors={"responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": [src for src, _, _, _ in rows],
            "reward_model": [{"ground_truth": gt} for _, _, gt, _ in rows],
            "extra_info": [info for _, _, _, info in rows],
        },
    )


def _score_batch(manager: Any, data: Any) -> list[dict]:
    """verl's own batch scoring (``RewardLoopWorker.compute_score_batch``: one task per response, gathered)."""
    from types import SimpleNamespace

    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = SimpleNamespace(compute_score=manager.run_single)
    return manager.loop.run_until_complete(RewardLoopWorker.compute_score_batch(worker, data))


def test_a_batch_of_code_rows_runs_concurrently_bounded_and_in_order_cpu(
    tiny_tok: Any, tmp_path: Path, use_sandbox: Any
) -> None:
    run_s, workers, n = 0.4, 3, 8
    sbx = use_sandbox(EchoSandbox(seconds=run_s), workers=workers)
    manager = _manager(tiny_tok, tmp_path)
    # Row i's program prints i; even rows expect i (right), odd rows expect something else (wrong).
    rows = [
        ("code", chain(str(i)), stdin_tests(str(i if i % 2 == 0 else 99)), {"kind": "code"}) for i in range(n)
    ]
    start = time.monotonic()
    out = _score_batch(manager, _batch(tiny_tok, rows))
    wall = time.monotonic() - start
    assert [o["reward_extra_info"]["acc"] for o in out] == [float(i % 2 == 0) for i in range(n)]
    assert [o["reward_score"] for o in out] == [float(i % 2 == 0) for i in range(n)]
    assert sbx.runs == n
    # Never more than the sandbox's bound at once, and more than one: ceil(8 / 3) rounds, not 8.
    assert 2 <= sbx.peak <= workers
    assert wall < 0.6 * n * run_s, f"{wall:.2f} s for {n} runs of {run_s} s with {workers} workers"
    # The programs ran on the code threads, not on the event loop's default executor.
    assert sbx.threads and all(t.startswith("e2c-code") for t in sbx.threads)


def test_math_rows_keep_their_path_cpu(
    tiny_tok: Any, tmp_path: Path, use_sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import e2c.rl.reward as reward

    use_sandbox(EchoSandbox())
    asked = []
    real = reward.code_pool
    monkeypatch.setattr(reward, "code_pool", lambda: asked.append(1) or real())
    rows = [
        ("synthetic/arithmetic", f"{PLAN}\\boxed{{5}}</EXECUTION>", "5", {}),
        ("mbpp", chain("7"), stdin_tests("7"), {}),
        ("synthetic/arithmetic", f"{PLAN}\\boxed{{6}}</EXECUTION>", "5", {}),
    ]
    out = _score_batch(_manager(tiny_tok, tmp_path), _batch(tiny_tok, rows))
    assert [o["reward_score"] for o in out] == [1.0, 1.0, 0.0]
    assert len(asked) == 1  # only the code row went to the code threads
    assert [o["reward_extra_info"]["code"] for o in out] == [0.0, 1.0, 0.0]


def test_reward_kwargs_reach_the_grader_without_a_configured_function_cpu(
    tiny_tok: Any, tmp_path: Path, use_sandbox: Any
) -> None:
    # Stage 1 names no reward function: --code-reward (and plan_bonus, require_format) must still apply.
    use_sandbox(EchoSandbox())
    kwargs = {"custom_reward_function": {"path": None, "reward_kwargs": {"code_reward": "fraction"}}}
    manager = _manager(tiny_tok, tmp_path, kwargs)
    rows = [("mbpp", chain("7"), stdin_tests("7", "8"), {"code_reward": "all"})]
    (out,) = _score_batch(manager, _batch(tiny_tok, rows))
    info = out["reward_extra_info"]
    assert out["reward_score"] == 0.5 and info["correct_reward"] == 0.5 and info["acc"] == 0.0
    assert info["plan_reward"] == 0.0  # the fraction is correctness, not a plan term
    bad = {"custom_reward_function": {"path": None, "reward_kwargs": {"code_reward": "most"}}}
    with pytest.raises(ValueError, match="code_reward 'most' is not a code reward"):
        _manager(tiny_tok, tmp_path, bad)


# ------------------------------------------------------------------------------------ the health panel
def test_the_health_panel_shows_sandbox_seconds_and_code_accuracy_cpu() -> None:
    infos = [
        {"acc": 1.0, "correct_reward": 1.0, "code": 1.0, "tests_fraction": 1.0, "sandbox_s": 1.5},
        {"acc": 0.0, "correct_reward": 0.5, "code": 1.0, "tests_fraction": 0.5, "sandbox_s": 4.0},
        {"acc": 0.0, "correct_reward": 0.0, "code": 1.0, "sandbox_error": 1.0, "sandbox_s": 0.5},
        {"acc": 1.0, "correct_reward": 1.0, "code": 0.0, "sandbox_s": 0.0},
    ]
    scores = [1.0, 0.5, 0.0, 1.0]
    out = health.batch_health(["a", "a", "b", "b"], scores, infos, [5, 5, 5, 5])
    assert out[health.SANDBOX_S] == 6.0 and out[health.SANDBOX_S_MAX] == 4.0
    assert out[health.SANDBOX_ERRORS] == 1.0
    assert out[health.CODE_ACC] == 0.5 and out[health.CODE_TESTS] == 0.75
    # The sandbox failure is left out of the accuracy, not counted wrong: 2 right of 3 judged.
    assert out[health.TRAIN_ACC] == pytest.approx(2 / 3)
    # The fraction is the correctness part of the reward; the parts still add up to the mean reward.
    assert out[health.REWARD_CORRECT] == pytest.approx(2.5 / 4) and out[health.REWARD_PLAN] == 0.0
    parts = sum(out[k] for k in (health.REWARD_CORRECT, health.REWARD_PLAN, health.REWARD_OVERLONG))
    assert parts == pytest.approx(sum(scores) / 4) and health.REWARD_OTHER not in out
    # A step without code rows has no code metrics, and the table shows code columns only for code runs.
    assert not set(health.batch_health(["a"], [1.0], [{"acc": 1.0}], [3])) & {
        health.SANDBOX_S,
        health.CODE_ACC,
    }
    assert health.SANDBOX_S not in health.format_table([{"step": 1, health.TRAIN_ACC: 0.5}])
    table = health.format_table([{"step": 1, **out}])
    assert health.SANDBOX_S in table.splitlines()[0] and "6.0" in table.splitlines()[1].split("\t")


# -------------------------------------------------------------------------------------------- launcher
def test_launcher_sandbox_and_code_reward_flags_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from e2c.rl import launch

    monkeypatch.delenv(sandbox.SANDBOX_ENV, raising=False)
    monkeypatch.delenv(sandbox.WORKERS_ENV, raising=False)
    env = "+ray_kwargs.ray_init.runtime_env.env_vars."
    args = launch.parse_args(["--model", "tiny", "--sandbox", "http://h:8080/", "--code-reward", "fraction"])
    args.model_path, args.output_dir = "m", tmp_path
    ov = launch.build_overrides(args, 0)
    assert f"{env}E2C_SANDBOX=fusion:http://h:8080" in [o.replace("'", "") for o in ov]
    assert "++reward.custom_reward_function.reward_kwargs.code_reward=fraction" in ov
    # Neither flag: nothing is exported or overridden (each row's extra_info.code_reward decides).
    plain = launch.parse_args(["--model", "tiny"])
    plain.model_path, plain.output_dir = "m", tmp_path
    assert not any("E2C_SANDBOX" in o or "code_reward" in o for o in launch.build_overrides(plain, 0))
    # $E2C_SANDBOX and $E2C_SANDBOX_WORKERS are read (and checked) where they enter.
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "bwrap")
    monkeypatch.setenv(sandbox.WORKERS_ENV, "3")
    env_args = launch.parse_args(["--model", "tiny"])
    assert str(env_args.sandbox) == "bwrap" and launch.sandbox_env(env_args) == {
        "E2C_SANDBOX": "bwrap",
        "E2C_SANDBOX_WORKERS": "3",
    }
    for name, value, message in (
        (sandbox.SANDBOX_ENV, "docker", "$E2C_SANDBOX 'docker' is not a sandbox"),
        (sandbox.WORKERS_ENV, "0", "$E2C_SANDBOX_WORKERS '0' is not a positive whole number"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(UserError, match=message.replace("$", r"\$")):
            launch.parse_args(["--model", "tiny"])
        monkeypatch.delenv(name)
    with pytest.raises(UserError, match="valid: local, bwrap, fusion:URL"):
        launch.parse_args(["--model", "tiny", "--sandbox", "docker"])


def test_launcher_checks_the_sandbox_answers_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from e2c.rl import launch

    made: list[str] = []

    def make(spec: Any) -> Any:
        made.append(str(spec))
        return EchoSandbox(status="sandbox_error" if "down" in spec.url else "ok")

    monkeypatch.setattr(sandbox, "make", make)
    monkeypatch.setattr(sandbox, "READY_PROGRAM", "1")  # the echo prints 1
    launch.check_sandbox(None)  # nothing named: the workers' default, local, is checked
    assert made == ["local"]
    monkeypatch.setattr(sandbox, "READY_PROGRAM", "print(1)")
    # EchoSandbox "prints" its source, so a server that answers prints print(1)'s source, not 1: refused.
    with pytest.raises(UserError, match="did not run 'print\\(1\\)'"):
        launch.check_sandbox(sandbox.parse_spec("http://up:1"))
    monkeypatch.setattr(sandbox, "READY_PROGRAM", "1")  # the echo prints 1
    launch.check_sandbox(sandbox.parse_spec("http://up:1"))
    with pytest.raises(UserError) as e:
        launch.check_sandbox(sandbox.parse_spec("http://down:1"))
    assert "fusion:http://down:1" in str(e.value) and "server did not answer" in str(e.value)
    assert "\n" not in str(e.value)
