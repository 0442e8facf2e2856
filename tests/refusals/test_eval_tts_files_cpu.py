"""Fail cleanly everywhere: the failure classes reported for evaluation, test-time scaling and
the demos, each run as a user runs it. Refused input is exactly one ``error:`` line naming what is wrong,
exit 2, no traceback, and the files that were there before unchanged; a line cut by a kill is recovered
from as resume intends (dropped and redone).

1. Broken model folders (weights that are not safetensors, no tokenizer) through ``scripts/eval.sh`` and
   both demos.
2. Run files read back: ``e2c.eval.compare`` and eval's resume on a predictions file with a bad or
   non-UTF-8 line, a ``results.json`` without its fields, a config that is a JSON list; TTS and eval resume
   on a results file cut in the middle of a UTF-8 character.
3. ``e2c.eval.compare --plot-dir`` onto a file or into ``/proc``: refused before any work.
4. Paths with spaces and non-ASCII letters for eval's ``--output-dir`` / ``--data-dir`` and TTS's output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bad_input import ROOT, assert_one_line_error, run, snapshot
from conftest import BENCH_DIR

EVAL_RUN = ROOT / "tests" / "fixtures" / "eval_run"  # a finished run folder, as e2c.eval.run writes it
TINY = ["--model", "tiny", "--backend", "hf"]
EVAL = [*TINY, "--dataset", "gsm8k", "--limit", "2", "--sample", "1", "--max-tokens", "8", "--quiet"]
TTS = [
    *TINY,
    *["--dataset", "gsm8k", "--limit", "2", "--methods", "greedy_cot", "--budgets", "1"],
    *["--set", "cot_tokens=8"],
]


# ------------------------------------------------------------------------------- 1. broken model folders
def broken_model(tmp: Path, tiny_path: str, case: str) -> Path:
    """A copy of the tiny model with one part broken: its weights not safetensors, or no tokenizer."""
    folder = tmp / f"model-{case}"
    shutil.copytree(tiny_path, folder)
    if case == "weights":
        (folder / "model.safetensors").write_bytes(b"this is not a safetensors file at all")
    else:
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
            (folder / name).unlink(missing_ok=True)
    return folder


@pytest.mark.parametrize("case", ["weights", "tokenizer"])
@pytest.mark.parametrize("entry", ["scripts/eval.sh", "example_inference.py", "example_interactive.py"])
def test_a_broken_model_folder_is_one_line(tmp_path: Path, tiny_path: str, entry: str, case: str) -> None:
    model = broken_model(tmp_path, tiny_path, case)
    out = tmp_path / "out"
    args = [*EVAL, "--data-dir", str(BENCH_DIR), "--output-dir", str(out)] if entry.endswith(".sh") else []
    before = snapshot(tmp_path)
    r = run(entry, *args, "--model", str(model), "--backend", "hf")
    why = (
        "weights file model.safetensors is not a safetensors file"
        if case == "weights"
        else "has no tokenizer"
    )
    assert_one_line_error(r, str(model), why)
    assert snapshot(tmp_path) == before and not out.exists()


# ---------------------------------------------------------------------------- 2. run files read back
def eval_run_copy(tmp: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(EVAL_RUN, tmp / name))


PREDICTION_DAMAGE = {
    "bad json": b"{not json\n",
    "not utf-8": b'{"id": "caf\xe9", "correct": true}\n',
    "a list": b"[1, 2]\n",
    "no id": b'{"correct": true}\n',
}


@pytest.mark.parametrize("damage", list(PREDICTION_DAMAGE))
def test_compare_names_a_bad_predictions_line(tmp_path: Path, damage: str) -> None:
    run_dir = eval_run_copy(tmp_path)
    preds = run_dir / "predictions" / "gsm8k.jsonl"
    preds.write_bytes(preds.read_bytes() + PREDICTION_DAMAGE[damage])
    before = snapshot(tmp_path)
    r = run("-m", "e2c.eval.compare", str(run_dir))
    assert_one_line_error(r, f"{preds} line 3: not a prediction line")
    assert snapshot(tmp_path) == before and not r.stdout


RESULTS_DAMAGE = {
    "no problems": ("datasets.gsm8k.problems", None, "no valid problems"),
    "no pass@1": ("datasets.gsm8k.pass@1", None, "no valid pass@1"),
    "datasets a list": ("datasets", [1], "no 'datasets' object"),
    "config a list": ("config", ["tiny"], "'config' is a JSON list, not an object"),
    "a list": ("", [], "a JSON list, not an object"),
}


@pytest.mark.parametrize("damage", list(RESULTS_DAMAGE))
def test_compare_names_a_results_file_without_its_fields(tmp_path: Path, damage: str) -> None:
    run_dir = eval_run_copy(tmp_path)
    path = run_dir / "results.json"
    key, value, why = RESULTS_DAMAGE[damage]
    results = json.loads(path.read_text())
    if not key:
        results = value
    else:
        *parents, last = key.split(".")
        node = results
        for k in parents:
            node = node[k]
        if value is None:
            del node[last]
        else:
            node[last] = value
    path.write_text(json.dumps(results))
    before = snapshot(tmp_path)
    r = run("-m", "e2c.eval.compare", str(run_dir))
    assert_one_line_error(r, f"{path}: not an evaluation results file", why)
    assert snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def finished_eval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny evaluation (two problems, one sample each): the run folder a rerun resumes."""
    save = tmp_path_factory.mktemp("eval") / "run"
    r = run("-m", "e2c.eval.run", *EVAL, "--data-dir", str(BENCH_DIR), "--output-dir", str(save))
    assert r.returncode == 0, r.stderr[-2000:]
    return save


@pytest.mark.parametrize("damage", ["bad json", "not utf-8", "record a list"])
def test_eval_resume_names_a_bad_run_file_and_changes_nothing(
    tmp_path: Path, finished_eval: Path, damage: str
) -> None:
    save = Path(shutil.copytree(finished_eval, tmp_path / "run"))
    preds = save / "predictions" / "gsm8k.jsonl"
    if damage == "record a list":  # what made the run (e2c.core.run_folder); config.json is only for reports
        bad, needle = save / "e2c-run.json", "is not a run record (got a list); move the run folder away"
        bad.write_text("[1, 2]\n")
    else:
        bad, needle = preds, "line 2: not a prediction line"
        first = preds.read_bytes().split(b"\n")[0]
        preds.write_bytes(first + b"\n" + PREDICTION_DAMAGE[damage])
    before = snapshot(tmp_path)
    r = run("-m", "e2c.eval.run", *EVAL, "--data-dir", str(BENCH_DIR), "--output-dir", str(save))
    assert_one_line_error(r, str(bad), needle)
    assert snapshot(tmp_path) == before


def cut_in_a_character(path: Path, line: dict) -> bytes:
    """Append ``line`` cut in the middle of its first non-ASCII character, as a kill can leave it."""
    text = json.dumps(line, ensure_ascii=False).encode("utf-8")
    cut = text[: text.index("é".encode()) + 1]  # the first byte of two
    path.write_bytes(path.read_bytes() + cut)
    return cut


def test_eval_resume_drops_a_line_cut_in_a_character(tmp_path: Path, finished_eval: Path) -> None:
    save = Path(shutil.copytree(finished_eval, tmp_path / "run"))
    preds = save / "predictions" / "gsm8k.jsonl"
    lines = preds.read_bytes().splitlines(keepends=True)
    preds.write_bytes(lines[0])
    cut_in_a_character(preds, {**json.loads(lines[1]), "response": "café"})
    r = run("-m", "e2c.eval.run", *EVAL, "--data-dir", str(BENCH_DIR), "--output-dir", str(save))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    rows = [json.loads(x) for x in preds.read_text(encoding="utf-8").splitlines()]
    assert preds.read_bytes().startswith(lines[0]) and [x["index"] for x in rows] == [0, 1]


def test_tts_resume_drops_a_record_cut_in_a_character(tmp_path: Path) -> None:
    root = tmp_path / "out"
    args = ["tts/run_tts.py", *TTS, "--data-dir", str(BENCH_DIR), "--output-dir", str(root)]
    first = run(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    records = root / "gsm8k" / "tiny" / "records.jsonl"
    lines = records.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    records.write_bytes(lines[0])
    cut_in_a_character(records, {**json.loads(lines[1]), "answer": "é"})
    r = run(*args)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "1/2 results already in" in r.stdout
    rows = [json.loads(x) for x in records.read_text(encoding="utf-8").splitlines()]
    assert records.read_bytes().startswith(lines[0]) and len(rows) == 2  # the cut one redone, on its own line


# ------------------------------------------------------------------------------- 3. compare --plot-dir
@pytest.mark.parametrize("where", ["a file", "under a file", "/proc"])
def test_compare_plot_dir_is_refused_before_any_work(tmp_path: Path, where: str) -> None:
    (tmp_path / "file.txt").write_text("keep me\n")
    plot_dir = {
        "a file": tmp_path / "file.txt",
        "under a file": tmp_path / "file.txt" / "plots",
        "/proc": Path("/proc/e2c-plots"),
    }[where]
    before = snapshot(tmp_path)
    r = run("-m", "e2c.eval.compare", str(EVAL_RUN), "--plot-dir", str(plot_dir))
    assert_one_line_error(r, "error: --plot-dir ", str(plot_dir))
    assert not r.stdout and snapshot(tmp_path) == before  # no table printed: refused before any work


# -------------------------------------------------------------------- 4. spaces and non-ASCII in paths
def test_paths_with_spaces_and_accents_work(tmp_path: Path) -> None:
    data = tmp_path / "dàta dir"
    data.mkdir()
    shutil.copy(BENCH_DIR / "gsm8k.jsonl", data / "gsm8k.jsonl")
    save = tmp_path / "évals run" / "n°1"
    r = run("-m", "e2c.eval.run", *EVAL, "--data-dir", str(data), "--output-dir", str(save))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["results"] == str(save / "results.json")
    assert json.loads((save / "results.json").read_text(encoding="utf-8"))["config"]["data_dir"] == str(data)
    compared = run("-m", "e2c.eval.compare", str(save), "--plot-dir", str(tmp_path / "plöts here"))
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert (tmp_path / "plöts here" / "accuracy.png").stat().st_size > 1000
    root = tmp_path / "tts öut"
    tts = run("-m", "e2c.tts", *TTS, "--data-dir", str(data), "--output-dir", str(root))
    assert tts.returncode == 0 and "Traceback" not in tts.stderr, tts.stderr[-2000:]
    out = json.loads(tts.stdout.strip().splitlines()[-1])
    assert out["results"] == str(root / "gsm8k" / "tiny" / "results.json")
    assert (root / "gsm8k" / "tiny" / "accuracy_vs_tokens.png").is_file()
