"""Answer extraction is linear on any text: property tests against a plain reference on small
texts, hostile megabyte texts under a CPU-time bound.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bad_input import (
    MB,
    score,
    write_jsonl,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2c.rewards.extract import (
    MAX_BOX_CHARS,
    boxed_contents,
    extract_answer,
    last_boxed,
    matching_braces,
    reference_answer,
)
from e2c.rewards.mcq import extract_choice


# ------------------------------------------------------------------------------- extraction: linear time
def reference_boxes(text: str) -> list[str]:
    """The plain definition, one box at a time (quadratic on nested boxes): what the fast one must return."""
    out = []
    for m in re.finditer(r"\\?(?:boxed|fbox)\b", text):
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            depth, k = 0, j
            while k < len(text):
                if text[k] == "\\":
                    k += 2
                    continue
                depth += {"{": 1, "}": -1}.get(text[k], 0)
                if depth == 0:
                    break
                k += 1
            content = text[j + 1 : k].strip() if k < len(text) and k - j - 1 <= MAX_BOX_CHARS else ""
        elif j > m.end() and m.group(0).startswith("\\"):
            tail = re.match(r"[^\s$]*", text[j:]).group(0)
            content = tail.rstrip(".,;") if len(tail) <= MAX_BOX_CHARS else ""
        else:
            content = ""
        if content:
            out.append(content)
    return out


def reference_braces(text: str) -> dict[int, int]:
    pairs, stack, i = {}, [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


PIECES = [
    "\\boxed{",
    "boxed{",
    "\\fbox{",
    "\\boxed ",
    "\\boxed\t",
    "{",
    "}",
    "\\",
    "\\{",
    "\\}",
    "\\\\",
    "1",
    "x",
    " ",
    "\n",
    "\x00",
    ".",
    ",",
    "$",
    "🙂",
    "\ud800",
    "The answer is ",
    "#### 4",
    "(B)",
]
small_texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=60).map("".join),
)
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(small_texts, st.integers(1, 5))
def test_boxes_agree_with_the_plain_reference(text: str, last: int) -> None:
    ref = reference_boxes(text)
    assert boxed_contents(text) == ref
    assert boxed_contents(text, last=last) == ref[-last:]
    assert last_boxed(text) == (ref[-1] if ref else None)
    assert matching_braces(text) == reference_braces(text)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 300), st.sampled_from(["\\boxed{", "boxed{", "\\fbox{", "\\boxed{x", "\\boxed{\\{"]))
def test_nested_boxes_agree_with_the_reference(depth: int, opener: str) -> None:
    text = opener * depth + "7" + "}" * depth
    assert boxed_contents(text) == reference_boxes(text)


def test_only_the_last_boxes_are_returned() -> None:
    text = " ".join(f"\\boxed{{{i}}}" for i in range(1500))
    assert boxed_contents(text) == reference_boxes(text)[-1000:] == [str(i) for i in range(500, 1500)]
    assert boxed_contents(text, last=2) == ["1498", "1499"] and boxed_contents(text, last=0) == []


def _tower(depth: int, opener: str = "\\boxed{") -> str:
    return opener * depth + "1" + "}" * depth


HOSTILE = {
    # name: (text, last_boxed's answer)
    "nested_boxes_50k": (_tower(50_000), "1"),
    "nested_boxes_5k": (_tower(5_000), "1"),
    "unclosed_boxes_50k": ("\\boxed{" * 50_000 + "1", None),
    "towers_of_1400_boxes_1mb": (_tower(1400) * (MB // len(_tower(1400))), "1"),
    "towers_without_backslash_1mb": (_tower(1666, "boxed{") * (MB // len(_tower(1666, "boxed{"))), "1"),
    "open_braces_1mb": ("\\boxed{" + "{" * MB, None),
    "close_braces_1mb": ("}" * MB + "\\boxed{2}", "2"),
    "brace_pairs_1mb": ("\\boxed{" + "{}" * (MB // 2) + "}", None),  # longer than MAX_BOX_CHARS
    "backslashes_1mb": ("\\" * MB + "\\boxed{3}", "3"),
    "escaped_braces_1mb": ("\\boxed{" + "\\{" * (MB // 2), None),
    "null_bytes_1mb": ("\x00" * MB + "\\boxed{4}", "4"),
    "boxes_1mb": ("\\boxed{1}" * (MB // 9) + "\\boxed{5}", "5"),
    "bare_boxes_1mb": ("\\boxed 1 " * (MB // 9), "1"),
    "unbalanced_1mb": ("\\boxed{6}" + "}" * (MB // 2) + "{" * (MB // 2), "6"),
    "letters_1mb": ("a" * MB, None),
}
CPU_BOUND = 2.0  # seconds of this process's CPU for one call on a megabyte (measured: well under 1 s)


@pytest.mark.parametrize("name", HOSTILE, ids=str)
def test_extraction_is_linear_on_hostile_text(name: str) -> None:
    text, expected = HOSTILE[name]
    calls: dict[str, Callable[[], object]] = {
        "last_boxed": lambda: last_boxed(text),
        "boxed_contents": lambda: boxed_contents(text),
        "extract_answer": lambda: extract_answer(text, fallback_number=True),
        "reference_answer": lambda: reference_answer(text),
        "extract_choice": lambda: extract_choice(text, {"A": "x", "B": "y"}),
    }
    got = {}
    for fn, call in calls.items():
        # CPU time of this process: other jobs on a shared machine do not count against the bound.
        t = time.process_time()
        got[fn] = call()
        secs = time.process_time() - t
        assert secs < CPU_BOUND, f"{fn} on {name} took {secs:.2f} s of CPU"
    assert got["last_boxed"] == expected
    boxes = got["boxed_contents"]
    assert len(boxes) <= 1000 and all(len(b) <= MAX_BOX_CHARS for b in boxes)
    assert (boxes[-1] if boxes else None) == expected


def test_score_cli_on_50k_nested_boxes_is_fast(tmp_path: Path) -> None:
    # The report: 50,000 nested boxes hung the scorer, 5,000 took 5.4 s with --timeout 2.
    rows = [{"response": _tower(n), "answer": "1"} for n in (5_000, 50_000)]
    rows.append({"response": HOSTILE["towers_of_1400_boxes_1mb"][0], "answer": "B"})
    inp = write_jsonl(tmp_path / "nested.jsonl", *rows)
    for kind in ("math", "mcq"):
        t = time.perf_counter()
        r = score(inp, "--timeout", "2", "--kind", kind)
        secs = time.perf_counter() - t
        assert r.returncode == 0, r.stderr[-2000:]
        summary = json.loads(r.stdout.splitlines()[-1])
        assert summary["n"] == 3 and summary["error"] == 0 and summary["timeout"] == 0
        assert summary["correct"] == (2 if kind == "math" else 0)
        assert secs < 20, f"{kind}: {secs:.1f} s"
