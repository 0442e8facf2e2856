"""Per-phase token counts count generated tokens only.

Text written for the model (an opener such as "I need to make a step-by-step plan.", a forced boundary, the
execution's opening tag) is part of a chain's response but was never generated: it must not be counted,
in any chain format (special-token E2C, text-tag THINK and PLAIN), in full-chain or two-phase generation.
The invariants checked: ``explore_tokens + execute_tokens`` is what the generator generated, and
``explore_tokens`` is the number of generated tokens up to and including the exploration boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from e2c.chain import E2C, PLAIN, THINK, ChainFormat
from e2c.chain.budget import PhaseBudget
from e2c.generation import generate_chains
from e2c.generation.base import (
    DEFAULT_SAMPLING,
    Completion,
    Sampling,
    Usage,
    finish,
    split_stops,
    tokens_until,
)
from e2c.generation.scripted import ScriptedGenerator

OPENER = "I need to make a step-by-step plan."
FORMATS = [E2C, THINK, PLAIN]


def bridge(fmt: ChainFormat) -> str:
    """What the model writes between the plan and the execution: the boundary, then the execution's
    opening tag when the boundary is a closing tag."""
    return fmt.explore_boundary + (fmt.execute_open if fmt.explore_close else "")


def plan_and_rest(fmt: ChainFormat) -> tuple[str, str]:
    """A generated exploration (boundary included) and the rest of a chain, in ``fmt``."""
    return f" First add 2 and 2.{fmt.explore_boundary}", (
        f"{bridge(fmt)[len(fmt.explore_boundary) :]} 2 + 2 = \\boxed{{4}}{fmt.execute_close}"
    )


# ------------------------------------------------------------------------------ scripted backend


@pytest.mark.parametrize("opener", ["", OPENER], ids=["no-opener", "opener"])
@pytest.mark.parametrize("two_phase", [False, True], ids=["full", "two-phase"])
@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_phase_counts_are_generated_tokens_only(fmt: ChainFormat, two_phase: bool, opener: str) -> None:
    plan, rest = plan_and_rest(fmt)
    gen = ScriptedGenerator.from_responses({"2+2": [opener + plan + rest]}, fmt=fmt)
    budgets = {"budget": PhaseBudget(2048, 40, 40) if two_phase else PhaseBudget(80)}
    [[ch]] = generate_chains(gen, ["What is 2+2?"], fmt, opener=opener, **budgets)
    assert ch.response == opener + plan + rest and ch.explore_stop == "tag"
    assert ch.explore_tokens + ch.execute_tokens == gen.usage.generated_tokens
    # The word-level tokenizer splits at word edges, so the plan's own tokens are countable by hand.
    assert ch.explore_tokens == len(gen.tokenizer.encode(plan))


@pytest.mark.parametrize("fmt", [THINK, PLAIN], ids=["think", "plain"])
def test_a_long_opener_leaves_the_execution_its_tokens(fmt: ChainFormat) -> None:
    # An opener longer than the whole generation once left no execution tokens at all.
    opener = "Let me think about this problem very carefully, one small step at a time, before acting."
    gen = ScriptedGenerator.from_responses(
        {"Q": [f"{opener} ok.{fmt.explore_boundary} x = \\boxed{{1}}"]}, fmt=fmt
    )
    [[ch]] = generate_chains(gen, ["Q"], fmt, budget=PhaseBudget(80), opener=opener)
    assert ch.explore_tokens == len(gen.tokenizer.encode(f" ok.{fmt.explore_boundary}"))
    assert ch.execute_tokens == gen.usage.generated_tokens - ch.explore_tokens > 0


def test_an_opener_holding_the_boundary_leaves_no_exploration_tokens() -> None:
    # The written text already closed the exploration: everything generated is execution.
    opener = f"Plan: add.{PLAIN.explore_boundary}"
    gen = ScriptedGenerator(lambda p, j: " 2 + 2 = \\boxed{4}")
    [[ch]] = generate_chains(gen, ["Q"], PLAIN, budget=PhaseBudget(80), opener=opener)
    assert (ch.explore_tokens, ch.execute_tokens) == (0, gen.usage.generated_tokens)


# ------------------------------------------------------------------------------ the tiny model's BPE


class IdsGenerator:
    """A generator that "samples" given token ids (any tokenization, canonical or not) through the real
    completion rules (:func:`e2c.generation.base.finish`), with a real tokenizer."""

    name = "ids"

    def __init__(self, tokenizer, script: Callable[[str], list[int]]) -> None:
        self.tokenizer, self.script, self.usage = tokenizer, script, Usage()

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING
    ) -> list[list[Completion]]:
        tok = self.tokenizer
        stops = split_stops(tok, sampling.stop, [tok.eos_token_id])
        out = [
            [finish(self.script(p), tok.decode, stops, sampling.max_tokens) for _ in range(sampling.n)]
            for p in prompts
        ]
        self.usage.add([len(tok.encode(p, add_special_tokens=False)) for p in prompts], out)
        return out


def char_ids(tok, text: str) -> list[int]:
    """``text`` tokenized one character at a time: a tokenization a model may sample but BPE never makes."""
    return [i for ch in text for i in tok.encode(ch, add_special_tokens=False)]


@pytest.mark.parametrize("opener", ["", OPENER], ids=["no-opener", "opener"])
@pytest.mark.parametrize("fmt", [THINK, PLAIN], ids=["think", "plain"])
def test_full_chain_counts_the_sampled_tokens_on_a_bpe_tokenizer(
    tiny_tok, fmt: ChainFormat, opener: str
) -> None:
    plan, rest = plan_and_rest(fmt)
    plan_ids = char_ids(tiny_tok, plan)  # re-encoding the plan's text would give fewer tokens
    assert len(tiny_tok.encode(plan, add_special_tokens=False)) < len(plan_ids)
    ids = plan_ids + tiny_tok.encode(rest, add_special_tokens=False) + [tiny_tok.eos_token_id]
    gen = IdsGenerator(tiny_tok, lambda p: ids)
    [[ch]] = generate_chains(gen, ["What is 2+2?"], fmt, budget=PhaseBudget(200), opener=opener)
    assert ch.response == opener + plan + rest
    assert (ch.explore_tokens, ch.execute_tokens) == (len(plan_ids), len(ids) - len(plan_ids))
    assert ch.total_tokens == gen.usage.generated_tokens


# ------------------------------------------------------------------------------ the helper


def test_tokens_until_counts_generated_ids_only() -> None:
    from e2c.generation.scripted import ScriptTokenizer

    tok = ScriptTokenizer()
    ids = tok.encode("a b</think> c")
    assert tokens_until(ids, tok.decode, "</think>") == 4  # a, " ", b, </think>
    assert tokens_until(ids, tok.decode, "</think>", written="plan: ") == 4  # written text is free
    assert tokens_until(ids, tok.decode, "</think>", written="x</think>") == 0
    assert tokens_until(ids, tok.decode, "zzz") is None
    # A marker that starts in the written text and ends in the generated one.
    assert tokens_until(tok.encode("ASE: go"), tok.decode, "PHASE:", written="EXECUTION PH") == 2  # ASE, :


# ------------------------------------------------------------------------------ the tiny model itself


@pytest.fixture(scope="module")
def tiny_gen(tiny_path: str):
    from e2c.generation import make_generator

    gen, _ = make_generator("hf", tiny_path, batch_size=4)
    return gen


def reference_explore_tokens(tok, ids: list[int], boundary: str, written: str) -> int:
    """Plain-loop reference: the first k whose generated text (after ``written``) holds the boundary."""
    for k in range(len(ids) + 1):
        if boundary in written + tok.decode(ids[:k], skip_special_tokens=False):
            return k
    return len(ids)


@pytest.mark.parametrize("two_phase", [False, True], ids=["full", "two-phase"])
@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_tiny_model_phase_counts_add_up_to_generated_tokens(
    tiny_gen, fmt: ChainFormat, two_phase: bool
) -> None:
    calls = []
    real = tiny_gen.generate

    def spy(*a, **kw):
        out = real(*a, **kw)
        calls.append(out)
        return out

    tiny_gen.generate = spy
    try:
        before = tiny_gen.usage.generated_tokens
        budgets = {"budget": PhaseBudget(2048, 6, 6) if two_phase else PhaseBudget(12)}
        chains = generate_chains(
            tiny_gen,
            ["What is 2+2?", "Name a prime."],
            fmt,
            2,
            opener=OPENER,
            temperature=1.0,
            seed=0,
            **budgets,
        )
    finally:
        del tiny_gen.generate
    flat = [c for row in chains for c in row]
    assert sum(c.total_tokens for c in flat) == tiny_gen.usage.generated_tokens - before
    firsts = [c for row in calls[0] for c in row]
    for ch, first in zip(flat, firsts, strict=True):
        assert ch.response.startswith(OPENER)
        if two_phase:
            assert ch.explore_tokens == first.num_tokens  # the exploration call's own tokens
        else:
            ref = reference_explore_tokens(tiny_gen.tokenizer, first.token_ids, fmt.explore_boundary, OPENER)
            assert ch.explore_tokens == ref


# ------------------------------------------------------------------------------ TTS methods with an opener


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_tts_explorations_count_the_model_tokens_not_the_opener(fmt: ChainFormat) -> None:
    from e2c.data.registry import Record
    from e2c.tts import TTSSettings, run_method

    plan, rest = plan_and_rest(fmt)
    gen = ScriptedGenerator.from_responses({"2+2": [OPENER + plan + rest]}, fmt=fmt)
    s = TTSSettings(explore_budget=40, execute_budget=40, opener=OPENER, seed=1)
    res = run_method(
        "e2c_sc", gen, Record(id="q", problem="What is 2+2?", answer="4", kind="math"), 2, s, fmt
    )
    assert gen.calls[0]["prompts"][0].endswith(fmt.explore_open + OPENER)  # written, so never counted
    assert res.tokens_by_role["explore"] == 2 * len(gen.tokenizer.encode(plan))
    assert res.generated_tokens == gen.usage.generated_tokens
