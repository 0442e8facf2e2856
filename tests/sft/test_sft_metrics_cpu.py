"""SFT's losses come from verl's file logger (``metrics.jsonl``), followed while the trainer runs and kept
across the launches of a resumed run. A stand-in trainer writes the file as verl's FileLogger does."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from e2c.sft.launch import run_trainer
from e2c.sft.metrics import METRICS, METRICS_HISTORY, MetricsTail, read_losses


def _record(step: int, **data: float) -> str:
    return json.dumps({"step": step, "data": data}) + "\n"


def test_tail_reads_complete_lines_as_they_arrive_and_restarts_on_truncation(tmp_path: Path) -> None:
    path = tmp_path / METRICS
    tail = MetricsTail(path)
    tail.poll(0.0)  # no file yet
    path.write_text(_record(1, **{"train/loss": 2.0}) + '{"step": 2, "data": {"train/lo')
    tail.poll(1.0)
    assert tail.losses.train == {1: 2.0} and tail.step_times == {1: 1.0}
    with path.open("a") as f:
        f.write('ss": 1.5}}\n' + _record(2, **{"val/loss": 1.75}) + _record(3, **{"train/loss": 1.0}))
    tail.poll(3.0)
    assert tail.losses.train == {1: 2.0, 2: 1.5, 3: 1.0} and tail.losses.val == {2: 1.75}
    assert tail.step_times == {1: 1.0, 2: 3.0, 3: 3.0}
    assert tail.seconds_per_step() == 2.0  # gaps 2.0 and 0.0: of two, the upper one
    path.write_text(_record(4, **{"train/loss": 0.5}))  # opened afresh (shorter than what was read)
    tail.poll(4.5)
    assert tail.losses.train[4] == 0.5 and tail.step_times[4] == 4.5


def test_seconds_per_step_is_the_median_gap_without_warm_up() -> None:
    tail = MetricsTail(Path("unused"))
    tail.step_times = {1: 0.0, 2: 10.0, 3: 11.0, 4: 12.5, 6: 30.0}
    assert tail.seconds_per_step() == 1.5  # gaps 10, 1, 1.5 (5 follows no step 5)
    tail.step_times = {3: 1.0}
    assert tail.seconds_per_step() is None


def test_read_losses_skips_lines_that_are_not_records(tmp_path: Path) -> None:
    path = tmp_path / METRICS
    path.write_text(
        _record(1, **{"train/loss": 3.0}) + "not json\n" + json.dumps({"step": 2, "data": [1]}) + "\n"
        '{"data": {"train/loss": 9}}\n' + _record(1, **{"train/loss": 2.5}) + '{"step": 3, "da'
    )
    losses = read_losses(tmp_path)
    assert losses.train == {1: 2.5} and losses.val == {}
    assert read_losses(tmp_path / "missing").train == {}


FAKE_TRAINER = textwrap.dedent(
    """
    import json, os, sys, time
    first, last = int(sys.argv[1]), int(sys.argv[2])
    with open(os.environ["VERL_FILE_LOGGER_PATH"], "wb", buffering=0) as f:  # verl truncates, as here
        for step in range(first, last + 1):
            print(f"step:{step} - train/loss:{10.0 / step}", flush=True)
            f.write(json.dumps({"step": step, "data": {"train/loss": 10.0 / step}}).encode() + b"\\n")
            time.sleep(0.3)
    sys.exit(int(sys.argv[3]))
    """
)


def test_run_trainer_keeps_every_launch_of_a_resumed_run(tmp_path: Path, capfd) -> None:
    run = tmp_path / "run"
    script = tmp_path / "trainer.py"
    script.write_text(FAKE_TRAINER)
    cmd = [sys.executable, str(script)]
    rc, tail = run_trainer([*cmd, "1", "3", "1"], run, {})  # killed after step 3
    assert rc == 1 and sorted(tail.losses.train) == [1, 2, 3]
    assert 0.1 < tail.seconds_per_step() < 2.0
    rc, tail = run_trainer([*cmd, "3", "5", "0"], run, {})  # resumed from the checkpoint of step 2
    assert rc == 0 and sorted(tail.losses.train) == [3, 4, 5]  # this launch only
    assert read_losses(run).train == {s: 10.0 / s for s in range(1, 6)}
    assert (run / METRICS_HISTORY).is_file()
    out = capfd.readouterr().out
    assert "step:1 - train/loss:10.0" in out and "step:5 - train/loss:2.0" in out  # echoed as it ran
    log = (run / "train.log").read_text()
    assert [line.startswith("# ") for line in log.splitlines()].count(
        True
    ) == 2 and "step:4 - train/loss:2.5" in log
