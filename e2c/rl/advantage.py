"""Exploration-token advantage weighting (E2C) and per-segment statistics: pure tensor functions.

After GRPO (or DAPO) normalisation every response token carries its sequence's advantage; E2C multiplies the
advantages of the exploration tokens (up to and including the first ``</EXPLORATION>``) by
``e2c.explore_adv_coef``. How is a rule, picked by ``e2c.explore_adv_rule`` from :data:`EXPLORE_ADV_RULES` (as
verl picks its advantage estimator) and added with :func:`register_explore_adv_rule`; the default,
:func:`paper_rule`, weights exploration tokens by ``explore_adv_coef`` and the rest by ``execute_adv_coef``
whatever the sign and stage. A rule must be registered in every process that reads the settings. A response
with no closing tag has no exploration tokens (the mask every rule receives), so it is never weighted as a
plan, and is counted (``untagged``).
More: docs/training.md, "Exploration-advantage weighting"; docs/extending.md, "Weighting rules".
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from e2c.chain import exploration_token_mask
from e2c.core.errors import UserError

# A weighting rule: (advantages, explore_mask, response_mask, *, explore_adv_coef, execute_adv_coef) ->
# weighted advantages, every tensor (B, T). explore_mask is boolean (exploration tokens, never padding);
# response_mask is 1 on trained tokens. The result must be 0 wherever response_mask is 0.
ExploreAdvRule = Callable[..., Any]

EXPLORE_ADV_RULES: dict[str, ExploreAdvRule] = {}  # name -> rule, in registration order
DEFAULT_RULE = "paper"


def register_explore_adv_rule(name: str) -> Callable[[ExploreAdvRule], ExploreAdvRule]:
    """Decorator: register a weighting rule under ``name`` (the value of ``e2c.explore_adv_rule``).

    Registering the same function again is a no-op; another function under a taken name raises
    ``ValueError``, as verl's ``register_adv_est`` does, so two rules never silently share a name.
    """

    def decorator(fn: ExploreAdvRule) -> ExploreAdvRule:
        if EXPLORE_ADV_RULES.get(name, fn) is not fn:
            raise ValueError(f"explore_adv_rule {name!r} is already registered: {EXPLORE_ADV_RULES[name]}")
        EXPLORE_ADV_RULES[name] = fn
        return fn

    return decorator


def explore_adv_rule_names() -> tuple[str, ...]:
    """The registered rules' names, in registration order (``paper`` first)."""
    return tuple(EXPLORE_ADV_RULES)


def get_explore_adv_rule(name: str) -> ExploreAdvRule:
    """The rule registered as ``name``; an unknown name is one :class:`~e2c.core.errors.UserError` line that lists
    the registered rules.

    >>> get_explore_adv_rule("paper") is paper_rule
    True
    """
    if name not in EXPLORE_ADV_RULES:
        close = difflib.get_close_matches(name, list(EXPLORE_ADV_RULES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(
            f"unknown e2c.explore_adv_rule {name!r}{hint}; registered rules: {', '.join(EXPLORE_ADV_RULES)}"
        )
    return EXPLORE_ADV_RULES[name]


def _paper_weights(explore: Any, valid: Any, explore_adv_coef: float, execute_adv_coef: float) -> Any:
    import torch

    weights = torch.where(explore, float(explore_adv_coef), float(execute_adv_coef))
    return weights * valid.float()


@register_explore_adv_rule(DEFAULT_RULE)
def paper_rule(
    advantages: Any,
    explore_mask: Any,
    response_mask: Any,
    *,
    explore_adv_coef: float,
    execute_adv_coef: float = 1.0,
) -> Any:
    """The paper's rule: exploration tokens x ``explore_adv_coef``, every other trained token x
    ``execute_adv_coef``, padding 0. No sign or stage condition: a negative advantage is scaled as a positive
    one, and stage 1 is this rule at coefficient 1.0."""
    weights = _paper_weights(explore_mask, response_mask.bool(), explore_adv_coef, execute_adv_coef)
    return advantages * weights.to(advantages.dtype)


def weight_advantages(
    advantages: Any,
    responses: Any,
    response_mask: Any,
    boundary_id: int,
    explore_adv_coef: float,
    execute_adv_coef: float = 1.0,
    explore_adv_rule: str = DEFAULT_RULE,
) -> tuple[Any, Any]:
    """``advantages`` weighted by the rule ``explore_adv_rule`` (default: the paper's, exploration tokens x
    ``explore_adv_coef``; see :func:`paper_rule`) over the exploration mask of ``responses``.

    Returns ``(weighted, explore_mask)``. Row 0 closes its exploration with the boundary (id 7): its first
    three tokens are doubled, the execution after them is not. Row 1 has no boundary: weight 1.0 throughout.
    Padding (mask 0) gets 0.

    >>> import torch
    >>> adv = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    >>> ids = torch.tensor([[3, 4, 7, 5, 6], [3, 4, 5, 0, 0]])
    >>> mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    >>> weighted, explore = weight_advantages(adv, ids, mask, boundary_id=7, explore_adv_coef=2.0)
    >>> weighted.tolist()
    [[2.0, 2.0, 2.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.0, 0.0]]
    >>> explore.tolist()
    [[True, True, True, False, False], [False, False, False, False, False]]
    """
    rule = get_explore_adv_rule(explore_adv_rule)
    explore = exploration_token_mask(responses, boundary_id, response_mask.bool())
    weighted = rule(
        advantages,
        explore,
        response_mask,
        explore_adv_coef=explore_adv_coef,
        execute_adv_coef=execute_adv_coef,
    )
    return weighted, explore


def positive_only_mask(advantages: Any, response_mask: Any) -> Any:
    """e3's ``only_train_on_positive``: ``response_mask`` with every token of a negative response removed.

    A response is negative when the mean of its advantages over ``response_mask`` is below zero (GRPO gives
    every token of a response the same advantage). Zero-advantage responses (an all-equal group) stay: the
    switch removes negative gradients only. Removing the tokens from the mask, not only zeroing their
    advantages, is what takes them out of the loss: verl aggregates the policy, entropy and KL terms over the
    mask and divides token-mean by its sum, so zeroed-but-masked tokens would still dilute the mean and still
    receive entropy and KL gradients. Same dtype and shape as ``response_mask``.
    """
    mask = response_mask.to(advantages.dtype)
    seq_adv = (advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return response_mask * (seq_adv >= 0).to(response_mask.dtype)[:, None]


def segment_stats(
    responses: Any, response_mask: Any, boundary_id: int, close_id: int | None = None, explore: Any = None
) -> dict[str, float]:
    """Batch statistics of the chain segments: mean exploration and execution tokens, the share of responses
    with no exploration boundary (``untagged``), and the share with the boundary and, when ``close_id`` is
    given, a closing execution tag after it (``well_formed``). ``explore`` is the exploration mask if the
    caller already has it (from :func:`weight_advantages`)."""
    valid = response_mask.bool()
    if explore is None:
        explore = exploration_token_mask(responses, boundary_id, valid)
    n_explore = explore.sum(-1).float()
    n_total = valid.sum(-1).float()
    # Padding is never the boundary; a masked (forced) boundary still closes the exploration.
    tagged = (responses == boundary_id).any(-1)
    out = {
        "explore_tokens_mean": float(n_explore[tagged].mean()) if bool(tagged.any()) else 0.0,
        "execute_tokens_mean": float((n_total - n_explore)[tagged].mean()) if bool(tagged.any()) else 0.0,
        "untagged_share": float((~tagged).float().mean()),
        "explore_token_share": float(n_explore.sum() / n_total.sum().clamp(min=1)),
    }
    if close_id is not None:
        after = valid & ~explore & tagged[:, None]
        closed = ((responses == close_id) & after).any(-1)
        out["well_formed_share"] = float((tagged & closed).float().mean())
    return out


def segment_mean(values: Any, mask: Any) -> float:
    """Mean of ``values`` over ``mask`` (0.0 for an empty mask); e.g. entropy per segment."""
    m = mask.float()
    return float((values.float() * m).sum() / m.sum().clamp(min=1))
