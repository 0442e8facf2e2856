"""Read an evaluation or TTS run folder into the page's data: plain dicts and lists, JSON-ready.

An evaluation run (``python -m e2c.eval.run``) holds ``results.json`` and ``predictions/<dataset>.jsonl``;
a TTS run (``python -m e2c.tts``) holds ``records.jsonl`` and ``config.json``. Every problem becomes one
entry with its samples; every sample carries its chain split by the project's parser
(:meth:`e2c.chain.ChainFormat.parse`), so the page never parses model text itself.

A half-written predictions or records file (last line cut by a kill) is read up to its last whole line,
and nothing is written back: viewing a run never changes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.chain import E2C, ChainFormat, get_format
from e2c.core.errors import UserError
from e2c.core.files import read_file_bytes, read_records
from e2c.core.results import read_results
from e2c.core.stats import paired_difference
from e2c.data.registry import load_benchmark
from e2c.rewards.code_tests import extract_code

__all__ = [
    "compare_payload",
    "left_out_line",
    "load_run",
    "phase_text",
    "problem_key",
    "run_kind",
    "sample_view",
    "single_payload",
]

# Statuses of ParsedChain that mean the model ran out of tokens, not that it wrote a bad chain.
TRUNCATED = ("truncated_exploration", "truncated_execution")


def run_kind(folder: Path) -> str:
    """``eval`` or ``tts`` by the files the folder holds; a UserError line when it is neither."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    # An evaluation stopped before its results still has predictions to show.
    predictions = folder / "predictions"
    if (folder / "records.jsonl").is_file():  # a TTS run has a results.json too, but no predictions/
        return "tts"
    if predictions.is_dir() and ((folder / "results.json").is_file() or any(predictions.glob("*.jsonl"))):
        return "eval"
    raise UserError(
        f"{folder}: not a run folder (an evaluation run holds predictions/*.jsonl, a TTS run records.jsonl)"
    )


def problem_key(dataset: str, pid: str) -> str:
    """The one name of a problem across runs: its dataset and id (ids are unique within a dataset)."""
    return f"{dataset}/{pid}"


def chain_format(config: Mapping[str, Any]) -> tuple[ChainFormat, bool | None]:
    """The run's chain format and whether the opening tag was prefilled (None: let the parser look)."""
    try:
        fmt = get_format(str(config.get("format") or "e2c"))
    except (KeyError, ValueError, UserError):
        fmt = E2C  # an unknown name: the release's format is the best guess for display
    prefill = config.get("prefill")
    return fmt, prefill if isinstance(prefill, bool) else None


# Characters outside the Basic Multilingual Plane: one code point in Python, two UTF-16 units in JavaScript.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def js_index(text: str, i: int) -> int:
    """Python string index ``i`` of ``text`` as a JavaScript (UTF-16) index, so that ``slice`` in the page
    cuts the same characters."""
    return i + len(_ASTRAL.findall(text, 0, i))


def split_chain(response: str, fmt: ChainFormat, prefilled: bool | None) -> dict[str, Any]:
    """The chain's verdict on the format and where each phase's content lies in ``response`` (as JavaScript
    indexes: the page slices the response, so the text is in the page once, not three times)."""
    p = fmt.parse(response, prefilled)
    astral = _ASTRAL.search(response) is not None

    def span(sp: tuple[int, int] | None) -> list[int] | None:
        if sp is None:
            return None
        lo, hi = max(0, sp[0] - p.offset), max(0, sp[1] - p.offset)
        return [js_index(response, lo), js_index(response, hi)] if astral else [lo, hi]

    return {
        "status": p.status,
        "well_formed": p.well_formed,
        "explore": span(p.explore_span),
        "execute": span(p.execute_span),
        "explore_closed": p.explore_closed,
        "execute_closed": p.execute_closed,
        "has_exploration": p.has_exploration,
        "has_execution": p.has_execution,
        "trailing": p.trailing_text,
    }


def phase_text(sample: Mapping[str, Any], phase: str) -> str:
    """A phase's content from a sample of the page's data (what the page's script cuts out; for tests and
    tools, on text without characters outside the BMP)."""
    sp = sample["chain"][phase]
    return "" if sp is None else sample["response"][sp[0] : sp[1]]


def format_tags(fmt: ChainFormat) -> list[str]:
    """The four tags of a run's chain format, shown around each phase."""
    return [fmt.explore_open, fmt.explore_close, fmt.execute_open, fmt.execute_close]


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def sample_view(
    row: Mapping[str, Any], fmt: ChainFormat = E2C, prefilled: bool | None = None
) -> dict[str, Any]:
    """One prediction line as the page shows it: verdict, tokens per phase, the split chain, and for a code
    problem the program (the response's last fenced block, :func:`e2c.rewards.code_tests.extract_code`) and
    tests passed / total."""
    response = row.get("response")
    response = response if isinstance(response, str) else ""
    chain = split_chain(response, fmt, prefilled)
    explore, execute = _int_or_none(row.get("explore_tokens")), _int_or_none(row.get("execute_tokens"))
    out: dict[str, Any] = {
        "sample": row.get("sample"),
        "label": f"sample {row.get('sample')}",
        "correct": bool(row.get("correct")),
        "extracted": row.get("extracted"),
        "reason": row.get("reason"),
        "chain_status": row.get("chain_status") or chain["status"],
        "explore_tokens": explore,
        "execute_tokens": execute,
        "tokens": (explore or 0) + (execute or 0),
        "explore_stop": row.get("explore_stop"),
        "forced_close": row.get("forced_close"),
        "finish_reason": row.get("finish_reason"),
        "response": response,
        "chain": chain,
    }
    # The eval's own verdict on the chain when it recorded one (the parser's otherwise): the badge then
    # agrees with the run's format_rate.
    out["malformed"] = out["chain_status"] != "ok"
    out["truncated"] = row.get("finish_reason") == "length" or out["chain_status"] in TRUNCATED
    if row.get("kind") == "code":
        out["program"] = extract_code(response)[0]
        out["tests_passed"] = row.get("tests_passed")
        out["tests_total"] = row.get("tests_total")
        out["sandbox_s"] = row.get("sandbox_s")
    return out


def problem_texts(config: Mapping[str, Any], dataset: str) -> dict[str, str]:
    """``{id: problem text}`` from the run's local data (``data_dir`` in its config), never the hub; empty
    when the data is not here any more (the page then shows the id alone)."""
    data_dir = config.get("data_dir")
    try:
        records = load_benchmark(dataset, data_dir if isinstance(data_dir, str) else None, use_hub=False)
    except Exception:  # the text only decorates the page: data that cannot be read leaves the ids
        return {}
    return {r.id: r.problem for r in records}


def _prediction_files(folder: Path, results: Mapping[str, Any]) -> list[tuple[str, Path]]:
    """The datasets of the run in results.json's order, then any other predictions file found."""
    names = list(results.get("datasets", {}))
    names += sorted(p.stem for p in (folder / "predictions").glob("*.jsonl") if p.stem not in names)
    return [(n, folder / "predictions" / f"{n}.jsonl") for n in names]


def load_eval(folder: Path) -> dict[str, Any]:
    """An evaluation run: its settings, summary metrics and problems (in dataset, then index order). A run
    stopped before its ``results.json`` shows its predictions without a summary."""
    finished = (folder / "results.json").is_file()
    results = read_results(folder / "results.json") if finished else {}
    config = results.get("config") or {}
    if (folder / "config.json").is_file() and not config:
        config = _json_object(folder / "config.json")
    fmt, prefilled = chain_format(config)
    problems: list[dict[str, Any]] = []
    for dataset, path in _prediction_files(folder, results):
        if not path.is_file():
            continue
        rows = [row for _, row in read_records(path, what="prediction line", hint="rerun the evaluation")]
        texts = problem_texts(config, dataset) if rows else {}
        by_id: dict[str, dict[str, Any]] = {}
        for row in rows:
            pid = str(row.get("id", row.get("index")))
            entry = by_id.get(pid)
            if entry is None:
                entry = by_id[pid] = {
                    "key": problem_key(dataset, pid),
                    "dataset": dataset,
                    "id": pid,
                    "index": _int_or_none(row.get("index")),
                    "kind": row.get("kind") or "",
                    "gold": row.get("gold"),
                    "problem": texts.get(pid),
                    "samples": [],
                }
            entry["samples"].append(sample_view(row, fmt, prefilled))
        for entry in by_id.values():
            entry["samples"].sort(key=lambda s: s["sample"] if isinstance(s["sample"], int) else 0)
        problems += sorted(by_id.values(), key=lambda e: (e["index"] is None, e["index"] or 0))
    return {
        "type": "eval",
        "path": str(folder),
        "settings": config,
        "tags": format_tags(fmt),
        "summary": {
            "datasets": results.get("datasets", {}),
            "average": results.get("average", {}),
            "finished": finished,
        },
        "problems": problems,
    }


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_file_bytes(path).decode("utf-8"))
    except ValueError as e:
        raise UserError(f"{path}: not a JSON file ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a JSON object")
    return data


def tts_sample(record: Mapping[str, Any], fmt: ChainFormat = E2C) -> dict[str, Any]:
    """One TTS record (a method at a budget on one problem) as a sample: the chosen answer, its verdict,
    the votes or candidates the method kept, tokens, and the chosen response split into phases."""
    response = record.get("response")
    response = response if isinstance(response, str) else ""
    chain = split_chain(response, fmt, None)
    details = record.get("details") if isinstance(record.get("details"), dict) else {}
    roles = record.get("tokens_by_role") if isinstance(record.get("tokens_by_role"), dict) else {}
    tokens = _int_or_none(record.get("generated_tokens")) or 0
    return {
        "sample": None,
        "label": f"{record.get('method')} @ {record.get('budget')}",
        "method": record.get("method"),
        "budget": record.get("budget"),
        "correct": bool(record.get("correct")),
        "extracted": record.get("answer"),
        "reason": "correct" if record.get("correct") else "wrong",
        "chain_status": chain["status"],
        "explore_tokens": _int_or_none(roles.get("explore")),
        "execute_tokens": _int_or_none(roles.get("execute")),
        "tokens": tokens,
        "tokens_by_role": roles,
        "votes": details.get("votes"),
        "candidates": details.get("candidates"),
        "details": {k: v for k, v in details.items() if k not in ("votes", "candidates", "prefix")},
        "response": response,
        "chain": chain,
        "malformed": not chain["well_formed"],
        "truncated": chain["status"] in TRUNCATED,
    }


def load_tts(folder: Path) -> dict[str, Any]:
    """A TTS run: its settings, the summary per method and budget, and one problem per problem id with one
    sample per (method, budget)."""
    config = _json_object(folder / "config.json") if (folder / "config.json").is_file() else {}
    summary: Any = {}
    if (folder / "results.json").is_file():
        summary = _json_object(folder / "results.json").get("summary", {})
    dataset = str(config.get("dataset") or folder.name)
    fmt, _ = chain_format(config.get("settings") or {})
    by_id: dict[str, dict[str, Any]] = {}
    rows = read_records(folder / "records.jsonl", what="TTS record", hint="rerun the TTS run")
    for _, rec in rows:
        pid = str(rec.get("problem_id"))
        entry = by_id.setdefault(
            pid,
            {
                "key": problem_key(dataset, pid),
                "dataset": dataset,
                "id": pid,
                "index": len(by_id),
                "kind": str(rec.get("kind") or ""),
                "gold": rec.get("gold"),
                "problem": None,
                "samples": [],
            },
        )
        entry["samples"].append(tts_sample(rec, fmt))
    texts = problem_texts(config, dataset) if by_id else {}
    for entry in by_id.values():
        entry["problem"] = texts.get(entry["id"])
    return {
        "type": "tts",
        "path": str(folder),
        "settings": config,
        "tags": format_tags(fmt),
        "summary": {"methods": summary},
        "problems": list(by_id.values()),
    }


def load_run(folder: Path) -> dict[str, Any]:
    """An evaluation or TTS run folder as the page's data (see :func:`load_eval`, :func:`load_tts`)."""
    return load_eval(folder) if run_kind(folder) == "eval" else load_tts(folder)


def score(samples: Sequence[Mapping[str, Any]]) -> float:
    """A problem's accuracy in one run: the share of its samples graded right (0 with none)."""
    return sum(1.0 for s in samples if s["correct"]) / len(samples) if samples else 0.0


def _run_head(run: Mapping[str, Any], label: str) -> dict[str, Any]:
    return {k: run[k] for k in ("type", "path", "settings", "tags", "summary")} | {"label": label}


def single_payload(run: Mapping[str, Any], label: str = "run") -> dict[str, Any]:
    """The page's data for one run: its head and its problems, each with one column of samples."""
    problems = [
        {k: v for k, v in p.items() if k != "samples"}
        | {"runs": [p["samples"]], "scores": [score(p["samples"])]}
        for p in run["problems"]
    ]
    return {
        "mode": "single",
        "runs": [_run_head(run, label)],
        "problems": problems,
        "paired": None,
        "left_out": None,
    }


def gained_lost(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[list[str], list[str]]:
    """The problems the second run gets more right than the first (gained) and less right (lost), in the
    order of ``before``."""
    gained = [k for k in before if after[k] > before[k]]
    lost = [k for k in before if after[k] < before[k]]
    return gained, lost


def compare_payload(a: Mapping[str, Any], b: Mapping[str, Any], labels: Sequence[str]) -> dict[str, Any]:
    """The page's data for two runs, on the problems both hold: problems gained and lost first, then the
    rest, each with both runs' samples, and the paired difference (mean of per-problem accuracy differences,
    and its standard error). ``left_out``: how many problems only one run holds (left out of the page and
    the difference); runs that share no problem are a UserError line."""
    pb_all = {p["key"]: p for p in b["problems"]}
    pa = {p["key"]: p for p in a["problems"] if p["key"] in pb_all}
    pb = {k: pb_all[k] for k in pa}
    left_out = {"first": len(a["problems"]) - len(pa), "second": len(pb_all) - len(pa)}
    if not pa:
        raise UserError(
            f"{a['path']} and {b['path']} share no problem ({left_out['first']} in the first, "
            f"{left_out['second']} in the second); compare runs of the same data"
        )
    before = {k: score(p["samples"]) for k, p in pa.items()}
    after = {k: score(pb[k]["samples"]) for k in pa}
    gained, lost = gained_lost(before, after)
    change = dict.fromkeys(gained, "gained") | dict.fromkeys(lost, "lost")
    order = {k: n for n, k in enumerate([*gained, *lost, *(k for k in pa if k not in change)])}
    problems = []
    for k in sorted(pa, key=order.__getitem__):
        p, q = pa[k], pb[k]
        head = {key: v for key, v in p.items() if key != "samples"}
        head["problem"] = p.get("problem") or q.get("problem")
        head["gold"] = p.get("gold") if p.get("gold") is not None else q.get("gold")
        problems.append(
            head
            | {
                "runs": [p["samples"], q["samples"]],
                "scores": [before[k], after[k]],
                "change": change.get(k, "same"),
            }
        )
    keys = list(pa)
    paired = paired_difference([after[k] for k in keys], [before[k] for k in keys])
    # Per dataset too: e2c.eval.compare reports each dataset's paired difference, and the two should agree.
    datasets: dict[str, Any] = {}
    for name in dict.fromkeys(p["dataset"] for p in pa.values()):
        ks = [k for k in keys if pa[k]["dataset"] == name]
        datasets[name] = paired_difference([after[k] for k in ks], [before[k] for k in ks])
    return {
        "mode": "compare",
        "runs": [_run_head(a, labels[0]), _run_head(b, labels[1])],
        "problems": problems,
        "paired": paired | {"gained": gained, "lost": lost, "datasets": datasets},
        "left_out": left_out if any(left_out.values()) else None,
    }


def left_out_line(payload: Mapping[str, Any]) -> str | None:
    """One line on the problems a comparison left out (held by one run only), None when there are none."""
    gone = payload.get("left_out")
    if not gone:
        return None
    first, second = (r["label"] for r in payload["runs"])
    return (
        f"compared on the {len(payload['problems'])} problems both runs hold; left out "
        f"{gone['first']} only in {first} and {gone['second']} only in {second}"
    )
