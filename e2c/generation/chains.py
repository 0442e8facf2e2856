"""E2C chains through any :class:`~e2c.generation.base.Generator`, in one call or in two budgeted phases.

Two-phase mode (Elastic Reasoning applied to E2C): every prompt x sample explores for up to ``explore_budget``
tokens; when the budget or an early EOS ends the exploration, the boundary is written for the model
(``forced_close``), following the chain format's one rule; then every chain executes, in one batched call, for
up to ``execute_budget`` tokens. Full mode is one call of ``max_tokens``. Token counts are generated tokens
only: text written for the model (the opener, a forced boundary, the execution's tag) is never counted.
More: docs/generation-and-evaluation.md, "The generator interface".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from e2c.chain import CLOSED_FOR_MODEL, E2C, ChainFormat, exploration_stop
from e2c.chain.budget import PhaseBudget
from e2c.generation.base import Completion, Generator, Sampling, derive_seed, tokens_until


@dataclass(frozen=True)
class ChainResult:
    """One generated chain."""

    response: str  # the assistant text after the prompt's prefilled tag, chain tags kept
    explore_tokens: int
    execute_tokens: int
    explore_stop: str  # how the exploration ended: "tag" (the model closed it), "budget", "eos", "none"
    finish_reason: str  # "stop" or "length" (the last phase ran out of tokens)
    mode: str = "two_phase"  # or "full"

    @property
    def total_tokens(self) -> int:
        return self.explore_tokens + self.execute_tokens

    @property
    def forced_close(self) -> bool:
        """The exploration's boundary tag was written for the model, not sampled."""
        return self.explore_stop in CLOSED_FOR_MODEL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def chain_prompts(tokenizer: Any, problems: Sequence[str], fmt: ChainFormat = E2C) -> list[str]:
    """The full-chain prompt of each problem (chat template, then the prefilled opening tag)."""
    return [fmt.render_prompt(tokenizer, p, "full") for p in problems]


def split_full_tokens(tokenizer: Any, fmt: ChainFormat, c: Completion, written: str = "") -> tuple[int, int]:
    """(exploration, execution) counts of the generated tokens of a single-call chain.

    ``written`` is the text the response starts with that the model did not generate (the opener); it is
    never counted, and when it already holds the exploration boundary every generated token is execution.
    The exploration is every generated token up to and including the boundary: found by id for a
    special-token format, else the fewest sampled ids whose decoded text (after ``written``) reaches it.
    Decoding the sampled ids rather than re-encoding the response keeps the split exact: re-encoding would
    count the opener's tokens and could tokenize the plan differently from how it was sampled.
    """
    boundary = fmt.explore_boundary
    if boundary in written:
        return 0, c.num_tokens
    if fmt.special_tokens:
        ids = tokenizer.encode(boundary, add_special_tokens=False)
        if len(ids) == 1 and ids[0] in c.token_ids:
            k = c.token_ids.index(ids[0]) + 1
            return k, c.num_tokens - k

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)  # the tags stay, as in the completion text

    k = tokens_until(c.token_ids, decode, boundary, written=written)
    if k is None:
        return c.num_tokens, 0
    return k, c.num_tokens - k


DEFAULT_BUDGET = PhaseBudget(2048)  # one call of up to 2048 new tokens


def generate_chains(
    gen: Generator,
    problems: Sequence[str],
    fmt: ChainFormat = E2C,
    n: int = 1,
    *,
    budget: PhaseBudget = DEFAULT_BUDGET,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    opener: str = "",
) -> list[list[ChainResult]]:
    """Per problem, ``n`` chains (see the module docstring).

    ``budget`` (:class:`e2c.chain.budget.PhaseBudget`, checked where it was built): two-phase mode when it has an
    exploration budget, otherwise one call of its ``max_tokens``. ``opener`` is written for the model at the
    start of its exploration (e.g. "I need to make a step-by-step plan.") and steers models never
    trained on the format.
    """
    base = chain_prompts(gen.tokenizer, problems, fmt)
    prompts = [b + opener for b in base]
    sampling = Sampling(n, temperature=temperature, top_p=top_p)  # each phase sets its budget, stop and seed
    if not budget.two_phase:
        full = sampling.replace(
            max_tokens=budget.max_tokens, stop=fmt.stop_strings("full"), seed=derive_seed(seed, "full")
        )
        outs = gen.generate(prompts, full)
        results = []
        for row in outs:
            chains = []
            for c in row:
                response = opener + c.text_with_stop
                k1, k2 = split_full_tokens(gen.tokenizer, fmt, c, written=opener)
                closed = fmt.explore_boundary in response
                chains.append(
                    ChainResult(response, k1, k2, "tag" if closed else "none", c.finish_reason, "full")
                )
            results.append(chains)
        return results

    boundary = fmt.explore_boundary
    explore = sampling.replace(
        max_tokens=budget.explore_limit, stop=fmt.stop_strings("explore"), seed=derive_seed(seed, "explore")
    )
    first = gen.generate(prompts, explore)
    heads, stops, counts, second_prompts = [], [], [], []
    for i, row in enumerate(first):
        for c in row:
            how = exploration_stop(c.stop_reason == boundary, c.finish_reason == "length")
            # The sampled boundary is the completion's stop string; a forced one is written with the opener.
            head = opener + c.text_with_stop + fmt.close_exploration(how == "tag")
            heads.append(head)
            stops.append(how)
            counts.append(c.num_tokens)
            second_prompts.append(base[i] + head)
    execute = sampling.replace(
        n=1,
        max_tokens=budget.execute_limit(),
        stop=fmt.stop_strings("execute"),
        seed=derive_seed(seed, "execute"),
    )
    second = gen.generate(second_prompts, execute)
    flat = [
        ChainResult(h + o[0].text_with_stop, k, o[0].num_tokens, how, o[0].finish_reason)
        for h, how, k, o in zip(heads, stops, counts, second, strict=True)
    ]
    return [flat[i * n : (i + 1) * n] for i in range(len(problems))]
