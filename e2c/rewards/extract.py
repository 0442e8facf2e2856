"""Answer extraction from free text: boxed expressions, GSM8K ``####``, "final answer is ..." phrases.

Pure string functions; none of them raises on model output. Multiple-choice letters live in
:mod:`e2c.rewards.mcq`.
"""

from __future__ import annotations

import re
from typing import Any

_BOX_RE = re.compile(r"\\?(?:boxed|fbox)\b")
_BARE_BOX_TAIL = re.compile(r"[^\s$]+")

# Longest box content kept: a final answer is short; a megabyte "answer" is not one, and slicing every
# nested box of a hostile text would copy it quadratically.
MAX_BOX_CHARS = 10_000
# Most boxes :func:`boxed_contents` returns (the last ones): a response has a few; a hostile text of
# nested boxes has one per level, and copying each is quadratic.
MAX_BOXES = 1000


def matching_braces(text: str) -> dict[int, int]:
    """``{open index: close index}`` for every balanced brace pair, in one linear pass.

    A backslash escapes the next character (``\\{`` is not a brace), as in LaTeX. Unbalanced braces
    are left out.
    """
    pairs: dict[int, int] = {}
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    # One regex step per brace or escape pair: plain text is skipped inside the regex engine, and an
    # escape pair is consumed whole, so its second character is never read as a brace.
    for m in _BRACE_TOKENS.finditer(text):
        c = m.group()
        if c == "{":
            push(m.start())
        elif c == "}" and stack:
            pairs[pop()] = m.start()
    return pairs


_BRACE_TOKENS = re.compile(r"\\.|[{}]", re.DOTALL)


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the contents of every complete box, in order of the box.

    Linear in the text (one regex pass and one brace pass); see :func:`boxed_contents` for what counts.
    """
    if "boxed" not in text and "fbox" not in text:
        return []
    pairs: dict[int, int] | None = None
    out: list[tuple[int, int]] = []
    n = len(text)
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < n and text[j] in " \t":
            j += 1
        if j < n and text[j] == "{":
            if pairs is None:
                pairs = matching_braces(text)
            k = pairs.get(j)
            if k is not None:
                out.append((j + 1, k))
        elif j > m.end() and m.group(0).startswith("\\"):
            tail = _BARE_BOX_TAIL.match(text, j)
            if tail:
                out.append((tail.start(), tail.end()))
    return out


def _box_text(text: str, span: tuple[int, int]) -> str | None:
    s, e = span
    if e - s > MAX_BOX_CHARS:
        return None
    content = text[s:e].strip()
    if s > 0 and text[s - 1] != "{":  # the brace-less form: "\\boxed 5."
        content = content.rstrip(".,;")
    return content or None


def boxed_contents(text: str, last: int = MAX_BOXES) -> list[str]:
    """Contents of the last ``last`` complete ``\\boxed{...}`` / ``\\fbox{...}`` boxes, in order of the
    box, nested braces kept.

    Also accepts ``boxed{...}`` without a backslash (the release prompt spells it that way, and models
    copy it) and the brace-less ``\\boxed 5``. An unclosed box (a truncated answer), an empty box and a
    box longer than :data:`MAX_BOX_CHARS` are skipped. Linear in the text: at most ``last`` contents of
    at most :data:`MAX_BOX_CHARS` each are copied (every nested box of a hostile text would be
    quadratic).
    """
    out: list[str] = []
    if last <= 0:
        return out
    for span in reversed(boxed_spans(text)):
        c = _box_text(text, span)
        if c is not None:
            out.append(c)
            if len(out) >= last:
                break
    out.reverse()
    return out


def last_boxed(text: str) -> str | None:
    """The content of the last complete boxed expression, or None (reads only that one box)."""
    for span in reversed(boxed_spans(text)):
        c = _box_text(text, span)
        if c is not None:
            return c
    return None


_GSM_RE = re.compile(r"####\s*+([^\n]+)")  # possessive: no backtracking over long blank runs


def gsm8k_answer(text: str) -> str | None:
    """The answer after the last ``####`` marker (GSM8K's reference format), or None.

    Only a single token that is not a plain word counts (``#### 42``, ``#### 1,000``, ``#### x=5``): a
    Markdown heading (``#### 2. Solve the system``, ``#### Conclusion``) is not an answer.
    """
    for found in reversed(_GSM_RE.findall(text)):
        ans = found.strip().rstrip(".")
        if ans and len(ans.split()) == 1 and not ans.isalpha():
            return ans
    return None


# The phrase's head only; where the answer ends is found by hand below. (A lazy ``(.+?)\s*(?:$|\n|\.)``
# backtracks quadratically over a long run of spaces.)
_PHRASE_RE = re.compile(
    r"(?:final\s++answer|the\s++(?:correct\s++)?answer)\s*+(?:is|:|=)\s*+:?\s*+", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
MAX_PHRASE_CHARS = 500


def final_answer_phrase(text: str) -> str | None:
    """The answer in the last "final answer is X" / "the answer is X" / "Final Answer: X", or None.

    The answer runs to the end of its sentence (a period followed by a space or the end, or a newline),
    at most :data:`MAX_PHRASE_CHARS` characters.
    """
    last = None
    for last in _PHRASE_RE.finditer(text):  # noqa: B007 - only the last match is wanted
        pass
    if last is None:
        return None
    start = last.end()
    window = text[start : start + MAX_PHRASE_CHARS + 2]
    end = _SENTENCE_END.search(window)
    ans = (window[: end.start()] if end else window[:MAX_PHRASE_CHARS]).strip()
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
