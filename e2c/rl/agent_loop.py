"""The E2C agent loop: rollouts that start inside the exploration, with optional elastic per-phase budgets.

Registered in verl as ``e2c`` (``actor_rollout_ref.rollout.agent.default_agent_loop=e2c``). The prompt ends
with the format's prefilled opener, part of the prompt, not of the trained response. A single call stops, as
inference does, at the execution's closing tag. With ``e2c.rollout.explore_budget`` > 0 the exploration has
its own budget; a tag the loop writes for the model after a cut is masked out of the loss (response_mask 0),
and an EOS that ended the exploration is dropped with its log-prob, so the policy is never trained on what it
did not sample nor to end its plan with EOS. A row's ``extra_info.max_response_tokens`` caps its response
(the e3 curriculum's per-row budget). Per-sample extras: ``explore_tokens``, ``execute_tokens``,
``forced_close``.
More: docs/training.md, "RL on verl: GRPO, DAPO, the e3 curriculum".
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.utils.profiler import simple_timer

from e2c.chain import get_format, written_after_exploration
from e2c.chain.budget import PhaseBudget, from_config
from e2c.generation.base import eos_ids  # also imported from here by e2c.rl.reward
from e2c.rl import registry
from e2c.rl.settings import e2c_settings

logger = logging.getLogger(__name__)

AGENT_LOOP_NAME = "e2c"


def row_budget(extra_info: Any, response_length: int) -> int:
    """The response budget of one row: ``extra_info.max_response_tokens`` capped by ``response_length``."""
    value = extra_info.get("max_response_tokens") if isinstance(extra_info, dict) else None
    if value is None or int(value) <= 0:
        return response_length
    return min(int(value), response_length)


def join_phases(
    explore_ids: list[int],
    explore_lps: list[float] | None,
    boundary_id: int,
    bridge_ids: list[int],
    execute_ids: list[int],
    execute_lps: list[float] | None,
    stop_ids: Collection[int] = (),
) -> tuple[list[int], list[int], list[float] | None, bool]:
    """Response ids, loss mask and log-probs of a two-phase rollout.

    What is written for the model after the exploration follows the chain format's one rule
    (:func:`e2c.chain.written_after_exploration`, as inference and TTS write it): when the exploration does
    not end with ``boundary_id`` (cut by its budget or an EOS) the boundary, then ``bridge_ids`` (the
    execution's opener, :attr:`e2c.chain.ChainFormat.execute_bridge`). Written tokens get mask 0 and
    log-prob 0.0. An exploration that ended on one of ``stop_ids`` (EOS) loses that token and
    its log-prob: inference (:func:`e2c.generation.chains.generate_chains`) writes the boundary after the
    exploration's text, which has no EOS, so the chain never contains one before the execution. Training on it
    would teach the policy to end its plan with EOS. Returns ``(ids, mask, logprobs, forced)``.
    """
    ids = list(explore_ids)
    lps = list(explore_lps) if explore_lps is not None else None
    if ids and ids[-1] in stop_ids and ids[-1] != boundary_id:
        ids.pop()
        if lps is not None:
            lps = lps[: len(ids)]
    mask = [1] * len(ids)
    forced = not ids or ids[-1] != boundary_id
    added = written_after_exploration(not forced, boundary_id, bridge_ids)
    ids += added
    mask += [0] * len(added)
    if lps is not None:
        lps += [0.0] * len(added)
    ids += execute_ids
    mask += [1] * len(execute_ids)
    if lps is not None:
        lps += list(execute_lps) if execute_lps is not None else [0.0] * len(execute_ids)
    return ids, mask, lps, forced


@functools.lru_cache(maxsize=8)
def model_generation_config(model_path: str | None) -> Any:
    """The model's ``GenerationConfig`` (None when it cannot be read); cached because verl builds an agent loop
    per sample."""
    if not model_path:
        return None
    try:
        from verl.utils.fs import copy_to_local
        from verl.utils.model import get_generation_config

        return get_generation_config(copy_to_local(model_path))
    except Exception as e:  # the tokenizer's EOS still applies; say why the model's own were not read
        logger.warning(
            "no generation config for %s (%s); stopping ids are the tokenizer's EOS only", model_path, e
        )
        return None


@register(AGENT_LOOP_NAME)
class E2CAgentLoop(AgentLoopBase):
    """Single-turn E2C rollout with the opener prefilled and optional elastic exploration budget."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)
        self.settings = e2c_settings(self.config).rollout
        self.fmt = get_format(self.settings.format)
        elastic = from_config(self.settings.explore_budget) is not None  # the config writes "off" as 0
        enc = self.tokenizer.encode
        self.opener_ids = enc(self.fmt.assistant_prefix("full"), add_special_tokens=False)
        boundary = enc(self.fmt.explore_boundary, add_special_tokens=False)
        if elastic and len(boundary) != 1:
            raise ValueError(
                f"elastic budgets need {self.fmt.explore_boundary!r} to be one token of the tokenizer; "
                "train from a model with the E2C tags"
            )
        self.boundary_id = boundary[0] if len(boundary) == 1 else None
        bridge = self.fmt.execute_bridge
        self.bridge_ids = enc(bridge, add_special_tokens=False) if bridge else []
        # Inference stops a chain at the execution's closing tag (ChainFormat.stop_strings); so does the rollout,
        # by id when the tag is one token (the release's special tokens). Text formats run to EOS or the budget.
        close = enc(self.fmt.execute_close, add_special_tokens=False) if self.fmt.execute_close else []
        self.close_stop = close if len(close) == 1 else []
        model_path = (self.config.get("actor_rollout_ref", None) or {}).get("model", {}).get("path", None)
        self.eos_ids = (
            eos_ids(self.tokenizer, model_generation_config(model_path)) if elastic else frozenset()
        )

    async def _generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], **extra: Any) -> Any:
        params = dict(sampling_params)
        params.update(extra)
        return await self.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=params
        )

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        prompt_ids = await self.ct_build_initial_tokens(messages) + self.opener_ids
        if len(prompt_ids) > int(self.rollout_config.prompt_length):
            raise ValueError(
                f"prompt of {len(prompt_ids)} tokens (with the {len(self.opener_ids)}-token opener) exceeds "
                f"rollout.prompt_length={self.rollout_config.prompt_length}; raise data.max_prompt_length"
            )
        metrics: dict[str, Any] = {}
        cap = row_budget(kwargs.get("extra_info"), self.response_length)
        # The response length (a row may lower it) bounds the whole chain: the phases are cut, not refused.
        budget = PhaseBudget(
            cap,
            from_config(self.settings.explore_budget),
            from_config(self.settings.execute_budget),
            capped=True,
        )
        with simple_timer("generate_sequences", metrics):
            requested = [int(t) for t in sampling_params.get("stop_token_ids") or ()]
            if not budget.two_phase:
                out = await self._generate(
                    prompt_ids, sampling_params, max_tokens=cap, stop_token_ids=[*requested, *self.close_stop]
                )
                ids = list(out.token_ids)[:cap]
                mask = [1] * len(ids)
                lps = list(out.log_probs)[: len(ids)] if out.log_probs else None
                explore_n = ids.index(self.boundary_id) + 1 if self.boundary_id in ids else len(ids)
                forced = False
                extra_fields = dict(out.extra_fields)
            else:
                first = await self._generate(
                    prompt_ids,
                    sampling_params,
                    max_tokens=budget.explore_limit,
                    stop_token_ids=[*requested, self.boundary_id],
                )
                explore_ids = list(first.token_ids)
                if self.boundary_id in explore_ids:  # keep up to the first boundary
                    explore_ids = explore_ids[: explore_ids.index(self.boundary_id) + 1]
                # An EOS that ended the exploration is dropped from the execution's prompt and the response.
                stops = self.eos_ids | set(requested)
                head, head_mask, _, forced = join_phases(
                    explore_ids, None, self.boundary_id, self.bridge_ids, [], None, stops
                )
                exec_budget = budget.execute_limit(explored=len(head))
                exec_ids: list[int] = []
                exec_lps = None
                if exec_budget > 0:
                    second = await self._generate(
                        prompt_ids + head,
                        sampling_params,
                        max_tokens=exec_budget,
                        stop_token_ids=[*requested, *self.close_stop],
                    )
                    exec_ids = list(second.token_ids)[:exec_budget]
                    exec_lps = list(second.log_probs)[: len(exec_ids)] if second.log_probs else None
                first_lps = list(first.log_probs)[: len(explore_ids)] if first.log_probs else None
                ids, mask, lps, forced = join_phases(
                    explore_ids, first_lps, self.boundary_id, self.bridge_ids, exec_ids, exec_lps, stops
                )
                if first.log_probs is None or (exec_ids and exec_lps is None):
                    lps = None
                # Sampled exploration tokens (with the boundary when the model wrote it).
                explore_n = sum(head_mask)
                extra_fields = dict(first.extra_fields)
        extra_fields.update(
            {
                "explore_tokens": explore_n,
                "execute_tokens": sum(mask) - min(explore_n, sum(mask)),
                "forced_close": forced,
                "turn_scores": [],
                "tool_rewards": [],
            }
        )
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=ids[:cap],
            response_mask=mask[:cap],
            response_logprobs=lps[:cap] if lps is not None else None,
            num_turns=2,
            metrics=metrics,
            extra_fields=extra_fields,
        )


# Last statement: this module is complete, its registrations ran; resumes a deferred plugin registration.
registry.provided(__name__, f"agent_loop:{AGENT_LOOP_NAME}")
