"""``python -m e2c.view``: one self-contained HTML page from a small fake evaluation run folder (3 problems x
2 samples: one response carrying ``<script>``, one malformed chain, one code problem), two runs side by side
(gained and lost against a plain loop), and the one-line refusals."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bad_input import assert_one_line_error, run

from e2c.chain import E2C
from e2c.view import view_payload, write_view
from e2c.view.load import gained_lost, left_out_line, phase_text, sample_view, score
from e2c.view.page import DATA_ID, build_html, embed_json, extract_json

SCRIPT = "<script>document.title='pwned'</script><script>alert(1)</script>"
PROGRAM = "```python\ndef add(a, b):\n    return a + b\n```"


def chain(plan: str, work: str) -> str:
    """A well-formed response after the prefilled opening tag."""
    return f"{plan}</EXPLORATION><EXECUTION>{work}</EXECUTION>"


def line(index: int, pid: str, sample: int, correct: bool, response: str, **kw: Any) -> dict[str, Any]:
    row = {
        "dataset": "toy",
        "index": index,
        "id": pid,
        "sample": sample,
        "gold": kw.pop("gold", "5"),
        "kind": kw.pop("kind", "math"),
        "extracted": kw.pop("extracted", "5" if correct else "4"),
        "correct": correct,
        "reason": "correct" if correct else "wrong",
        "chain_status": kw.pop("chain_status", "ok"),
        "explore_tokens": 10 + sample,
        "execute_tokens": 20 + index,
        "explore_stop": "tag",
        "forced_close": False,
        "finish_reason": kw.pop("finish_reason", "stop"),
        "response": response,
    }
    return row | kw


def rows(flip: bool = False) -> list[dict[str, Any]]:
    """3 problems x 2 samples. ``flip``: the second run, problem p0 all right (gained), p2 all wrong (lost)."""
    code = {"kind": "code", "gold": '{"tests": []}', "tests_passed": 3, "tests_total": 4, "sandbox_s": 0.2}
    return [
        line(0, "p0", 0, flip, chain("add", "so \\boxed{5}")),
        line(0, "p0", 1, flip, chain("plan " + SCRIPT, "so \\boxed{4} " + SCRIPT)),
        line(1, "p1", 0, True, chain("add", "\\boxed{5}")),
        # No closing tags: cut by the budget, a malformed chain.
        line(1, "p1", 1, False, "a plan that never ends", chain_status="truncated_exploration",
             finish_reason="length", extracted=None),
        line(2, "p2", 0, not flip, chain("write it", PROGRAM), extracted=PROGRAM, **code),
        line(2, "p2", 1, False, chain("write it", "no code"), extracted=None, **code),
    ]  # fmt: skip


def write_run(folder: Path, records: list[dict[str, Any]], cut: bool = False) -> Path:
    """A run folder as e2c.eval.run writes it (results.json, config.json, predictions/toy.jsonl); ``cut``:
    the last line loses its end, as a kill leaves it."""
    (folder / "predictions").mkdir(parents=True)
    metrics = {
        "problems": 3,
        "samples": 6,
        "pass@1": 0.5,
        "format_rate": 0.8,
        "truncation_rate": 0.2,
        "no_answer_rate": 0.3,
        "explore_tokens": 10.5,
        "execute_tokens": 21.0,
    }
    config = {"model": "tiny", "dataset": "toy", "samples": 2, "format": "e2c", "prefill": True}
    (folder / "results.json").write_text(json.dumps({"config": config, "datasets": {"toy": metrics}}))
    (folder / "config.json").write_text(json.dumps(config))
    text = "".join(json.dumps(r) + "\n" for r in records)
    if cut:
        text = text[: -len(json.dumps(records[-1])) // 2]
    (folder / "predictions" / "toy.jsonl").write_text(text)
    return folder


def payload_block(html: str) -> str:
    start = html.index(f'id="{DATA_ID}">') + len(f'id="{DATA_ID}">')
    return html[start : html.index("</script>", start)]


def test_one_run_page_round_trips_its_samples_cpu(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "a", rows())
    out = tmp_path / "page.html"
    r = run("-m", "e2c.view", str(run_dir), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "page.html"]  # one file, nothing beside it
    html = out.read_text(encoding="utf-8")
    block = payload_block(html)
    assert "<" not in block and "</script>" not in block  # model text cannot close the data block
    assert not re.search(r"(src|href)\s*=|https?://|@import|url\(", html)  # nothing fetched
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html and "document.write" not in html
    data = extract_json(html)
    assert data["mode"] == "single" and data["paired"] is None
    samples = [s for p in data["problems"] for s in p["runs"][0]]
    assert [(p["id"], p["kind"]) for p in data["problems"]] == [
        ("p0", "math"),
        ("p1", "math"),
        ("p2", "code"),
    ]
    assert [s["response"] for s in samples] == [r["response"] for r in rows()]
    assert [s["correct"] for s in samples] == [r["correct"] for r in rows()]
    with_script = samples[1]
    assert SCRIPT in phase_text(with_script, "explore") and with_script["chain"]["status"] == "ok"
    cut = samples[3]
    assert cut["malformed"] and cut["truncated"] and cut["chain"]["status"] == "truncated_exploration"
    assert phase_text(cut, "explore") == "a plan that never ends" and not cut["chain"]["explore_closed"]
    code = samples[4]
    assert code["program"] == "def add(a, b):\n    return a + b\n"
    assert (code["tests_passed"], code["tests_total"]) == (3, 4)
    assert samples[5]["program"] is None
    assert [(s["explore_tokens"], s["execute_tokens"], s["tokens"]) for s in samples[:2]] == [
        (10, 20, 30),
        (11, 20, 31),
    ]
    assert data["runs"][0]["summary"]["datasets"]["toy"]["pass@1"] == 0.5
    assert data["runs"][0]["settings"]["model"] == "tiny"


def test_the_payload_escapes_every_closing_sequence_cpu() -> None:
    nasty = {"t": "</script><!-- <script> & \u2028 </SCRIPT >", "u": "\ud800 lone"}
    text = embed_json(nasty)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == nasty
    html = build_html(
        {"mode": "single", "runs": [], "problems": [nasty], "paired": None}, title="</title><b>"
    )
    assert extract_json(html)["problems"] == [nasty]
    assert "<title>&lt;/title&gt;&lt;b&gt;</title>" in html


def test_two_runs_gained_and_lost_match_a_plain_loop_cpu(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", rows())
    b = write_run(tmp_path / "b", rows(flip=True))
    data = write_view([a, b], tmp_path / "cmp.html", ["A", "B"])
    assert extract_json((tmp_path / "cmp.html").read_text(encoding="utf-8")) == data
    # The plain loop: per problem the share of right samples in each run.
    per: dict[str, list[list[bool]]] = {}
    for n, rs in enumerate((rows(), rows(flip=True))):
        for r in rs:
            per.setdefault(f"toy/{r['id']}", [[], []])[n].append(r["correct"])
    acc = {k: [sum(v) / len(v) for v in runs] for k, runs in per.items()}
    gained = [k for k, (x, y) in acc.items() if y > x]
    lost = [k for k, (x, y) in acc.items() if y < x]
    assert (data["paired"]["gained"], data["paired"]["lost"]) == (gained, lost) == (["toy/p0"], ["toy/p2"])
    assert [p["key"] for p in data["problems"]] == [
        "toy/p0",
        "toy/p2",
        "toy/p1",
    ]  # gained, lost, then the rest
    assert [p["change"] for p in data["problems"]] == ["gained", "lost", "same"]
    diffs = [y - x for x, y in acc.values()]
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    assert data["paired"]["mean"] == pytest.approx(mean) and data["paired"]["se"] == pytest.approx(se)
    assert data["paired"]["n"] == 3


def test_runs_that_share_some_problems_are_compared_on_those_cpu(tmp_path: Path) -> None:
    """A second run without p1 and with a problem of its own: the page and the difference hold the two
    shared problems, and one line counts what was left out."""
    a = write_run(tmp_path / "a", rows())
    extra = [r | {"id": "p9"} for r in rows(flip=True) if r["id"] == "p0"]
    b = write_run(tmp_path / "b", [r for r in rows(flip=True) if r["id"] != "p1"] + extra)
    data = write_view([a, b], tmp_path / "cmp.html", ["A", "B"])
    assert [p["key"] for p in data["problems"]] == ["toy/p0", "toy/p2"]
    assert data["paired"]["n"] == 2 and data["paired"]["mean"] == pytest.approx(
        ((1.0 - 0.0) + (0.0 - 0.5)) / 2
    )
    assert data["left_out"] == {"first": 1, "second": 1}
    assert (
        left_out_line(data)
        == "compared on the 2 problems both runs hold; left out 1 only in A and 1 only in B"
    )
    r = run("-m", "e2c.view", str(a), str(b), "--labels", "A", "B", "--out", str(tmp_path / "cli.html"))
    assert r.returncode == 0 and "left out 1 only in A and 1 only in B" in r.stdout, r.stderr
    same = write_view([a, a], tmp_path / "same.html", ["A", "A2"])
    assert same["left_out"] is None and left_out_line(same) is None


def test_gained_lost_is_a_plain_comparison_cpu() -> None:
    before = {"a": 0.0, "b": 1.0, "c": 0.5, "d": 0.5}
    after = {"a": 0.5, "b": 0.0, "c": 0.5, "d": 1.0}
    assert gained_lost(before, after) == (["a", "d"], ["b"])
    assert score([]) == 0.0 and score([{"correct": True}, {"correct": False}]) == 0.5


def test_a_cut_last_line_still_renders_cpu(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "a", rows(), cut=True)
    before = (run_dir / "predictions" / "toy.jsonl").read_bytes()
    data = view_payload([run_dir])
    assert sum(len(p["runs"][0]) for p in data["problems"]) == 5  # all but the cut line
    assert (run_dir / "predictions" / "toy.jsonl").read_bytes() == before  # viewing never repairs a file
    # Killed before its results: the predictions so far still render, without a summary.
    (run_dir / "results.json").unlink()
    data = view_payload([run_dir])
    assert sum(len(p["runs"][0]) for p in data["problems"]) == 5
    assert data["runs"][0]["summary"]["finished"] is False and data["runs"][0]["settings"]["model"] == "tiny"


def test_bad_input_is_one_line_and_writes_nothing_cpu(tmp_path: Path) -> None:
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    out = tmp_path / "out.html"
    assert_one_line_error(run("-m", "e2c.view", str(not_a_run), "--out", str(out)), "not a run folder")
    a = write_run(tmp_path / "a", rows())
    other = [r | {"id": "q" + r["id"]} for r in rows()]
    b = write_run(tmp_path / "b", other)
    assert_one_line_error(run("-m", "e2c.view", str(a), str(b), "--out", str(out)), "share no problem")
    assert_one_line_error(run("-m", "e2c.view", str(a), str(a), str(a)), "two to compare")
    assert_one_line_error(run("-m", "e2c.view", str(tmp_path / "nowhere")), "does not exist")
    assert not out.exists() and not (a / "view.html").exists()


def test_default_output_sits_in_the_run_folder_cpu(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", rows())
    b = write_run(tmp_path / "b", rows(flip=True))
    assert run("-m", "e2c.view", str(a)).returncode == 0
    assert run("-m", "e2c.view", str(a), str(b)).returncode == 0
    assert (a / "view.html").is_file() and (b / "view-vs-a.html").is_file()


def test_a_tts_run_shows_votes_and_the_chosen_answer_cpu(tmp_path: Path) -> None:
    folder = tmp_path / "tts"
    folder.mkdir()
    rec = {
        "method": "self_consistency",
        "budget": 4,
        "problem_id": "p0",
        "correct": True,
        "answer": "5",
        "generated_tokens": 40,
        "tokens_by_role": {"full": 40},
        "details": {"votes": ["5", "5", None, "4"]},
        "response": chain("plan", "\\boxed{5}"),
    }
    (folder / "records.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(rec | {"method": "greedy_cot"}))
    (folder / "config.json").write_text(json.dumps({"dataset": "toy", "settings": {}}))
    summary = [{"method": "self_consistency", "budget": 4, "problems": 1, "accuracy": 1.0, "tokens_k": 0.04}]
    (folder / "results.json").write_text(json.dumps({"config": {}, "summary": summary}))
    data = view_payload([folder])
    (p,) = data["problems"]
    (s,) = p["runs"][0]  # the second record's line was cut
    assert (s["label"], s["extracted"], s["votes"], s["tokens"]) == (
        "self_consistency @ 4",
        "5",
        ["5", "5", None, "4"],
        40,
    )
    assert phase_text(s, "execute") == "\\boxed{5}"
    assert data["runs"][0]["type"] == "tts" and data["runs"][0]["summary"]["methods"] == summary


def test_phase_spans_are_javascript_indexes_cpu() -> None:
    """The page slices the response with UTF-16 indexes: a character outside the BMP counts twice there."""
    response = "plan \U0001f600 ok</EXPLORATION><EXECUTION>\U0001f680 \\boxed{5}</EXECUTION>"
    s = sample_view({"response": response, "correct": True}, E2C, True)
    parsed = E2C.parse(response, True)
    units = response.encode("utf-16-le")
    for phase, want in (("explore", parsed.exploration), ("execute", parsed.execution)):
        lo, hi = s["chain"][phase]
        assert units[2 * lo : 2 * hi].decode("utf-16-le") == want


DRIVER = r"""
const problems = () => ROOT.all(e => e.className === 'problem');
const out = {drawn: problems().length, info: document.querySelector('.pageinfo').textContent};
for (const d of ROOT.all(e => e.tagName === 'details')) d.fire('toggle');  // open every fold
out.html = ROOT.html();
const selects = IDS.controls.all(e => e.tagName === 'select');
selects[0].value = 'malformed'; selects[0].fire('change'); out.malformed = problems().length;
selects[0].value = 'all'; selects[0].fire('change');
const q = IDS.controls.all(e => e.tagName === 'input' && e.type === 'search')[0];
q.value = 'NEVER ends'; q.fire('input'); out.search = problems().length;
out.title = document.title;
console.log(JSON.stringify(out));
"""


def run_page_in_node(html: str, tmp: Path) -> dict[str, Any]:
    """The page's script run under node with a minimal DOM (dom_shim.js), then DRIVER's findings."""
    script = html[html.rindex("<script>") + len("<script>") : html.rindex("</script>")]
    shim = (Path(__file__).parent / "dom_shim.js").read_text(encoding="utf-8")
    program = f"{shim}\nglobalThis.PAGE_DATA = {json.dumps(payload_block(html))};\n{script}\n{DRIVER}"
    (tmp / "page.js").write_text(program, encoding="utf-8")
    r = subprocess.run(["node", str(tmp / "page.js")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(shutil.which("node") is None, reason="no node binary on PATH to run the page's script")
def test_the_page_script_draws_with_text_only_cpu(tmp_path: Path) -> None:
    """Without a browser: the script runs, draws the three problems, filters, and never inserts markup
    (the shim throws on innerHTML); the model's <script> is text in the drawn page."""
    a = write_run(tmp_path / "a", rows())
    b = write_run(tmp_path / "b", rows(flip=True))
    write_view([a], tmp_path / "one.html", ["A"])
    out = run_page_in_node((tmp_path / "one.html").read_text(encoding="utf-8"), tmp_path)
    assert out["drawn"] == 3 and "page 1 of 1 (3 of 3 problems)" in out["info"]
    assert out["malformed"] == 1 and out["search"] == 1  # only p1 holds a malformed (cut) chain
    assert out["title"] == "unchanged"
    assert "<script>" not in out["html"] and SCRIPT.replace("<", "&lt;").replace(">", "&gt;") in out["html"]
    assert "&lt;/EXPLORATION&gt;" in out["html"] and "tests passed: 3 / 4" in out["html"]
    assert "malformed: truncated_exploration" in out["html"]
    write_view([a, b], tmp_path / "two.html", ["A", "B"])
    out = run_page_in_node((tmp_path / "two.html").read_text(encoding="utf-8"), tmp_path)
    assert out["drawn"] == 3 and "gained 1, lost 1" in out["html"]


def test_a_real_eval_run_folder_renders_cpu(tmp_path: Path) -> None:
    """A folder the evaluation runner itself wrote (scripted generator): every line becomes a sample with
    its parsed chain; the run's config names no data folder, so the problem text is absent (the page shows
    the id)."""
    from e2c.data.registry import Record
    from e2c.eval.runner import EvalConfig, run_eval
    from e2c.generation.scripted import ScriptedGenerator

    def ok(answer: str) -> str:
        return f"Plan: compute.</EXPLORATION><EXECUTION> so \\boxed{{{answer}}}</EXECUTION>"

    records = [Record("g-a", "What is 2+3?", "5", "math"), Record("g-b", "What is 7*6?", "42", "math")]
    gen = ScriptedGenerator.from_responses({"2+3": [ok("5"), ok("6")], "7*6": [ok("42")[:25], SCRIPT]})
    cfg = EvalConfig(
        model="scripted", samples=2, max_tokens=200, chunk_size=4, temperature=1.0, backend="scripted"
    )
    run_eval(gen, {"gsm8k": records}, cfg, tmp_path / "run")
    data = view_payload([tmp_path / "run"])
    got = {p["id"]: [(s["correct"], s["chain"]["status"]) for s in p["runs"][0]] for p in data["problems"]}
    assert got == {
        "g-a": [(True, "ok"), (False, "ok")],
        "g-b": [(False, "truncated_exploration"), (False, "truncated_exploration")],
    }
    assert data["runs"][0]["summary"]["datasets"]["gsm8k"]["pass@1"] == 0.25
    assert [p["problem"] for p in data["problems"]] == [None, None]


def test_eval_view_flag_writes_the_page_after_the_results_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``e2c.eval.run --view``: the run as usual (here a scripted one in place of the model), then
    ``<run>/view.html`` beside ``results.json``; without the flag no page."""
    import e2c.eval.run as eval_run
    from e2c.data.registry import Record
    from e2c.eval.runner import EvalConfig, run_eval
    from e2c.generation.scripted import ScriptedGenerator

    def fake_evaluate(runs: Any, where: dict[str, Path], segments: Any = None, finished: Any = None) -> list:
        (args,) = runs
        where["save"] = Path(args.output_dir)
        gen = ScriptedGenerator.from_responses({"2+3": [chain("plan", "\\boxed{5}")]})
        cfg = EvalConfig(model="scripted", samples=1, max_tokens=50, backend="scripted")
        results = run_eval(gen, {"gsm8k": [Record("g-a", "What is 2+3?", "5", "math")]}, cfg, where["save"])
        done = SimpleNamespace(args=args, save=where["save"], results=results)
        finished(done)  # the command's report: the table, then the page
        return [done]

    monkeypatch.setattr(eval_run, "evaluate", fake_evaluate)
    for name, flags in (("plain", []), ("viewed", ["--view"])):
        assert eval_run.main(["--model", "tiny", "--output-dir", str(tmp_path / name), *flags]) == 0
    assert not (tmp_path / "plain" / "view.html").exists()
    data = extract_json((tmp_path / "viewed" / "view.html").read_text(encoding="utf-8"))
    assert [p["id"] for p in data["problems"]] == ["g-a"] and data["problems"][0]["runs"][0][0]["correct"]

    # A page that cannot be written is a line; the run's results and its JSON line stand (and a chained
    # evaluation after it would still run).
    def no_room(*a: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(eval_run, "write_view", no_room)
    capsys.readouterr()
    assert eval_run.main(["--model", "tiny", "--output-dir", str(tmp_path / "full"), "--view"]) == 0
    out, err = capsys.readouterr()
    assert "view.html not written ([Errno 28] No space left on device)" in err
    assert json.loads(out.splitlines()[-1])["results"] == str(tmp_path / "full" / "results.json")
