"""A run owns its folder (:mod:`e2c.core.run_folder`) and never leaves half a line (:class:`e2c.core.files.RecordFile`):
the lock against a live process and a killed one, the identity check and ``--force``, and whole records on
a full disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from small_disk import small_disk

from e2c.core.errors import UserError
from e2c.core.files import RecordFile, read_records
from e2c.core.run_folder import (
    IDENTITY_NAME,
    LOCK_NAME,
    RunFolder,
    identity_diff,
    identity_overrides,
    local_paths,
)

HOLD = """
import sys, time
from e2c.core.run_folder import RunFolder
with RunFolder(sys.argv[1], "eval", {"seed": 0}).claim(log=lambda s: None):
    print("held", flush=True)
    time.sleep(60)
"""


def holder(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder`` (as a running eval would), once it says so."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def without_nulls(value: object) -> object:
    """A mapping's null entries left out, at every depth: what :func:`identity_diff` compares."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@given(json_values, json_values)
def test_identity_diff_is_empty_exactly_for_equal_values_cpu(a: object, b: object) -> None:
    """Equal values, where a key missing from a mapping reads as null (a setting an older record lacks)."""
    assert identity_diff(a, a) == []
    assert (identity_diff(a, b) == []) == (without_nulls(a) == without_nulls(b))
    assert (identity_diff(a, b) == []) == (identity_diff(b, a) == [])


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_an_identity_read_back_from_json_is_the_same_run_cpu(identity: dict) -> None:
    """What a run records is compared after a JSON round trip (tuples come back as lists)."""
    assert identity_diff(json.loads(json.dumps(identity)), identity) == []
    assert identity_diff({"files": ["a", "b"]}, {"files": ("a", "b")}) == []


def test_identity_names_each_difference_cpu() -> None:
    assert identity_diff(
        {"model": "tiny", "s": {"seed": 0, "k": 1}}, {"model": "embedded", "s": {"seed": 1, "k": 1}}
    ) == [
        "model 'tiny' -> 'embedded'",
        "s.seed 0 -> 1",
    ]
    assert identity_overrides(["optim.lr=1e-5", "trainer.logger=[console]", "++trainer.total_epochs=3"]) == [
        "optim.lr=1e-5"
    ]
    assert local_paths(["tiny", "hdfs://x/y"]) == ["tiny", "hdfs://x/y"]


def test_a_second_command_refuses_a_held_folder_naming_the_holder_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = holder(out)
    try:
        for attempt in (
            lambda: RunFolder(out, "eval", {"seed": 0}).check(),
            lambda: RunFolder(out, "eval", {"seed": 0}).claim().__enter__(),
        ):
            with pytest.raises(UserError) as e:
                attempt()
            msg = str(e.value)
            assert f"--output-dir {out} is in use by process {proc.pid} (eval, since " in msg
            assert msg.endswith("wait for it to finish, or use another --output-dir") and "\n" not in msg
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_leaves_no_stale_lock_cpu(tmp_path: Path) -> None:
    """SIGKILL drops the lock with the process: the next command takes it over and says whose it was."""
    out = tmp_path / "run"
    proc = holder(out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == proc.pid  # what the dead holder left
    lines: list[str] = []
    run = RunFolder(out, "eval", {"seed": 0})
    assert run.check() == []
    with run.claim(log=lines.append):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert lines == [
        f"eval: took over the lock of process {proc.pid} (eval, since " + lines[0].split("since ")[1]
    ]
    assert lines[0].endswith("which no longer runs")
    assert (out / LOCK_NAME).read_text() == ""  # a clean end leaves nobody to take over from


def test_another_identity_is_refused_unchanged_and_force_moves_it_aside_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with RunFolder(out, "sft", {"base_model": "tiny"}).claim():
        (out / "metrics.jsonl").write_text('{"step": 1}\n')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = RunFolder(out, "sft", {"base_model": "embedded"})
    for attempt in (other.check, lambda: other.claim().__enter__()):
        with pytest.raises(
            UserError,
            match=r"holds another run \(base_model 'tiny' -> 'embedded'\); use another "
            r"--output-dir, or --force to start over$",
        ):
            attempt()
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # Another command's folder is another run too.
    with pytest.raises(UserError, match=r"command 'sft' -> 'eval'"):
        RunFolder(out, "eval", {"base_model": "tiny"}).check()
    # The same run resumes; --force starts over, moving (never deleting) the old files.
    assert RunFolder(out, "sft", {"base_model": "tiny"}).check() == []
    lines: list[str] = []
    forced = RunFolder(out, "sft", {"base_model": "embedded"}, force=True)
    assert forced.check() == ["--force"]
    with forced.claim(log=lines.append):
        pass
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("run.replaced-")]
    assert lines == [f"sft: --force: the old run's files are now in {aside}"]
    assert (aside / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert json.loads((out / IDENTITY_NAME).read_text())["identity"] == {"base_model": "embedded"}
    assert sorted(p.name for p in out.iterdir()) == sorted([LOCK_NAME, IDENTITY_NAME])


def test_a_folder_with_only_bookkeeping_is_taken_over_and_old_runs_resume_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with RunFolder(out, "eval", {"seed": 0}, own=("config.json",)).claim():
        (out / "config.json").write_text("{}")
    # No result yet: another identity takes the folder without --force.
    with RunFolder(out, "eval", {"seed": 1}, own=("config.json",)).claim():
        pass
    assert json.loads((out / IDENTITY_NAME).read_text())["identity"] == {"seed": 1}
    # A folder of an older toolkit (results, no record) resumes as before; one with a legacy record is
    # compared with it.
    old = tmp_path / "old"
    old.mkdir()
    (old / "records.jsonl").write_text("{}\n")
    assert RunFolder(old, "tts", {"seed": 0}).check() == []
    with pytest.raises(UserError, match=r"seed 3 -> 0"):
        RunFolder(old, "tts", {"seed": 0}, legacy=lambda: {"seed": 3}).check()


def test_a_claim_nests_in_the_process_that_holds_the_folder_cpu(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run", "eval", {"seed": 0})
    with run.claim(), run.claim():  # the command, then its library call (run_eval)
        pass
    with run.claim():
        pass


def test_an_unreadable_record_is_one_line_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / IDENTITY_NAME).write_text("[1, 2]")
    (out / "x.jsonl").write_text("{}\n")
    with pytest.raises(UserError, match=r"is not a run record \(got a list\); move the run folder away"):
        RunFolder(out, "eval", {}).check()
    (out / IDENTITY_NAME).write_bytes(b"\xff{")
    with pytest.raises(UserError, match="is not valid JSON"):
        RunFolder(out, "eval", {}).check()


# ----------------------------------------------------------------------------- whole records
def test_records_are_appended_whole_and_read_back_cpu(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "p.jsonl"
    rows = [{"i": i, "text": "é\u2028\nline"} for i in range(3)]
    with RecordFile(path) as f:
        f.write(rows)
        f.write([])
        f.sync()
    assert [r for _, r in read_records(path)] == rows


def test_a_full_disk_cuts_back_to_the_last_whole_record_cpu(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 8) as disk:
        path = disk / "p.jsonl"
        written = 0
        with RecordFile(path) as f, pytest.raises(UserError) as e:
            for i in range(10_000):
                f.write([{"i": i, "pad": "x" * 700}, {"i": i, "pad": "y" * 700}])
                written += 2
        assert str(e.value) == (
            f"cannot write {path}: No space left on device; it ends on its last whole record, and the same "
            "command resumes from it"
        )
        data = path.read_bytes()
        assert data.endswith(b"\n") and len(data.splitlines()) == written  # every pair whole, none cut
        assert [r["i"] for _, r in read_records(path)] == [i // 2 for i in range(written)]


def test_a_removed_file_is_refused_not_written_into_nothing_cpu(tmp_path: Path) -> None:
    path = tmp_path / "run" / "p.jsonl"
    with RecordFile(path) as f:
        f.write([{"i": 0}])
        path.unlink()
        path.parent.rmdir()
        with pytest.raises(UserError, match=r"it was removed \(or its folder\) while the run wrote it"):
            f.write([{"i": 1}])


def test_the_lock_is_not_inherited_by_the_commands_children_cpu(tmp_path: Path) -> None:
    """A trainer started by the launcher does not keep the folder locked after the launcher dies."""
    out = tmp_path / "run"
    code = (
        "import subprocess, sys, time\n"
        "from e2c.core.run_folder import RunFolder\n"
        "with RunFolder(sys.argv[1], 'sft', {}).claim(log=lambda s: None):\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "    print(child.pid, flush=True)\n"
        "    time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        assert RunFolder(out, "sft", {}).check() == []
        assert time.monotonic() - t0 < 5
    finally:
        os.kill(child, signal.SIGKILL)
