"""Plan adherence: how many steps of the exploration's plan the execution carries out.

A plan step is a numbered line of the exploration (``1. ...``, ``2) ...``, ``Step 3: ...``,
``**Step 4** ...``). Its *title* is the text up to the first colon, or the first 12 words. A plan step
counts as carried out when some execution segment (a numbered/"Step k" line of the execution, or any
line when the execution has no numbering) contains at least ``min_overlap`` of the title's content
words. The score is the fraction of plan steps carried out; a plan with no steps scores 0.
"""

from __future__ import annotations

import re

# Possessive prefix: "\s*" followed by a class that also takes spaces backtracked quadratically on a long
# line of blanks.
_STEP = re.compile(
    r"^[#>*\-\s]*+(?:step\s*+(\d+)|(\d+)\s*+[.)])(?:\*\*)?\s*+[:.)\-]?\s*+(?:\*\*)?\s*+(.*)$",
    re.IGNORECASE,
)
# Bounds that keep a hostile text cheap: a plan has at most this many steps, and an execution is matched
# against at most this many segments (the score on real chains, a few dozen lines, is unchanged).
MAX_PLAN_STEPS = 64
MAX_SEGMENTS = 2000
MAX_LINE_CHARS = 2000
_STOP = frozenset(
    "a an the and or of to in on for by with from at as is are be this that it its we i will then "
    "use using find compute calculate get step".split()
)


def _words(s: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", s.lower()) if w not in _STOP and len(w) > 1}


def step_titles(text: str) -> list[str]:
    """Titles of the numbered steps in a text, in order."""
    out = []
    for line in text.splitlines():
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        m = _STEP.match(line)
        if not m:
            continue
        body = m.group(3).strip().strip("*").strip()
        title = body.split(":", 1)[0] if ":" in body[:80] else " ".join(body.split()[:12])
        if title.strip():
            out.append(title.strip())
    return out


def plan_adherence(exploration: str, execution: str, min_overlap: float = 0.5) -> float:
    """Fraction of the plan's steps whose title words reappear in one execution segment."""
    plan = [w for w in (_words(t) for t in step_titles(exploration)) if w][:MAX_PLAN_STEPS]
    if not plan:
        return 0.0
    segments = step_titles(execution) or [ln[:MAX_LINE_CHARS] for ln in execution.splitlines() if ln.strip()]
    seg_words = [_words(s) for s in segments[:MAX_SEGMENTS]]
    done = 0
    for words in plan:
        if any(len(words & sw) / len(words) >= min_overlap for sw in seg_words):
            done += 1
    return done / len(plan)
