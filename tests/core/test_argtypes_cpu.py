"""The one set of value types (e2c/commandline/argtypes.py): each accepts exactly what a plain reference rule accepts,
refuses its own bad values, and is named by flag in the toolkit's one-line errors."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from bad_values import NON_UTF8, BadValueContext, bad_values_of
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.commandline.argtypes import (
    EXISTING_DIR,
    EXISTING_FILE,
    INT_MAX,
    MODEL,
    OUTPUT_DIR,
    OUTPUT_FILE,
    TEXT,
    Number,
    at_least,
    finite,
    positive,
    probability,
    whole,
)
from e2c.commandline.flags import check_settings, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError


def reference_accepts(t: Number, text: str) -> bool:
    """The plain rule, written out: parse as the kind, finite, within the bounds, or a special value."""
    try:
        v = int(text.strip()) if t.kind is int else float(text)
    except (ValueError, OverflowError):
        return False
    if not math.isfinite(v):
        return False
    if v in t.special:
        return True
    if t.low is not None and (v <= t.low if t.low_open else v < t.low):
        return False
    return t.high is None or v <= t.high


TYPES = [
    finite(),
    positive(),
    at_least(0.5, 2.0),
    probability(),
    probability(open_zero=True),
    whole(),
    whole(1),
    whole(1, 8),
    whole(1, special=(-1,), meaning="-1: never"),
]
TEXTS = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-0", "0.0", "1_000", " 3 ", "0x10", "1.0", "9" * 5000]),
)


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@settings(max_examples=60, deadline=None)
@given(text=TEXTS)
def test_number_accepts_what_the_reference_accepts_cpu(t: Number, text: str) -> None:
    try:
        v = t.parse(text)
        accepted = True
    except UserError as e:
        accepted = False
        assert "\n" not in str(e) and str(e).startswith("must be ")
    assert accepted == reference_accepts(t, text), (t.name, text)
    if accepted:
        assert isinstance(v, t.kind) and math.isfinite(v)


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_number_refuses_its_own_bad_values_cpu(t: Number, tmp_path: Path) -> None:
    ctx = BadValueContext(str(tmp_path / "f"), str(tmp_path), str(tmp_path))
    bad = bad_values_of(t, ctx)
    assert {"nan", "inf", ""} <= set(bad)
    for text in bad:
        with pytest.raises(UserError):
            t.parse(text)


def test_range_errors_name_the_bounds_and_the_value_cpu() -> None:
    assert str(_err(whole(1), "0")) == "must be >= 1, got 0"
    assert str(_err(whole(1), "1.5")) == "must be a whole number >= 1, got 1.5"
    assert str(_err(positive(), "nan")) == "must be a positive number, got nan"
    assert str(_err(probability(), "2")) == "must be in [0, 1], got 2"
    assert (
        str(_err(whole(1, special=(-1,), meaning="-1: never"), "0")) == "must be >= 1 (or -1: never), got 0"
    )
    assert str(_err(whole(1), "")) == "must be a whole number >= 1, got ''"
    assert whole(1, special=(-1,)).parse("-1") == -1
    assert whole(0).parse(str(INT_MAX)) == INT_MAX
    _err(whole(0), str(INT_MAX + 1))


def _err(t, text: str) -> UserError:
    with pytest.raises(UserError) as e:
        t.parse(text)
    return e.value


def test_parser_names_the_flag_in_one_line(capsys) -> None:
    p = ArgumentParser(prog="prog")
    p.add_argument("--limit", "--lim", type=whole(1))
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--lim", "0"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == "error: --limit must be >= 1, got 0 (see prog --help)\n"
    assert p.parse_args(["--limit", "3"]).limit == 3


def test_plain_argparse_sees_an_argument_type_error() -> None:
    """A type used by a plain argparse parser (a third-party one) still refuses, through argparse's channel."""
    p = argparse.ArgumentParser(exit_on_error=False)
    p.add_argument("--x", type=positive())
    with pytest.raises(argparse.ArgumentError, match="must be a positive number, got -1"):
        p.parse_args(["--x", "-1"])


def test_paths(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert EXISTING_FILE.parse(str(f)) == f
    assert EXISTING_DIR.parse(str(tmp_path)) == tmp_path
    for t, text, needle in [
        (EXISTING_FILE, str(tmp_path), "is a folder"),
        (EXISTING_FILE, str(tmp_path / "no"), "does not exist"),
        (EXISTING_DIR, str(f), "is not a folder"),
        (OUTPUT_DIR, str(f), "exists and is not a folder"),
        (OUTPUT_DIR, str(f / "sub"), "is a file, not a folder"),
        (OUTPUT_DIR, "/proc/e2c-no-such/out", "cannot write in /proc"),
        (OUTPUT_FILE, str(tmp_path), "is a folder"),
        (OUTPUT_FILE, "/proc/e2c-no-such/out", "cannot write in /proc"),
        (OUTPUT_DIR, "", "empty path"),
        (OUTPUT_DIR, "a\0b", "NUL"),
    ]:
        assert needle in str(_err(t, text)), (text, needle)
    out = tmp_path / "new folder é" / "deeper"
    assert OUTPUT_DIR.parse(str(out)) == out and not out.exists()  # checked, nothing created
    assert list(tmp_path.iterdir()) == [f]


def test_output_folder_check_writes_nothing_that_stays(tmp_path: Path) -> None:
    OUTPUT_DIR.parse(str(tmp_path))
    OUTPUT_FILE.parse(str(tmp_path / "x.jsonl"))
    assert list(tmp_path.iterdir()) == []


def test_model_reference(tmp_path: Path) -> None:
    assert MODEL.parse("tiny") == "tiny" and MODEL.parse("owner/name") == "owner/name"
    broken = tmp_path / "m"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (broken / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    (broken / "tokenizer.json").write_text("{}")
    assert "model.safetensors is not a safetensors file" in str(_err(MODEL, str(broken)))
    assert "is a file" in str(_err(MODEL, str(broken / "config.json")))
    assert "unknown model" in str(_err(MODEL, "no such model"))
    assert "empty model" in str(_err(MODEL, ""))


def test_text() -> None:
    assert TEXT.parse("answer") == "answer"
    assert "UTF-8" in str(_err(TEXT, NON_UTF8))
    _err(TEXT, "  ")


def test_settings_declare_and_check_their_values() -> None:
    from dataclasses import dataclass, field

    @dataclass
    class Inner:
        factor: float = field(default=1.0, metadata=setting("a factor", value=positive()))

    @dataclass
    class Outer:
        steps: int = field(default=1, metadata=setting("steps", value=whole(1)))
        inner: Inner = field(default_factory=Inner)

    check_settings(Outer(), "e2c.")
    with pytest.raises(UserError, match=r"^e2c\.inner\.factor must be a positive number, got nan$"):
        check_settings(Outer(inner=Inner(factor=float("nan"))), "e2c.")
    with pytest.raises(UserError, match=r"^e2c\.steps must be >= 1, got 0$"):
        check_settings(Outer(steps=0), "e2c.")
    with pytest.raises(UserError, match=r"^e2c\.steps must be a whole number"):
        check_settings(Outer(steps=1.5), "e2c.")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("t", "accepted", "refused"),
    [
        (finite(), ["-3.5", "0", "1e300"], ["nan", "inf", "-inf", "1e999", "x"]),
        (positive(), ["1e-9", "3"], ["0", "-0", "-1", "nan", "inf"]),
        (at_least(0.5, 2.0), ["0.5", "2"], ["0.49", "2.01", "nan"]),
        (probability(), ["0", "0.5", "1"], ["-0.01", "1.01", "nan"]),
        (probability(open_zero=True), ["1e-9", "1"], ["0", "1.5"]),
        (whole(), ["0", "7"], ["-1", "1.5", "x", str(INT_MAX + 1)]),
        (whole(1), ["1", str(INT_MAX)], ["0", "-1", "1.0", "nan"]),
        (whole(1, 8), ["1", "8"], ["0", "9"]),
        (whole(1, special=(-1,)), ["-1", "1"], ["0", "-2"]),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_each_factory_means_what_its_name_says_cpu(
    t: Number, accepted: list[str], refused: list[str]
) -> None:
    """The factories' ranges, written out (the property test above checks a type against its own fields;
    this pins the fields each factory sets)."""
    for text in accepted:
        t.parse(text)
    for text in refused:
        with pytest.raises(UserError):
            t.parse(text)
