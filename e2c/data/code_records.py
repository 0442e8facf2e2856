"""Code problems as the toolkit's rows: RL rows for verl's reward (:func:`code_rl_rows`) and evaluation
records (:func:`to_code_record`), both from :func:`e2c.data.code_sets.code_problem`'s problems. A row that does
not convert is dropped and counted (RL) or refused in one line (records).
More: docs/data.md, "Code benchmarks".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from e2c.data.code_sets import CODE_KIND, CodeSetError, code_problem
from e2c.data.records import Record


# ------------------------------------------------------------------------------------------ RL rows
def code_rl_rows(
    rows: Iterable[Mapping[str, Any]],
    source: str,
    messages: Callable[[str], list[dict[str, str]]],
    **opts: Any,
) -> tuple[list[dict[str, Any]], Counter]:
    """verl RL rows from code problems of any shape: ``prompt`` = ``messages(statement)``,
    ``reward_model.ground_truth`` = the tests JSON, ``extra_info.kind = "code"``; and the count of rows left
    out by reason (a bad row is data here, not a stop: a training set has thousands)."""
    out: list[dict[str, Any]] = []
    dropped: Counter = Counter()
    for i, row in enumerate(rows):
        try:
            p = code_problem(row, i, **opts)
        except CodeSetError as e:
            dropped[str(e).split(" (")[0][:80]] += 1
            continue
        if p is None:
            dropped["not gradable here (interactive or special checker)"] += 1
            continue
        info: dict[str, Any] = {"index": len(out), "kind": CODE_KIND, "id": p.id, "split": "rl"}
        info.update({k: v for k, v in p.extra.items() if k in ("rating", "contest_date", "difficulty")})
        out.append(
            {
                "prompt": messages(p.problem),
                "data_source": str(row.get("data_source") or source),
                "ability": "code",
                "reward_model": {"style": "rule", "ground_truth": p.tests.dumps()},
                "extra_info": info,
            }
        )
    return out, dropped


# ------------------------------------------------------------------------------------------ records
def to_code_record(row: Mapping[str, Any], name: str, index: int, **opts: Any) -> Record | None:
    """One row of a code set named ``name`` -> a :class:`Record` (kind ``code``, answer = the tests JSON,
    ``extra`` = the problem's facts), or None for a problem the converter leaves out."""
    p = code_problem(row, index, **opts)
    if p is None:
        return None
    rid = p.id if p.id.startswith(f"{name}-") else f"{name}-{p.id}"
    return Record(rid, p.problem, p.tests.dumps(), CODE_KIND, [], name, dict(p.extra))
