"""The E2C reward manager for verl's reward loop (``reward.reward_manager.name=e2c``).

verl's ``naive`` and ``dapo`` managers decode responses with ``skip_special_tokens=True``, which deletes the
E2C tags (they are special tokens): every chain then parses as untagged, the format metrics read zero and the
plan-adherence bonus cannot find the plan. This manager decodes with the tags kept (pad and EOS removed) and
grades with the project's grader through :func:`e2c.rewards.verl_score.compute_score` (enforced timeouts),
unless ``reward.custom_reward_function`` names another function.

Overlong penalty (DAPO's soft overlong punishment, also used by the E2C paper's GRPO runs): with
``reward.reward_kwargs.overlong_buffer_cfg.enable`` a response longer than ``max_resp_len - len`` loses up
to ``penalty_factor`` linearly over the buffer (:func:`overlong_penalty`); a row with its own
``extra_info.max_response_tokens`` budget is measured against that budget.

Every response's ``reward_extra_info`` carries the reward's parts: ``acc`` (correctness), ``plan_reward``
(grader score - acc) and ``overlong_reward`` (0.0 when the penalty is off); their sum is the reward. The
trainer logs their per-step means as ``health/reward_*`` (:mod:`e2c.rl.health`).
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from e2c.rewards.verl_score import compute_score as e2c_compute_score
from e2c.rl import registry
from e2c.rl.agent_loop import eos_ids, model_generation_config, row_budget

REWARD_MANAGER_NAME = "e2c"


def overlong_penalty(length: int, max_len: int, buffer_len: int, factor: float) -> float:
    """DAPO's soft overlong penalty: 0 up to ``max_len - buffer_len`` tokens, then falling linearly to
    ``-factor`` at ``max_len`` (and below it beyond)."""
    if buffer_len <= 0:
        return 0.0
    exceed = length - (max_len - buffer_len)
    return min(-exceed / buffer_len * factor, 0.0)


def decode_keep_tags(tokenizer: Any, ids: list[int], drop_ids: Collection[int] = ()) -> str:
    """Decode response ids keeping special tokens (the chain tags) but dropping pad, EOS and ``drop_ids`` (the
    model's other EOS ids, e.g. Qwen3's ``<|endoftext|>`` next to ``<|im_end|>``).

    Inference text never holds an EOS; one kept here would sit after ``</EXECUTION>`` and parse as trailing
    text, so a well-formed chain would be scored as malformed.
    """
    drop = {tokenizer.pad_token_id, tokenizer.eos_token_id, *drop_ids}
    return tokenizer.decode([int(t) for t in ids if int(t) not in drop], skip_special_tokens=False)


@register(REWARD_MANAGER_NAME)
class E2CRewardManager(RewardManagerBase):
    """Tag-preserving reward manager with an optional overlong penalty."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        # verl passes its own default scorer when no custom function is configured; that one does not
        # know E2C data sources, so only a configured function replaces the project's grader.
        custom = (config.reward.get("custom_reward_function", None) or {}).get("path", None)
        self.compute_score = compute_score if (custom and compute_score is not None) else e2c_compute_score
        self.is_async = inspect.iscoroutinefunction(self.compute_score)
        # Every id the rollout stops on (vLLM and the hf server add the generation config's EOS ids).
        model = (config.get("actor_rollout_ref", None) or {}).get("model", None) or {}
        self.eos_ids = eos_ids(tokenizer, model_generation_config(model.get("path", None)))
        kwargs = config.reward.get("reward_kwargs", None) or {}
        self.overlong = kwargs.get("overlong_buffer_cfg", None)
        self.max_resp_len = kwargs.get("max_resp_len", None)
        if (
            self.overlong is not None
            and self.overlong.get("enable", False)
            and (
                not self.max_resp_len
                or int(self.overlong.len) <= 0
                or int(self.overlong.len) > int(self.max_resp_len)
            )
        ):
            raise ValueError(
                "overlong penalty needs 0 < reward.reward_kwargs.overlong_buffer_cfg.len <= "
                f"reward.reward_kwargs.max_resp_len; got len={self.overlong.get('len')}, "
                f"max_resp_len={self.max_resp_len}"
            )

    async def run_single(self, data: DataProto) -> dict:
        item = data[-1:][0]
        response_ids = item.batch["responses"]
        valid_len = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        valid_ids = response_ids[:valid_len].tolist()
        text = await self.loop.run_in_executor(
            None, lambda: decode_keep_tags(self.tokenizer, valid_ids, self.eos_ids)
        )
        kwargs = {
            "data_source": item.non_tensor_batch["data_source"],
            "solution_str": text,
            "ground_truth": item.non_tensor_batch["reward_model"]["ground_truth"],
            "extra_info": item.non_tensor_batch.get("extra_info", {}) or {},
        }
        if self.is_async:
            result = await self.compute_score(**kwargs)
        else:
            result = await self.loop.run_in_executor(None, lambda: self.compute_score(**kwargs))
        if isinstance(result, dict):
            score = float(result["score"])
            info = dict(result)
        else:
            score = float(result)
            info = {"acc": score}
        # The reward's parts, logged per response (e2c.rl.health adds them up per step): correctness (acc),
        # what the grader's score adds to it (with the plan bonus, the plan-adherence deduction of a correct
        # answer; with a custom function, whatever its score is beyond acc) and the overlong penalty (0 when
        # off), so that acc + plan_reward + overlong_reward is the reward.
        if "acc" in info and "plan_reward" not in info:
            try:
                info["plan_reward"] = score - float(info["acc"])
            except (TypeError, ValueError):
                pass
        pen = 0.0
        if self.overlong is not None and self.overlong.get("enable", False):
            # A row with its own budget (e3 curriculum) is penalised against that budget.
            max_len = row_budget(kwargs["extra_info"], int(self.max_resp_len))
            buffer_len = min(int(self.overlong.len), max_len)
            pen = overlong_penalty(valid_len, max_len, buffer_len, float(self.overlong.penalty_factor))
            score += pen
            if self.overlong.get("log", False):
                info["overlong"] = pen < 0
        info["overlong_reward"] = pen
        info["response_tokens"] = valid_len
        return {"reward_score": score, "reward_extra_info": info}


# Last statement: this module is complete, its registrations ran; resumes a deferred plugin registration.
registry.provided(__name__, f"reward_manager:{REWARD_MANAGER_NAME}")
