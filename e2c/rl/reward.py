"""The E2C reward manager for verl's reward loop (``reward.reward_manager.name=e2c``).

verl's own managers decode with ``skip_special_tokens=True``, which deletes the E2C tags; this one keeps them
(pad and EOS removed) and grades with :func:`e2c.rewards.verl_score.compute_score`, unless
``reward.custom_reward_function`` names another function. It applies DAPO's overlong penalty
(:func:`overlong_penalty`, against a row's own budget when it has one), and every response's
``reward_extra_info`` carries the reward's parts, ``correct_reward``, ``plan_reward`` and ``overlong_reward``,
whose sum is the reward. Reward options (``plan_bonus``, ``require_format``, ``format_credit``,
``code_reward``) bind to the grader as verl binds them to a named function, winning over a row's
``extra_info``. Code rows run on threads of their own (:func:`code_pool`), bounded by the sandbox's slots, so
they never hold the threads that grade other rows; results do not depend on timing.
More: docs/training.md, "Code rewards".
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from e2c.rewards.shape import overlong_problem
from e2c.rewards.verl_score import CODE_REWARD_KEY, code_reward_mode, runs_programs
from e2c.rewards.verl_score import compute_score as e2c_compute_score
from e2c.rl import registry
from e2c.rl.agent_loop import eos_ids, model_generation_config, row_budget
from e2c.sandbox import workers_setting

REWARD_MANAGER_NAME = "e2c"

_code_pool: ThreadPoolExecutor | None = None
_code_pool_lock = threading.Lock()


def code_pool() -> ThreadPoolExecutor:
    """The process's threads for rows whose answer runs in the sandbox, built once: as many as
    :func:`e2c.sandbox.slots` lets run at once (:func:`e2c.sandbox.workers_setting`), so no thread waits on a
    slot while another could run, and a slow batch of programs never starves the default executor."""
    global _code_pool
    with _code_pool_lock:
        if _code_pool is None:
            _code_pool = ThreadPoolExecutor(max_workers=workers_setting(), thread_name_prefix="e2c-code")
        return _code_pool


def with_reward_kwargs(fn: Callable[..., Any], reward_kwargs: Mapping[str, Any]) -> Callable[..., Any]:
    """``fn`` with ``reward_kwargs`` merged into every call, winning over the caller's keywords (verl's rule
    for a configured function's ``reward_kwargs``)."""
    bound = dict(reward_kwargs)
    if not bound:
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **{**kwargs, **bound})

    return call


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
        fn_cfg = config.reward.get("custom_reward_function", None) or {}
        reward_kwargs = fn_cfg.get("reward_kwargs", None) or {}
        # Checked once here, not per response inside a reward worker.
        code_reward_mode(reward_kwargs.get("code_reward"), CODE_REWARD_KEY)
        custom = fn_cfg.get("path", None)
        self.compute_score = (
            compute_score
            if (custom and compute_score is not None)
            # verl binds reward_kwargs only to a configured function: without one (stage 1) they would be
            # silently ignored.
            else with_reward_kwargs(e2c_compute_score, reward_kwargs)
        )
        self.is_async = inspect.iscoroutinefunction(self.compute_score)
        # Every id the rollout stops on (vLLM and the hf server add the generation config's EOS ids).
        model = (config.get("actor_rollout_ref", None) or {}).get("model", None) or {}
        self.eos_ids = eos_ids(tokenizer, model_generation_config(model.get("path", None)))
        kwargs = config.reward.get("reward_kwargs", None) or {}
        self.overlong = kwargs.get("overlong_buffer_cfg", None)
        self.max_resp_len = kwargs.get("max_resp_len", None)
        if why := overlong_problem(kwargs):
            raise ValueError(why)

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
            pool = code_pool() if runs_programs(kwargs["data_source"], kwargs["extra_info"]) else None
            result = await self.loop.run_in_executor(pool, lambda: self.compute_score(**kwargs))
        if isinstance(result, dict):
            score = float(result["score"])
            info = dict(result)
        else:
            score = float(result)
            info = {"acc": score}
        # The reward's parts, logged per response (e2c.rl.health adds them up per step): correctness
        # (correct_reward, else acc), what the grader's score adds to it (with the plan bonus, the
        # plan-adherence deduction of a correct answer; with a custom function, whatever its score is beyond
        # acc) and the overlong penalty (0 when off), so that the three add up to the reward.
        correct = info.get("correct_reward", info.get("acc"))
        if correct is not None and "plan_reward" not in info:
            try:
                info["plan_reward"] = score - float(correct)
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
