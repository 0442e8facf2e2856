"""Two-phase E2C generation with transformers: explore within a budget, then execute within another.

The Elastic Reasoning recipe applied to E2C: generate the exploration with ``max_new_tokens =
explore_budget``, stopping at the exploration boundary; if the budget ran out first, close the
exploration and open the execution ourselves (``forced_close``); then generate the execution with its
own budget. Token counts are of generated tokens only; the forced tags are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from e2c.chain import E2C, ChainFormat


@dataclass(frozen=True)
class ChainOutput:
    """One generated chain."""

    response: str  # the assistant text after the prefilled opening tag, chain tags kept
    explore_tokens: int
    execute_tokens: int
    explore_stop: str  # how the exploration ended: "tag" (the model closed it), "budget" or "eos"
    finish_reason: str  # "stop" (EOS or closing tag) or "length" (execution budget ran out)

    @property
    def forced_close(self) -> bool:
        """The exploration's closing tag was written for the model, not sampled."""
        return self.explore_stop != "tag"


def _stops(tok: Any, fmt: ChainFormat, tag: str) -> tuple[list[int], str]:
    """What ends a phase at ``tag``: EOS plus the tag's id for special-token formats, or the tag as a
    stop string for text formats."""
    ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
    if not tag:
        return ids, ""
    if fmt.special_tokens:
        enc = tok.encode(tag, add_special_tokens=False)
        if len(enc) == 1:
            ids.append(enc[0])
        return ids, ""
    return ids, tag


def _generate(
    model: Any,
    tok: Any,
    prompt: str,
    max_new: int,
    stops: tuple[list[int], str],
    temperature: float,
    top_p: float,
) -> tuple[list[int], bool]:
    import torch

    stop_ids, stop_str = stops
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
    kwargs: dict[str, Any] = {
        "max_new_tokens": max_new,
        "eos_token_id": stop_ids or None,
        "pad_token_id": tok.pad_token_id,
        "do_sample": temperature > 0,
    }
    if temperature > 0:
        kwargs.update(temperature=temperature, top_p=top_p)
    if stop_str:
        kwargs.update(stop_strings=[stop_str], tokenizer=tok)
    with torch.no_grad():
        out = model.generate(**enc, **kwargs)
    new = out[0, enc["input_ids"].shape[1] :].tolist()
    stopped = bool(new) and (new[-1] in stop_ids or bool(stop_str and tok.decode(new).endswith(stop_str)))
    return new, stopped


def _decode(tok: Any, ids: list[int]) -> str:
    """Decode keeping the chain tags (special tokens) but dropping EOS and padding."""
    drop = {tok.eos_token_id, tok.pad_token_id}
    return tok.decode([i for i in ids if i not in drop], skip_special_tokens=False)


def generate_chain(
    model: Any,
    tok: Any,
    problem: str,
    fmt: ChainFormat = E2C,
    explore_budget: int = 256,
    execute_budget: int = 512,
    temperature: float = 0.7,
    top_p: float = 0.95,
    seed: int | None = 0,
    opener: str = "",
) -> ChainOutput:
    """Generate one E2C chain for ``problem`` in two budgeted phases (see the module docstring).

    ``opener`` is text written for the model at the start of its exploration (e.g. the release's usual
    "I need to make a step-by-step plan."), which steers models never trained on the format; it is part
    of the response but not of the token counts.
    """
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    prompt = fmt.render_prompt(tok, problem, "full")
    boundary = fmt.explore_boundary
    ids1, stopped = _generate(
        model, tok, prompt + opener, explore_budget, _stops(tok, fmt, boundary), temperature, top_p
    )
    # Ending the turn (EOS) inside the exploration counts as not closing it: the execution is still asked for.
    eos = stopped and tok.eos_token_id in ids1[-1:]
    explore_stop = "tag" if stopped and not eos else ("eos" if eos else "budget")
    exploration = opener + _decode(tok, ids1)
    if explore_stop != "tag":
        exploration += boundary
    # With an empty explore_close the boundary is execute_open itself; otherwise open the execution.
    head = exploration + (fmt.execute_open if fmt.explore_close else "")
    ids2, stopped = _generate(
        model, tok, prompt + head, execute_budget, _stops(tok, fmt, fmt.execute_close), temperature, top_p
    )
    return ChainOutput(
        head + _decode(tok, ids2), len(ids1), len(ids2), explore_stop, "stop" if stopped else "length"
    )
