"""Two-phase generation: budgets, forced closing, prompts of each phase (tiny model)."""

from __future__ import annotations

import pytest

import e2c.generation.hf as hf
from e2c.chain import E2C, PLAIN
from e2c.models import load_model_and_tokenizer


@pytest.fixture(scope="module")
def tiny(tiny_path: str):
    model, tok, _ = load_model_and_tokenizer(tiny_path)
    return model, tok


def test_budgets_and_forced_close(tiny) -> None:
    model, tok = tiny
    out = hf.generate_chain(model, tok, "What is 2+3?", explore_budget=12, execute_budget=20, seed=1)
    assert out.explore_tokens <= 12 and out.execute_tokens <= 20
    p = E2C.parse(out.response)
    assert p.explore_closed and p.has_execution  # closed for the model if it did not close itself
    if out.explore_stop == "budget":
        assert out.explore_tokens == 12 and out.forced_close


def test_phase_prompts(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = tiny
    seen: list[str] = []
    ids_for = {
        0: tok.encode(" plan", add_special_tokens=False),
        1: tok.encode(" done", add_special_tokens=False),
    }

    def fake(model, tok, prompt, max_new, stops, temperature, top_p):
        seen.append(prompt)
        return ids_for[len(seen) - 1], False

    monkeypatch.setattr(hf, "_generate", fake)
    out = hf.generate_chain(model, tok, "Q?", opener="I plan.", explore_budget=5, execute_budget=5)
    base = E2C.render_prompt(tok, "Q?")
    assert seen[0] == base + "I plan."
    assert seen[1] == base + "I plan. plan</EXPLORATION><EXECUTION>"  # the opener appears once
    assert out.response == "I plan. plan</EXPLORATION><EXECUTION> done"
    assert (out.explore_stop, out.finish_reason, out.explore_tokens) == ("budget", "length", len(ids_for[0]))


def test_text_label_format(tiny) -> None:
    model, tok = tiny
    out = hf.generate_chain(model, tok, "Q?", fmt=PLAIN, explore_budget=8, execute_budget=8)
    assert "EXECUTION PHASE:" in out.response
    assert PLAIN.parse(out.response).has_execution
