"""The code sets: each source's row shapes -> statement + tests (e2c/data/code_sets.py), the registry's code
names and LiveCodeBench selections, the HumanEval package data, safe decoding, and code RL rows."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from e2c.core.errors import UserError
from e2c.data import code_records, lcb_windows, registry, safe_pickle
from e2c.data import code_sets as cs
from e2c.data.code_sets import CodeSetError
from e2c.data.io import read_rows, write_parquet
from e2c.data.safe_pickle import UnsafePickle
from e2c.data.schema import check_row, validate_rows
from e2c.rewards.code_tests import parse_tests

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(registry.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("E2C_HOME", str(tmp_path / "none"))  # no project eval files


def _lcb_blob(tests: list[dict]) -> str:
    """LiveCodeBench lite's private-test field: base64(zlib(pickle(json text)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def _lcb_row(qid: str = "abc001_a", date: str = "2024-09-01T00:00:00", functional: bool = False) -> dict:
    if functional:
        pub = [{"input": "[1, 2]\n3", "output": "6", "testtype": "functional"}]
        priv = [{"input": "[]\n0", "output": "0", "testtype": "functional"}]
        meta = json.dumps({"func_name": "total"})
        starter = "class Solution:\n    def total(self, nums: List[int], k: int) -> int:\n        "
    else:
        pub = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
        priv = [{"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]
        meta, starter = "{}", ""
    return {
        "question_title": "t",
        "question_content": "Add the numbers.",
        "platform": "atcoder",
        "question_id": qid,
        "contest_date": date,
        "starter_code": starter,
        "difficulty": "easy",
        "public_test_cases": json.dumps(pub),
        "private_test_cases": _lcb_blob(priv),
        "metadata": meta,
    }


# ------------------------------------------------------------------------------------------ HumanEval
def test_humaneval_package_data_gives_164_problems_that_parse() -> None:
    rows = cs.humaneval_rows()
    assert len(rows) == 164
    problems = [cs.humaneval_problem(r, i) for i, r in enumerate(rows)]
    assert len({p.id for p in problems}) == 164 and problems[0].id == "HumanEval/0"
    for r, p in zip(rows, problems, strict=True):
        again = parse_tests(p.tests.dumps())  # the record's answer reads back as the same tests
        assert again == p.tests and p.tests.mode == "assert"
        assert p.tests.tests[-1].code.rstrip().endswith(f"check({r['entry_point']})")
        assert r["prompt"].rstrip() in p.problem and "Complete the following Python function" in p.problem
        assert cs.humaneval_reference(r).startswith(r["prompt"])
    # the shown doctest example, where the docstring has one to read safely
    assert sum(bool(p.tests.public) for p in problems) >= 60
    assert problems[0].tests.public[0].code == "assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False"
    # imports and helpers stay as setup, without the function to write
    assert problems[0].tests.setup.strip() == "from typing import List"
    assert "def poly(" in problems[32].tests.setup and "def find_zero" not in problems[32].tests.setup


def test_humaneval_references_pass_in_the_sandbox() -> None:
    """Every canonical solution passes its problem's tests (the public doctest included), run in the
    sandbox as a model's program is: the conversion loses nothing and adds no wrong test."""
    from e2c.rewards.code_judge import judge
    from e2c.sandbox import make

    sbx = make("local")
    rows = cs.humaneval_rows()
    failed = []
    for i, r in enumerate(rows):
        v = judge(cs.humaneval_reference(r), cs.humaneval_problem(r, i).tests, sbx)
        if not v.correct:
            failed.append((r["task_id"], v.status, v.outcomes))
    assert not failed, failed[:3]


def test_doctests_are_read_never_run() -> None:
    prompt = (
        'def f(x):\n    """\n    >>> f(__import__("os").system("echo hi"))\n    0\n    >>> round(f(1), 2)\n'
        '    1.0\n    >>> f([1, "a"])\n    (1, \'a\')\n    >>> g(1)\n    2\n    """\n'
    )
    assert cs.doctest_examples(prompt, "f") == ["assert f([1, 'a']) == (1, 'a')"]


def test_humaneval_bad_rows() -> None:
    row = {
        "task_id": "X/1",
        "prompt": "def f(x):\n    pass\n",
        "entry_point": "g",
        "test": "def check(c): pass",
    }
    with pytest.raises(CodeSetError, match="does not define the entry point 'g'"):
        cs.humaneval_problem(row)
    with pytest.raises(CodeSetError, match="no test text"):
        cs.humaneval_problem({**row, "entry_point": "f", "test": ""})
    with pytest.raises(CodeSetError, match="prompt is not Python"):
        cs.humaneval_problem({**row, "prompt": "def (", "entry_point": "f"})


def test_humaneval_loads_from_the_package_with_no_files_and_no_hub() -> None:
    recs = registry.load_benchmark("humaneval", use_hub=False)
    assert len(recs) == 164 and recs[0].id == "humaneval-HumanEval/0"
    assert {r.kind for r in recs} == {"code"} and recs[0].data_source == "humaneval"
    assert parse_tests(recs[5].answer).mode == "assert"
    assert registry.get_spec("openai_humaneval").name == "humaneval"


def test_humaneval_without_its_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> list:
        raise CodeSetError("HumanEval's data file is not installed")

    monkeypatch.setitem(
        registry.REGISTRY, "humaneval", dataclasses.replace(registry.REGISTRY["humaneval"], builtin=missing)
    )
    with pytest.raises(UserError, match=r"no local file .*package that ships its rows is not installed"):
        registry.load_benchmark("humaneval", use_hub=False)
    with pytest.raises(UserError, match=r"hub copy \(openai/openai_humaneval, split test\) is unavailable"):
        registry.load_benchmark("humaneval")  # offline: the hub cannot serve it either


# ------------------------------------------------------------------------------------------------ MBPP
def test_mbpp_full_sanitized_and_plus() -> None:
    full = {
        "task_id": 11,
        "text": "Write a function to remove the first and last occurrence of a given character.",
        "code": "...",
        "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"'],
        "test_setup_code": "",
        "challenge_test_list": [],
    }
    p = cs.mbpp_problem(full)
    assert p.id == "11" and p.tests.mode == "assert" and len(p.tests.tests) == 2
    assert [t.public for t in p.tests.tests] == [True, False]
    assert 'assert remove_Occ("hello","l") == "heo"' in p.problem and "abcda" not in p.problem
    sanitized = {"task_id": 2, "prompt": "Find shared elements.", "test_imports": ["import math"],
                 "test_list": ["assert f(1) == 1"]}  # fmt: skip
    assert cs.mbpp_problem(sanitized).tests.setup == "import math"
    plus = {
        **sanitized,
        "test": "import numpy as np\ninputs = [[1]]\nfor x in inputs:\n    assert f(*x) == 1\n",
    }
    tp = cs.mbpp_problem(plus).tests
    assert len(tp.tests) == 2 and tp.tests[0].public and "inputs = [[1]]" in tp.tests[1].code
    with pytest.raises(CodeSetError, match="test_list must be a non-empty list"):
        cs.mbpp_problem({"text": "x", "test_list": []})
    with pytest.raises(CodeSetError, match="no text or prompt"):
        cs.mbpp_problem({"test_list": ["assert 1"]})


# -------------------------------------------------------------------------------------- LiveCodeBench
def test_livecodebench_stdin_row_with_compressed_private_tests() -> None:
    p = cs.lcb_problem(_lcb_row())
    t = p.tests
    assert t.mode == "stdin" and t.compare == "lines" and t.setup == cs.PREAMBLE
    assert [(x.input, x.output, x.public) for x in t.tests] == [
        ("1 2\n", "3\n", True),
        ("5 5\n", "10\n", False),
    ]
    assert "standard input" in p.problem and "standard output" in p.problem
    assert p.extra == {"contest_date": "2024-09-01", "platform": "atcoder", "difficulty": "easy"}


def test_livecodebench_functional_row() -> None:
    p = cs.lcb_problem(_lcb_row(functional=True))
    t = p.tests
    assert t.mode == "call" and t.fn_name == "total" and t.compare == "json"
    assert [(x.args, x.output, x.public) for x in t.tests] == [(([1, 2], 3), 6, True), (([], 0), 0, False)]
    assert "class Solution:" in p.problem and "starter code" in p.problem
    with pytest.raises(CodeSetError, match=r"without metadata\.func_name"):
        cs.lcb_problem({**_lcb_row(functional=True), "metadata": "{}"})


def test_restricted_unpickler_refuses_globals() -> None:
    evil = pickle.dumps(os.system)  # loading it would hand back a callable; a REDUCE would call it
    with pytest.raises(UnsafePickle, match=r"pickle names a global \((posix|nt)\.system\)"):
        safe_pickle.restricted_loads(evil)

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()
    with pytest.raises(CodeSetError, match="pickle names a global"):
        cs.decode_test_cases(blob, "private_test_cases")
    with pytest.raises(CodeSetError, match="pickle names a global"):
        cs.lcb_problem({**_lcb_row(), "private_test_cases": blob})
    assert safe_pickle.restricted_loads(pickle.dumps({"a": [1, 2.5, "x", b"y", (1,)]})) == {
        "a": [1, 2.5, "x", b"y", (1,)]
    }
    with pytest.raises(UnsafePickle, match="not a readable pickle"):
        safe_pickle.restricted_loads(b"\x80\x04garbage")


def test_decoding_bad_and_oversized_blobs(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CodeSetError, match="neither JSON nor base64"):
        cs.decode_test_cases("not base64 !!", "private_test_cases")
    with pytest.raises(CodeSetError, match="not zlib data"):
        cs.decode_test_cases(base64.b64encode(b"plain").decode(), "private_test_cases")
    monkeypatch.setattr(safe_pickle, "MAX_DECOMPRESSED", 1000)
    bomb = base64.b64encode(zlib.compress(pickle.dumps("[" + "0," * 5000 + "0]"))).decode()
    with pytest.raises(CodeSetError, match="inflate past"):
        cs.decode_test_cases(bomb, "private_test_cases")
    with pytest.raises(CodeSetError, match="is not JSON"):
        cs.decode_test_cases("[" * 100_000, "public_test_cases")


def test_livecodebench_windows() -> None:
    w = lcb_windows.parse_window("release_v1")
    assert (str(w.start), str(w.end), w.files) == ("2023-05-01", "2024-03-31", ("test.jsonl",))
    assert lcb_windows.parse_window("v2_v3").files == ("test2.jsonl", "test3.jsonl")
    assert (
        str(lcb_windows.parse_window("v6").start) == "2025-02-01"
        and lcb_windows.parse_window("release_latest").files is None
    )
    d = lcb_windows.parse_window("2024-08-01..2025-02-01")
    assert d.keeps("2024-08-01") and d.keeps("2025-02-01") and not d.keeps("2025-02-02") and d.files is None
    for bad, message in (
        ("release_v9", "is not one of v1..v6"),
        ("v3_v2", "is not one of v1..v6"),
        ("2025-13-01..", "is not a date"),
        ("2025-02-01..2024-01-01", "starts after it ends"),
        ("latest", "unknown LiveCodeBench selection"),
    ):
        with pytest.raises(CodeSetError, match=message):
            lcb_windows.parse_window(bad)


def test_registry_selects_livecodebench_by_release_and_date(tmp_path: Path) -> None:
    rows = [_lcb_row("a", "2023-06-01T00:00:00"), _lcb_row("b", "2024-08-15T12:00:00", functional=True),
            _lcb_row("c", "2025-03-01T00:00:00")]  # fmt: skip
    (tmp_path / "livecodebench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = lambda name: [r.id for r in registry.load_benchmark(name, tmp_path)]  # noqa: E731
    assert ids("livecodebench") == ["livecodebench-a", "livecodebench-b", "livecodebench-c"]
    assert ids("lcb@release_v1") == ["livecodebench-a"]
    assert ids("livecodebench@v4_v5") == ["livecodebench-b"]
    assert ids("LiveCodeBench@2024-08-01..") == ["livecodebench-b", "livecodebench-c"]
    assert registry.resolve_names("code,lcb@Release_V5") == [
        *registry.GROUPS["code"],
        "livecodebench@release_v5",
    ]
    assert registry.get_spec("livecodebench@v2").name == "livecodebench"
    with pytest.raises(
        UserError,
        match=r"livecodebench@2020-01-01..2020-12-31: no problem in '2020-01-01..2020-12-31' \(3 problems",
    ):
        registry.load_benchmark("livecodebench@2020-01-01..2020-12-31", tmp_path)
    with pytest.raises(UserError, match="only livecodebench, test_livecodebench take an @selection"):
        registry.resolve_names("humaneval@release_v1")
    with pytest.raises(UserError, match="'livecodebench@v9': LiveCodeBench release 'v9' is not one of"):
        registry.resolve_names("livecodebench@v9")


def test_registry_code_names_and_sources() -> None:
    code = {s.name: s for s in registry.SPECS if s.group == "code"}
    assert set(code) == {"humaneval", "mbpp", "mbppplus", "livecodebench", "codeforces", "taco",
                         "test_livecodebench", "test_codeforces"}  # fmt: skip
    assert all(s.kind == "code" and s.convert is not None and s.max_new_tokens == 8192 for s in code.values())
    assert (
        code["test_codeforces"].hf_config == "codeforces"
        and code["livecodebench"].hub_files == lcb_windows.LCB_FILES
    )
    with pytest.raises(UserError, match="benchmark 'test_livecodebench': no local file"):
        registry.load_benchmark("test_livecodebench", use_hub=False)


# ----------------------------------------------------------------------------------------- Codeforces
def _cf_row(**kw) -> dict:
    row = {
        "id": "2000A",
        "contest_id": "2000",
        "index": "A",
        "title": "Sum",
        "description": "Print a + b.",
        "input_format": "Two integers.",
        "output_format": "One integer.",
        "examples": [{"input": "1 2\n", "output": "3\n"}],
        "official_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "4 4\n", "output": "8\n"}],
        "rating": 800,
        "time_limit": 1.0,
        "contest_start": 1723000000,
        "interaction_format": None,
        "generated_checker": None,
    }
    return {**row, **kw}


def test_codeforces_rows() -> None:
    p = cs.codeforces_problem(_cf_row())
    assert p is not None and p.id == "2000A"
    assert p.tests.compare == "tokens" and p.tests.time_limit == 6.0
    assert [t.public for t in p.tests.tests] == [True, False, False]
    assert p.extra == {"rating": 800, "cf_id": "2000A", "contest_date": "2024-08-07"}
    assert "## Input" in p.problem and "Example 1" in p.problem and "standard input" in p.problem
    assert cs.codeforces_problem(_cf_row(interaction_format="Interact.")) is None
    assert cs.codeforces_problem(_cf_row(generated_checker="def check(): ...")) is None
    assert cs.codeforces_problem(_cf_row(official_tests=[])) is None
    with pytest.raises(CodeSetError, match="official_tests test 0 needs input and output"):
        cs.codeforces_problem(_cf_row(official_tests=[{"input": "1"}]))


# ---------------------------------------------------------------------------------- DeepCoder, TACO
def test_deepcoder_and_taco_shapes() -> None:
    stdin = {"problem": "Add.", "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
             "metadata": json.dumps({"rating": 1400})}  # fmt: skip
    p = cs.deepcoder_problem(stdin)
    assert p.tests.mode == "stdin" and p.tests.compare == "lines" and p.extra == {"rating": 1400}
    functional = {"problem": "Sum.", "starter_code": "class Solution:\n    def f(self, a):\n",
                  "tests": [{"input": "[1, 2]", "output": "3", "testtype": "functional"}],
                  "metadata": {"func_name": "f"}}  # fmt: skip
    t = cs.deepcoder_problem(functional).tests
    assert (t.mode, t.fn_name, t.tests[0].args, t.tests[0].output) == ("call", "f", ([1, 2],), 3)
    taco = {"question": "Double.", "input_output": json.dumps({"inputs": [[2], [5]], "outputs": [[4], [10]],
                                                               "fn_name": "double"})}  # fmt: skip
    t = cs.code_problem(taco).tests  # TACO wraps a call's value in a one-item list
    assert (t.mode, t.fn_name, [x.output for x in t.tests], t.setup) == (
        "call",
        "double",
        [4, 10],
        cs.PREAMBLE,
    )
    apps = {"question": "Echo.", "input_output": {"inputs": [["a", "b"]], "outputs": [["a", "b"]]}}
    t = cs.code_problem(apps).tests
    assert (t.mode, t.compare, t.tests[0].input, t.tests[0].output) == ("stdin", "tokens", "a\nb", "a\nb")
    prime = {
        "problem": "Inc.",
        "tests": [{"type": "function_call", "fn_name": "inc", "input": [1], "output": [2]}],
    }
    t = cs.code_problem(prime).tests
    assert (t.fn_name, t.tests[0].args, t.tests[0].output) == ("inc", (1,), 2)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"problem": "x", "tests": "{not json"}, "tests is not JSON"),
        ({"problem": "x", "tests": "[]"}, "no tests"),
        ({"problem": "x", "tests": [{"input": "1"}]}, "tests test 0 needs input and output"),
        ({"problem": "x", "tests": [{"input": "1", "output": "1", "testtype": "sql"}]}, "testtype 'sql'"),
        (
            {
                "problem": "x",
                "metadata": {"func_name": "f"},
                "tests": [
                    {"input": "1", "output": "1", "testtype": "stdin"},
                    {"input": "1", "output": "1", "testtype": "functional"},
                ],
            },
            "mixes stdin and functional",
        ),
        ({"problem": "x", "tests": [{"input": "1", "output": "1", "testtype": "functional"}]}, "fn_name"),
        ({"problem": "x", "tests": [{"input": {"a": 1}, "output": "1"}]}, "input must be text"),
        ({"problem": "x", "input_output": {"inputs": [1], "outputs": []}}, "same length"),
        ({"problem": "", "tests": "[]"}, "no problem or question text"),
        ({"problem": "x", "tests": "[" * 50_000}, "tests is not JSON"),
        ({"problem": "x", "tests": [{"input": "1", "output": "1"}], "metadata": {"func_name": "1bad"}}, None),
    ],
)
def test_bad_code_rows_are_one_line(row: dict, message: str | None) -> None:
    if message is None:  # a stdin problem ignores a bad func_name: nothing calls it
        assert cs.code_problem(row).tests.mode == "stdin"
        return
    with pytest.raises(CodeSetError, match=message) as e:
        cs.code_problem(row)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300


def test_unknown_row_shape_names_the_shapes() -> None:
    with pytest.raises(CodeSetError, match=r"not a code problem row.*HumanEval.*MBPP.*LiveCodeBench"):
        cs.code_problem({"question": "x", "answer": "1"})
    with pytest.raises(CodeSetError, match="a row is an object, not list"):
        cs.code_problem([1, 2])  # type: ignore[arg-type]
    with pytest.raises(CodeSetError, match="unknown shape 'java'"):
        cs.code_problem({"a": 1}, shape="java")


# --------------------------------------------------------------------------------- records and files
def test_local_folders_of_every_shape_load_and_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "mbpp.jsonl").write_text(
        json.dumps({"task_id": 3, "text": "t", "test_list": ["assert f() == 1"]}) + "\n"
    )
    write_parquet(
        [_cf_row(), _cf_row(id="2000B", interaction_format="Interact.")], src / "codeforces.parquet"
    )
    (src / "taco.json").write_text(
        json.dumps([{"question": "q", "input_output": '{"inputs": ["1"], "outputs": ["1"]}'}])
    )
    (src / "test_codeforces.jsonl").write_text(
        json.dumps(
            {"problem": "p", "tests": '[{"input": "1", "output": "1"}]', "metadata": '{"rating": 1900}'}
        )
        + "\n"
    )
    out = tmp_path / "processed"
    out.mkdir()
    for name in ("mbpp", "codeforces", "taco", "test_codeforces"):
        recs = registry.load_benchmark(name, src, use_hub=False)
        assert recs and all(r.kind == "code" and r.data_source == name for r in recs)
        rows = [r.to_dict() for r in recs]
        validate_rows(rows, "eval", name)  # the eval schema takes code records
        write_parquet(rows, out / f"{name}.parquet")
        again = registry.load_benchmark(name, out, use_hub=False)  # a processed file reads back the same
        assert again == recs
    cf = registry.load_benchmark("codeforces", src, use_hub=False)
    assert len(cf) == 1 and cf[0].extra["rating"] == 800  # the interactive problem is left out
    assert registry.load_benchmark("test_codeforces", src)[0].extra == {"rating": 1900}
    assert (
        "extra" not in registry.load_benchmark("gsm8k", _gsm8k(tmp_path))[0].to_dict()
    )  # other sets unchanged


def _gsm8k(tmp_path: Path) -> Path:
    d = tmp_path / "gsm"
    d.mkdir()
    (d / "gsm8k.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "#### 2"}) + "\n")
    return d


def test_a_bad_local_row_names_the_file_and_row(tmp_path: Path) -> None:
    (tmp_path / "taco.jsonl").write_text(json.dumps({"question": "q", "input_output": "{bad"}) + "\n")
    with pytest.raises(
        UserError, match=r"taco.jsonl row 0: input_output|taco.jsonl row 0: tests is not JSON"
    ):
        registry.load_benchmark("taco", tmp_path, use_hub=False)


# ------------------------------------------------------------------------------------------- RL rows
def test_code_rl_rows_fit_the_rl_schema() -> None:
    from e2c.chain import E2C

    rows = [
        _lcb_row(),
        {"problem": "p", "tests": '[{"input": "1", "output": "1"}]'},
        {"problem": "bad", "tests": "{oops"},
        _cf_row(interaction_format="Interact."),
    ]
    got, dropped = code_records.code_rl_rows(rows, "deepcoder", E2C.messages)
    assert len(got) == 2 and sum(dropped.values()) == 2
    assert validate_rows(got, "rl", "code rl") == 2
    assert got[0]["extra_info"] == {"index": 0, "kind": "code", "id": "abc001_a", "split": "rl",
                                    "contest_date": "2024-09-01", "difficulty": "easy"}  # fmt: skip
    assert parse_tests(got[1]["reward_model"]["ground_truth"]).mode == "stdin"
    assert (
        check_row({**got[0], "extra_info": {**got[0]["extra_info"], "kind": "essay"}}, "rl")[0]
        == "extra_info.kind"
    )


def test_prepare_writes_code_rl_parquet(tmp_path: Path) -> None:
    src = tmp_path / "deepcoder"
    src.mkdir()
    rows = [
        {"problem": f"Print {i}.", "tests": json.dumps([{"input": "", "output": f"{i}\n"}])}
        for i in range(40)
    ]
    (src / "primeintellect.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "processed"
    cmd = [sys.executable, "-m", "e2c.data.prepare", "--skip-download", "--skip-sft", "--skip-rl", "--synthetic",
           "0", "--raw", str(tmp_path / "raw"), "--out", str(out), "--code-rl", str(src), "--val-frac", "0.1"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "E2C_HOME": str(tmp_path / "home")}
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    train = list(read_rows(out / "rl" / "code_rl_train.parquet"))
    val = list(read_rows(out / "rl" / "code_rl_val.parquet"))
    assert len(train) + len(val) == 40 and val
    row = train[0]
    assert row["extra_info"]["kind"] == "code" and row["ability"] == "code"
    assert parse_tests(row["reward_model"]["ground_truth"]).mode == "stdin"
    assert "```python" in row["prompt"][-1]["content"] and "boxed" not in row["prompt"][-1]["content"]
    bad = subprocess.run([*cmd[:-4], "--code-rl", str(tmp_path / "nope")], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)  # fmt: skip
    assert bad.returncode == 2 and "--code-rl" in bad.stderr and "no such file or folder" in bad.stderr
