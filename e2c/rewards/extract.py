"""Answer extraction from free text: boxed expressions, GSM8K ``####``, "final answer is ..." phrases.

Pure string functions; none of them raises on model output. Multiple-choice letters live in
:mod:`e2c.rewards.mcq`.
"""

from __future__ import annotations

import re
from typing import Any

_BOX_RE = re.compile(r"\\?(?:boxed|fbox)\b")


def boxed_contents(text: str) -> list[str]:
    """Contents of every complete ``\\boxed{...}`` / ``\\fbox{...}`` in order, nested braces kept.

    Also accepts ``boxed{...}`` without a backslash (the release prompt spells it that way, and models
    copy it) and the brace-less ``\\boxed 5``. An unclosed box (a truncated answer) is skipped.
    Empty boxes are skipped.
    """
    out: list[str] = []
    for m in _BOX_RE.finditer(text):
        i = m.end()
        n = len(text)
        j = i
        while j < n and text[j] in " \t":
            j += 1
        if j < n and text[j] == "{":
            depth, k = 0, j
            while k < n:
                c = text[k]
                if c == "\\" and k + 1 < n:
                    k += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            if depth == 0 and k < n:
                content = text[j + 1 : k].strip()
                if content:
                    out.append(content)
        elif j > i and m.group(0).startswith("\\"):
            tail = re.match(r"[^\s$]+", text[j:])
            if tail:
                out.append(tail.group(0).rstrip(".,;"))
    return out


def last_boxed(text: str) -> str | None:
    """The content of the last complete boxed expression, or None."""
    boxes = boxed_contents(text)
    return boxes[-1] if boxes else None


_GSM_RE = re.compile(r"####\s*([^\n]+)")


def gsm8k_answer(text: str) -> str | None:
    """The text after the last ``####`` marker (GSM8K's reference format), or None."""
    found = _GSM_RE.findall(text)
    if not found:
        return None
    ans = found[-1].strip().rstrip(".")
    return ans or None


_PHRASE_RE = re.compile(
    r"(?:final\s+answer|the\s+answer)\s*(?:is|:|=)\s*:?\s*(.+?)\s*(?:$|\n|\.(?:\s|$))",
    re.IGNORECASE,
)


def final_answer_phrase(text: str) -> str | None:
    """The answer in the last "final answer is X" / "the answer is X" / "Final Answer: X", or None."""
    found = _PHRASE_RE.findall(text)
    if not found:
        return None
    ans = found[-1].strip()
    inner = last_boxed(ans)
    if inner is not None:
        return inner
    ans = ans.strip("$ *").strip()
    return ans or None


_NUM_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def last_number(text: str) -> str | None:
    """The last number-looking token in the text (for references that state a bare number)."""
    found = _NUM_RE.findall(text)
    if not found:
        return None
    return found[-1].rstrip(",")


def extract_answer(text: str, fallback_number: bool = False) -> tuple[str | None, str]:
    """Find the final answer in a response.

    Order: last boxed expression, GSM8K ``####``, "final answer is ...", then (only when asked) the last
    number. Returns ``(answer, method)``; ``method`` is ``boxed``, ``gsm8k``, ``phrase``, ``number`` or
    ``none``.
    """
    if not isinstance(text, str):
        return None, "none"
    for method, fn in (("boxed", last_boxed), ("gsm8k", gsm8k_answer), ("phrase", final_answer_phrase)):
        ans = fn(text)
        if ans is not None:
            return ans, method
    if fallback_number:
        ans = last_number(text)
        if ans is not None:
            return ans, "number"
    return None, "none"


def reference_answer(gold: Any) -> str | None:
    """Normalise a reference answer from a dataset field to one string.

    Accepts a plain answer, a number, a list of answers (joined with commas, as a set/tuple answer), a
    worked solution with a boxed answer, or a GSM8K-style solution ending in ``#### N``.
    """
    if gold is None:
        return None
    if isinstance(gold, (list, tuple)):
        parts = [reference_answer(g) for g in gold]
        parts = [p for p in parts if p]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else ", ".join(parts)
    if isinstance(gold, float) and gold.is_integer():
        return str(int(gold))
    s = str(gold).strip()
    if not s:
        return None
    ans, method = extract_answer(s)
    if method in ("boxed", "gsm8k"):
        return ans
    if s.startswith("$") and s.endswith("$.") and len(s) > 2:  # "$x$." as written at a sentence end
        s = s[:-1]
    if s.startswith("$") and s.endswith("$") and len(s) > 1:
        s = s.strip("$").strip()
    return s or None
