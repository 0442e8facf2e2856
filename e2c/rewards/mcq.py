"""Multiple-choice answers: find the chosen letter in a response, normalise the reference letter.

An answer that cannot be read is ``None`` and grades as wrong (the paper's code scored it 0.25).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from e2c.rewards.extract import boxed_contents, final_answer_phrase

LETTERS = "ABCDEFGHIJ"

# An explicit answer statement: "the answer is (B)", "Answer: B", "correct option is B", "I choose B".
# A bare mention ("Option A is wrong because ...") or a list header ("Answer choices: A. ...", "options:")
# is not an answer and never counts; a hedge ("A/B", "A or B", "(A)(B)") is no statement either.
# Quantifiers are possessive so that long runs of spaces or brackets cannot make the search quadratic.
_STATEMENT = re.compile(
    r"(?:\b(?i:answer)\s*+(?i:is|:|=|would\s++be|should\s++be|will\s++be)"
    r"|\b(?i:option|choice)\s*+(?i:is|would\s++be|should\s++be|will\s++be)"
    r"|\b(?i:choose|select|pick|go\s++with))"
    r"\s*+:?\s*+(?i:option\s++|choice\s++)?[\(\[\*]*+\s*+([A-J])\s*+[\)\]\*]*+"
    r"(?![A-Za-z0-9\-/])(?!\s*+(?:/|,|&|\bor\b|\band\b|\(|\[)\s*+[\(\[]?[A-J](?![A-Za-z0-9]))"
)
_OPTION_LINE = re.compile(r"^\s*[\(\[]?[A-J][\)\].:]\s+\S")
MAX_LINE_CHARS = 2000
_BARE = re.compile(r"^[\(\[\*\s]*([A-J])\s*[\)\]\*]*\s*[.:)]?\s*(.*)$", re.DOTALL)
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")


def _norm_text(s: str) -> str:
    s = _TEXT_WRAP.sub(r"\1", s)
    s = re.sub(r"[^a-z0-9 ]+", " ", s.lower())
    return " ".join(s.split())


def _norm_exact(s: str) -> str:
    return " ".join(_TEXT_WRAP.sub(r"\1", s).lower().split()).rstrip(".")


def _letter_of(s: str, valid: str, options: Mapping[str, str] | None) -> str | None:
    """A letter from a short answer string: ``B``, ``(B)``, ``B.``, ``B. option text``, or option text."""
    s = _TEXT_WRAP.sub(r"\1", s).strip().strip("$").strip()
    s = re.sub(r"^(?i:option|choice)\s+", "", s)
    m = _BARE.match(s)
    if m and m.group(1) in valid:
        rest = m.group(2).strip()
        if not rest or (options and _norm_text(rest) == _norm_text(options.get(m.group(1), ""))):
            return m.group(1)
    if options:
        # Exact text first (symbols such as + - < matter in medical options), then a looser match.
        for norm in (_norm_exact, _norm_text):
            t = norm(s)
            hits = [k for k, v in options.items() if t and norm(str(v)) == t]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                return None
    return None


def extract_choice(
    text: str, options: Mapping[str, str] | None = None, letters: str | None = None
) -> tuple[str | None, str]:
    """The chosen option letter in a response, and how it was found.

    Recognised, in order: the last boxed answer (``\\boxed{B}``, ``\\boxed{(B)}``, ``\\boxed{\\text{B}}``,
    ``\\boxed{B. text}`` or the option's text), the last explicit answer statement ("the answer is (B)",
    "Answer: B", "the correct option is B", "I choose B"), a response that is only a letter (``B``,
    ``(B)``, ``B.``), and a final line that is a letter or an option's text. A statement wins over any
    later mention of an option ("The answer is D. Option A is wrong because ..." is D); a mention alone
    is never read as an answer. Returns ``(letter, method)``; ``(None, "none")`` when nothing reliable
    is found.
    """
    if not isinstance(text, str):
        return None, "none"
    valid = letters or ("".join(options) if options else LETTERS)
    # Boxes from the last one back; a hostile text with thousands of boxes is cut at 50.
    for box in reversed(boxed_contents(text, last=50)):
        got = _letter_of(box, valid, options)
        if got:
            return got, "boxed"
    last = None
    for m in _STATEMENT.finditer(text):
        if m.group(1) in valid:
            last = m.group(1)
    if last is not None:
        return last, "phrase"
    stated = final_answer_phrase(text)  # "the answer is Heparin": a statement naming an option's text
    if stated is not None and options:
        got = _letter_of(stated, valid, options)
        if got:
            return got, "phrase"
    got = _letter_of(text, valid, options) if len(text.strip()) <= 200 else None
    if got:
        return got, "bare"
    lines = [ln for ln in text.strip().splitlines()[-50:] if ln.strip()]
    # A last line that restates one option of a list ("C. Warfarin" after "B. Heparin") is an echo of the
    # options (or a truncated list), not a choice.
    echo = len(lines) >= 2 and bool(_OPTION_LINE.match(lines[-1])) and bool(_OPTION_LINE.match(lines[-2]))
    if lines and len(lines[-1]) <= MAX_LINE_CHARS and not echo:
        got = _letter_of(lines[-1], valid, options)
        if got:
            return got, "last_line"
    return None, "none"


def reference_choice(gold: object, options: Mapping[str, str] | None = None) -> str | None:
    """The reference letter: a letter as given (``"C"``, ``"(C)"``), an index (0 -> A), or option text."""
    if gold is None:
        return None
    if isinstance(gold, int) and not isinstance(gold, bool):
        return LETTERS[gold] if 0 <= gold < len(LETTERS) else None
    s = str(gold).strip()
    m = re.fullmatch(r"[\(\[]?([A-J])[\)\]]?\.?", s)
    if m:
        return m.group(1)
    if options:
        return _letter_of(s, "".join(options), options)
    return None
