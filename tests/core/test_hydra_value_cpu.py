"""``e2c.launch.checks.hydra_value``: whatever text it is given, Hydra reads the override back as that same
string (paths, environment variables for ray), including texts Hydra would otherwise read as a number, a
bool or null."""

from __future__ import annotations

import string

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.core.errors import UserError
from e2c.launch.checks import hydra_value

PARSER = OverridesParser.create()


def read_back(value: str):
    [override] = PARSER.parse_overrides([f"key={value}"])
    return override.value()


@pytest.mark.parametrize(
    "text",
    ["4", "-1", "1_000", "1.5", ".5", "1e5", "inf", "-nan", "true", "False", "null", "0x10", "run-1", "a:b"],
)
def test_number_bool_and_null_texts_stay_strings_cpu(text: str) -> None:
    assert read_back(hydra_value(text)) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + "_./:+@%~-", min_size=1, max_size=12))
def test_any_plain_text_reads_back_as_itself_cpu(text: str) -> None:
    value = hydra_value(text)
    got = read_back(value)
    assert isinstance(got, str) and got == text, (text, value, got)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_any_text_reads_back_or_is_refused_in_one_line_cpu(text: str) -> None:
    try:
        value = hydra_value(text)
    except UserError as e:
        assert "\n" not in str(e)
        return
    assert read_back(value) == text.replace("${", "\\${")
