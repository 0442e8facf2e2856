"""The on/off environment switches (e2c.core.env): one reader, the same words for every switch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from e2c.core.env import SWITCH_OFF, SWITCH_ON, env_switch


@pytest.mark.parametrize("word", [*SWITCH_ON, " TRUE ", "On", "yes\n"])
def test_on_words_cpu(word: str) -> None:
    assert env_switch("X", {"X": word}) is True


@pytest.mark.parametrize("word", [*SWITCH_OFF, " False", "OFF", "\tno"])
def test_off_words_cpu(word: str) -> None:
    assert env_switch("X", {"X": word}) is False


@given(st.text(max_size=40))
def test_anything_else_is_unset_and_never_raises_cpu(text: str) -> None:
    """Against a plain reference: the stripped, lower-cased text decides."""
    word = text.strip().lower()
    expected = True if word in SWITCH_ON else False if word in SWITCH_OFF else None
    assert env_switch("X", {"X": text}) is expected
    assert env_switch("X", {}) is None


def test_every_reader_takes_the_same_words_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toolkit's switches all read through env_switch: "Yes" turns each on, "off" each off."""
    from e2c.commandline.parsing import verbose_env
    from e2c.core import progress
    from e2c.core.models import hub_offline
    from e2c.rl.memory import CHECK_ENV, check_disabled

    for word, on in (("Yes", True), ("off", False)):
        monkeypatch.setenv("E2C_VERBOSE", word)
        monkeypatch.setenv(progress.ENV, word)
        monkeypatch.setenv("HF_HUB_OFFLINE", word)
        monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
        assert verbose_env() is on and progress.enabled() is on and hub_offline() is on
        assert check_disabled({CHECK_ENV: word}) is not on
