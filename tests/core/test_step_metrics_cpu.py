"""The one reader of verl's per-step metrics (e2c.launch.checkpoints.step_metrics): every launch of a resumed run,
a later launch's step replacing an earlier one's, and any bytes in either file read without an error."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.launch.checkpoints import METRICS, METRICS_HISTORY, keep_metrics, step_metrics


def _line(step: int, **data: float) -> str:
    return json.dumps({"step": step, "data": data}) + "\n"


def test_a_resumed_run_reads_every_launch_and_the_retrained_step_once_cpu(tmp_path: Path) -> None:
    (tmp_path / METRICS).write_text(_line(1, r=0.1) + _line(2, r=0.2) + _line(3, r=0.3) + '{"step": 4, "d')
    keep_metrics(tmp_path)  # what the launcher does before a resumed launch (verl then truncates)
    (tmp_path / METRICS).write_text(_line(3, r=0.35) + _line(3, v=1.0) + _line(4, r=0.4))
    assert step_metrics(tmp_path) == {1: {"r": 0.1}, 2: {"r": 0.2}, 3: {"r": 0.35, "v": 1.0}, 4: {"r": 0.4}}


def test_no_files_no_steps_cpu(tmp_path: Path) -> None:
    assert step_metrics(tmp_path) == {}


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=400),
    st.binary(max_size=400),
    st.dictionaries(st.integers(0, 50), st.floats(), max_size=5),
)
def test_any_bytes_read_without_error_and_whole_records_survive_cpu(
    tmp_path_factory, junk, history, good
) -> None:
    d = tmp_path_factory.mktemp("run")
    (d / METRICS_HISTORY).write_bytes(history)
    body = b"".join(_line(s, x=v).encode() for s, v in good.items())
    (d / METRICS).write_bytes(junk.replace(b"\n", b" ") + b"\n" + body)
    got = step_metrics(d)
    assert list(got) == sorted(got)
    for s, v in good.items():
        # A junk line, even one that parses as a record of the same step, comes first: ``x`` is the record's.
        assert s in got and (got[s]["x"] == v or v != v)


def test_a_run_at_its_last_checkpoint_is_trained_to_it_only_when_verl_would_resume_cpu(
    tmp_path: Path,
) -> None:
    from e2c.launch.checkpoints import TRACKER, resumes, trained_to

    assert trained_to(tmp_path, 3, []) is None  # no checkpoint
    (tmp_path / TRACKER).write_text("2\n")
    assert trained_to(tmp_path, 3, []) is None  # a step left to train
    assert trained_to(tmp_path, 2, []) == 2 and trained_to(tmp_path, 1, []) == 2
    assert trained_to(tmp_path, None, []) is None  # all epochs: verl counts them, not this check
    assert trained_to(tmp_path, 2, ["trainer.resume_mode=disable"]) is None  # starts over, trains again
    assert trained_to(tmp_path, 2, ["trainer.resume_mode=disable", "+trainer.resume_mode=auto"]) == 2
    assert resumes(["--config-path=x", "trainer.save_freq=1"])
    assert not resumes(["trainer.resume_mode=resume_path"])


def test_a_checkpoint_without_its_metrics_record_rewinds_to_the_one_before_cpu(tmp_path: Path) -> None:
    from e2c.launch.checkpoints import TRACKER, latest_step, rewind_unlogged

    for n in (4, 8, 12):
        (tmp_path / f"global_step_{n}").mkdir()
    (tmp_path / "global_step_x").mkdir()  # not a step
    (tmp_path / TRACKER).write_text("12\n")
    assert rewind_unlogged(tmp_path, 12) == 8 and latest_step(tmp_path) == 8
    assert rewind_unlogged(tmp_path, 4) is None and latest_step(tmp_path) is None  # from the start
    assert not (tmp_path / TRACKER).exists()
