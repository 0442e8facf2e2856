"""Reading code benchmarks bounds what a pickled test field builds: a 1.5 KiB LiveCodeBench row
whose pickle references one 1 MiB test 2,048 times (a 2 GiB record once written out) was a MemoryError after
seconds; it is now one line naming the record, in milliseconds, within a 1 GiB address space. So is a pickle
that references itself, one with too many opcodes (refused by a scan before anything is built), one that
names a global and one whose tests are too many."""

from __future__ import annotations

import base64
import json
import os
import pickle
import pickletools
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from bad_input import ROOT, assert_one_line_error, run, write_jsonl

from e2c.data import code_sets as cs
from e2c.data.code_sets import CodeSetError


def blob(obj: object) -> str:
    """A LiveCodeBench private-test field: base64(zlib(pickle))."""
    return base64.b64encode(zlib.compress(pickletools.optimize(pickle.dumps(obj, protocol=4)), 9)).decode()


def raw_blob(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode()


def lcb_row(private: str) -> dict[str, str]:
    return {
        "question_id": "q1",
        "question_content": "Echo the input.",
        "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
        "private_test_cases": private,
        "contest_date": "2024-01-01T00:00:00",
    }


MIB_TEST = {"input": "a" * 2**20, "output": "b", "testtype": "stdin"}
HOSTILE = blob([MIB_TEST] * 2048)  # one test object, 2,048 references to it


def test_the_hostile_row_is_small_and_refused_quickly() -> None:
    assert len(json.dumps(lcb_row(HOSTILE))) < 2048
    t = time.perf_counter()
    with pytest.raises(CodeSetError, match=r"private_test_cases: pickled tests hold over 512 MiB of text"):
        cs.lcb_problem(lcb_row(HOSTILE))
    assert time.perf_counter() - t < 1.0


def test_the_hostile_row_is_one_line_naming_the_record_in_bounded_memory(tmp_path: Path) -> None:
    """Read as a benchmark file, in a process whose address space is capped at 1 GiB (the old code needed
    over 2 GiB for this row): one line naming the file and row, well under a second of work."""
    write_jsonl(tmp_path / "livecodebench.jsonl", lcb_row(HOSTILE))
    code = (
        "import resource, sys, time\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from pathlib import Path\n"
        "from e2c.data import registry\n"
        "from e2c.core.errors import UserError\n"
        "t = time.perf_counter()\n"
        "try:\n"
        "    registry.load_benchmark('livecodebench', Path(sys.argv[1]))\n"
        "except UserError as e:\n"
        "    print(f'{time.perf_counter() - t:.3f}', file=sys.stderr)\n"
        "    sys.exit(f'error: {e}')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr, r.stderr[-2000:]
    seconds, line = r.stderr.strip().splitlines()
    assert r.returncode == 1 and float(seconds) < 1.0
    assert line.startswith("error: ") and "livecodebench.jsonl row 0: private_test_cases:" in line
    assert "over 512 MiB of text" in line


def test_eval_refuses_the_hostile_row_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "livecodebench.jsonl", lcb_row(HOSTILE))
    out = tmp_path / "run"
    t = time.perf_counter()
    r = run(
        "-m",
        "e2c.eval.run",
        "--model",
        "tiny",
        "--dataset",
        "livecodebench",
        "--data-dir",
        str(data),
        "--output-dir",
        str(out),
    )
    assert_one_line_error(r, "livecodebench.jsonl row 0: private_test_cases:", "over 512 MiB of text")
    assert time.perf_counter() - t < 30
    assert not out.exists() or not any(out.rglob("*.jsonl"))


def self_referencing_pickle() -> bytes:
    """``l = []; l.append(l)``: a list holding itself (a walk counting per reference never ends)."""
    return pickle.dumps(_cyclic(), protocol=4)


def _cyclic() -> list:
    x: list = []
    x.append(x)
    return x


def doubling_pickle(depth: int) -> bytes:
    """Lists of two references to the list before: 2**depth leaves from ~4*depth opcodes."""
    x: object = "a"
    for _ in range(depth):
        x = [x, x]
    return pickle.dumps(x, protocol=4)


def many_opcodes_pickle(n: int) -> bytes:
    """A list of ``n`` Nones: one opcode each (3 MiB of pickle for a million)."""
    return b"\x80\x04](" + b"N" * n + b"e."


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (self_referencing_pickle(), "pickled tests hold over 1,000,000 values"),
        (doubling_pickle(40), "pickled tests hold over 1,000,000 values"),
        (pickle.dumps([["x" * 1024] * 600_000]), "over 512 MiB of text"),
        (many_opcodes_pickle(1_000_001), "pickle has over 1,000,000 opcodes; refused"),
        (pickle.dumps(os.system), "pickle names a global"),
        (b"\x80\x04cos\nsystem\n(S'echo pwned'\ntR.", "pickle names a global (os.system)"),
        (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "pickle names a global (os.system)"),
        (b"\x80\x04(S'echo pwned'\ntR.", "pickle has a REDUCE opcode"),
        (b"\x80\x04S'x'\nQ.", "pickle has a BINPERSID opcode"),
    ],
    ids=[
        "cycle",
        "doubling",
        "shared-text",
        "opcodes",
        "os.system",
        "GLOBAL",
        "STACK_GLOBAL",
        "REDUCE",
        "PERSID",
    ],
)
def test_a_hostile_pickle_is_one_line_and_quick(data: bytes, needle: str) -> None:
    t = time.perf_counter()
    with pytest.raises(CodeSetError, match=r"^private_test_cases: ") as e:
        cs.decode_test_cases(raw_blob(data), "private_test_cases")
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert time.perf_counter() - t < 3.0
    with pytest.raises(CodeSetError, match="private_test_cases: "):
        cs.lcb_problem(lcb_row(raw_blob(data)))


def test_os_system_is_never_called(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps(_Boom(str(marker)), protocol=4)
    with pytest.raises(CodeSetError, match=r"pickle names a global \((posix|nt)\.system\)"):
        cs.lcb_problem(lcb_row(raw_blob(data)))
    assert not marker.exists()


class _Boom:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.path}",))


def test_the_limits_keep_real_shapes() -> None:
    """What LiveCodeBench stores (a pickled JSON string) and plain pickled tests still read, at the limits'
    edges: a string of the whole text limit, and a structure of shared keys."""
    tests = [{"input": f"{i}\n", "output": f"{i}\n", "testtype": "stdin"} for i in range(2000)]
    assert cs.decode_test_cases(blob(json.dumps(tests)), "private_test_cases") == tests
    assert cs.decode_test_cases(blob(tests), "private_test_cases") == tests
    p = cs.lcb_problem(lcb_row(blob(json.dumps(tests))))
    assert len(p.tests.tests) == 2001
    assert cs.decode_test_cases(raw_blob(many_opcodes_pickle(999_990)), "t") == [None] * 999_990


def test_too_many_tests_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cs, "MAX_TESTS", 100)
    tests = [{"input": f"{i}\n", "output": f"{i}\n", "testtype": "stdin"} for i in range(100)]
    with pytest.raises(
        CodeSetError, match=r"LiveCodeBench tests: 101 tests, over the 100 a problem may have"
    ):
        cs.lcb_problem(lcb_row(blob(json.dumps(tests))))
    assert len(cs.lcb_problem(lcb_row(blob(json.dumps(tests[:99])))).tests.tests) == 100
