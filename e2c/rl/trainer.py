"""The E2C trainer: verl's synchronous v1 PPO trainer with exploration-token advantage weighting.

Registered as ``trainer.v1.trainer_mode=e2c_sync``. Everything except the advantage step is verl's: after verl
computes GRPO/DAPO advantages, :meth:`E2CTrainer._compute_advantage` reads the response ids and advantages
back from the transfer queue, weights the exploration span by ``e2c.explore_adv_rule`` (:mod:`e2c.rl.advantage`),
applies e3's ``only_train_on_positive`` (negative-advantage responses leave ``response_mask`` and
``loss_mask``, not only their advantages), writes them back, and logs the ``e2c/*`` segment metrics and the
``health/*`` set (:mod:`e2c.rl.health`; a field the queue lacks skips its metrics, never the step). An update
whose trained tokens all have zero advantage is skipped, so AdamW's momentum does not move the weights.
More: docs/training.md, "Exploration-advantage weighting" and "RL health".
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, register_policy_loss
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.workers.utils.padding import response_to_nested

from e2c.chain import get_format, parse_chain
from e2c.generation.base import eos_ids
from e2c.rl import health, registry
from e2c.rl.advantage import positive_only_mask, segment_mean, segment_stats, weight_advantages
from e2c.rl.agent_loop import model_generation_config
from e2c.rl.memory import hold_freed_pages, release_freed_pages
from e2c.rl.settings import ON_POLICY_LOSS, E2CSettings, e2c_settings

logger = logging.getLogger(__name__)

TRAINER_NAME = "e2c_sync"


@register_policy_loss(ON_POLICY_LOSS)
def on_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> Any:
    """verl's vanilla PPO loss with the old log-probs taken as the current ones, detached.

    With one mini-batch and one PPO epoch the policy that sampled is the policy being updated, so the PPO
    ratio is exactly 1 (the clip never acts) and the gradient is the plain policy gradient; the separate
    forward pass that recomputes old log-probs (``E2CTrainer._compute_old_log_prob``) is then work done
    twice. ``old_log_prob`` is ignored. Only correct on-policy: the launcher selects it only where that
    holds (:func:`e2c.rl.launch.on_policy_overrides`).
    """
    return compute_policy_loss_vanilla(
        log_prob.detach(), log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights
    )


def _padded(nested: torch.Tensor, pad: float = 0) -> torch.Tensor:
    return torch.nested.to_padded_tensor(nested, pad) if nested.is_nested else nested


def _lengths(nested: torch.Tensor) -> list[int]:
    """Per-row lengths of a jagged tensor (every row full length for a plain one)."""
    if nested.is_nested:
        return [int(n) for n in nested.offsets().diff().tolist()]
    return [int(nested.shape[1])] * int(nested.shape[0])


def _tq_fields(batch: Any, names: Sequence[str]) -> dict[str, Any]:
    """The fields ``names`` of ``batch``'s rows from the transfer queue; a field that cannot be read (not
    stored by this run's rollout or reward) is left out, so the metrics that need it are skipped."""
    try:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=list(names))
        return {k: data[k] for k in names if k in data}
    except Exception:
        out = {}
        for k in names:
            try:
                data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=[k])
                if k in data:
                    out[k] = data[k]
            except Exception as e:
                logger.debug("transfer queue field %r not readable: %s", k, e)
        return out


def _reward_info(value: Any) -> dict:
    """``reward_extra_info`` of one row's ``extra_fields`` (a dict, possibly wrapped as NonTensorData)."""
    fields = getattr(value, "data", value)
    info = fields.get("reward_extra_info") if isinstance(fields, dict) else None
    return info if isinstance(info, dict) else {}


class BudgetedReplayBuffer(ReplayBuffer):
    """verl's sync replay buffer with a bound on DAPO's dynamic sampling.

    verl 0.9.1's v1 buffer ignores ``max_num_gen_batches`` and refills filtered groups for as long as it
    takes; with a policy that solves every prompt (or none) a step then never ends. Here a step dispatches
    at most ``budget_prompts`` refill prompts; once they are spent, groups stop being filtered: the step trains on the groups
    it has, identical-accuracy ones included (their GRPO advantages are zero, so they add no gradient), a
    warning says so once per step and ``e2c/filter_budget_exhausted`` is 1 for that step.

    Groups filtered before the budget ran out are gone, and the last refill may have been cut to what the
    budget had left (or to the slots free at that moment), so the groups at hand can be fewer than the batch.
    verl's loop then waits for refills that nothing will dispatch: a step that never ends (seen once in
    .ci/run: a DAPO run waited 80 minutes with no prompt in flight). So once the budget is spent, the
    shortfall is dispatched past it, unfiltered: at most one batch more.
    """

    budget_prompts: int = 0

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        self._e2c_dispatched, self._e2c_exhausted = 0, False
        self._e2c_batch_size = batch_size
        original = self.refill_fn
        self._e2c_refill = original

        def counting_refill(n: int) -> Any:
            # Never dispatch past the budget: verl asks for refills in chunks of up to the in-flight limit.
            if self.budget_prompts:
                n = min(n, self.budget_prompts - self._e2c_dispatched)
            if n <= 0:
                return 0
            self._e2c_dispatched += n
            return original(n)

        self.refill_fn = counting_refill
        try:
            batch, metrics = super().sample(global_steps, partition_id, batch_size)
        finally:
            self.refill_fn = original
        if partition_id != "val" and self.filter_groups_metric is not None:
            metrics["e2c/filter_budget_exhausted"] = float(self._e2c_exhausted)
            metrics["e2c/filter_refill_prompts"] = float(self._e2c_dispatched)
        return batch, metrics

    def _dapo_filtered_keys(self, partition_id: str) -> tuple[set[str], Counter]:
        uids, counts = super()._dapo_filtered_keys(partition_id)
        dispatched = getattr(self, "_e2c_dispatched", 0)
        if not (self.budget_prompts and dispatched >= self.budget_prompts):
            return uids, counts
        if uids and not self._e2c_exhausted:
            logger.warning(
                "DAPO dynamic sampling: %d refill prompts (e2c.max_num_gen_batches) did not yield enough "
                "groups with mixed accuracy; training this step on the groups at hand, %d of them with "
                "identical accuracy (zero advantage)",
                dispatched,
                len(uids),
            )
            self._e2c_exhausted = True
        self._dispatch_shortfall(partition_id)
        return set(), Counter()

    def _dispatch_shortfall(self, partition_id: str) -> None:
        """With the budget spent and filtering off: dispatch what the batch still lacks (groups at hand plus
        groups in flight short of the batch size), in whole generation batches, past the budget."""
        at_hand = len(self.finished_keys[partition_id] | self.failure_keys[partition_id])
        in_flight = len(self.pending_keys[partition_id]) + len(self.running_keys[partition_id])
        short = getattr(self, "_e2c_batch_size", 0) - at_hand - in_flight
        if short <= 0:
            return
        step = max(1, int(self.gen_batch_size or 1))
        short += -short % step
        self._e2c_refill(short)
        self._e2c_dispatched += short


# Seconds between the sync replay buffer's looks for finished rollouts; each look reads the transfer queue's
# metadata, a few milliseconds of the driver's time.
REPLAY_POLL_S = 0.1


@register_trainer(TRAINER_NAME)
class E2CTrainer(PPOTrainerSync):
    """Synchronous PPO/GRPO/DAPO with E2C advantage weighting and segment metrics."""

    def _build_replay_buffer(self) -> Any:
        # verl looks the trainer class up by trainer.v1.trainer_mode but then compares the mode with the
        # literal "sync" to pick sync semantics (replay buffer, dispatch, checkpointed queue state). Under
        # its own registry name this trainer would silently get the async ones (ReplayBufferAsync: stale
        # groups trained, DAPO refills never bounded), so it declares itself sync before anything is built.
        self.trainer_mode = "sync"
        self.parameter_sync_step = self.config.trainer.v1.get("sync", {}).get("parameter_sync_step", 1)
        buffer = super()._build_replay_buffer()
        # verl's sync buffer looks for finished rollouts every 2 s (a constructor default its trainer does not
        # pass on), which ends each step's generation on the next multiple of 2 s, up to 2 s after the
        # rollout's own decoding: a short poll keeps that wait out of every step.
        buffer.poll_interval = REPLAY_POLL_S
        max_batches = self.e2c.max_num_gen_batches
        if type(buffer) is ReplayBuffer and buffer.filter_groups_metric is not None and max_batches > 0:
            # verl built the buffer with its filter settings; only the budget is added, so the instance is
            # kept and its class swapped for the subclass.
            buffer.__class__ = BudgetedReplayBuffer
            buffer.budget_prompts = (max_batches - 1) * int(self.config.data.train_batch_size)
        return buffer

    def _maybe_log_val_generations(self, inputs: list, outputs: list, scores: list) -> None:
        """verl logs a few validation chains (``trainer.log_val_generations``) to the trackers as text; each
        output here also names its parse status (e2c.chain.parse), which says at a glance whether the model
        keeps the chain format. verl picks the samples by input, so the annotation does not change which."""
        if not self.config.trainer.get("log_val_generations", 0):
            return
        fmt = get_format(self.e2c.rollout.format)
        annotated = [
            f"{out}\n\n[e2c] parse status: {parse_chain(out, fmt, prefilled=True).status}, reward {score:.3f}"
            for out, score in zip(outputs, scores, strict=True)
        ]
        super()._maybe_log_val_generations(inputs=inputs, outputs=annotated, scores=scores)

    @functools.cached_property
    def e2c(self) -> E2CSettings:
        """The ``e2c`` settings, read from the composed config once per trainer (the launcher checked them
        before verl started; a config composed elsewhere is checked here, on first use)."""
        return e2c_settings(self.config)

    @functools.cached_property
    def _segment_ids(self) -> tuple[int, int | None]:
        """The token ids that close the exploration and (when set) the execution, looked up once."""
        close = self.e2c.close_token
        return self._token_id(self.e2c.boundary_token), (self._token_id(close) if close else None)

    def _token_id(self, token: str) -> int:
        ids = self.tokenizer.encode(token, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(
                f"{token!r} is not a single token of this model's tokenizer; train from a model with the E2C "
                "tags (the SFT scripts add them) or set e2c.boundary_token"
            )
        return int(ids[0])

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        batch = super()._compute_advantage(batch, metrics)
        cfg = self.e2c
        boundary, close = self._segment_ids
        data = tq.kv_batch_get(
            keys=batch.keys,
            partition_id=batch.partition_id,
            select_fields=["responses", "response_mask", "advantages", "entropy"],
        )
        mask_nt = data["response_mask"]
        responses = _padded(data["responses"]).long()
        mask = _padded(mask_nt)
        adv = _padded(data["advantages"])
        width = min(responses.shape[1], mask.shape[1], adv.shape[1])
        responses, mask, adv = responses[:, :width], mask[:, :width], adv[:, :width]

        weighted, explore = weight_advantages(
            adv, responses, mask, boundary, cfg.explore_adv_coef, cfg.execute_adv_coef, cfg.explore_adv_rule
        )
        train_mask = None
        if cfg.only_train_on_positive:
            # e3's switch: every token of a negative response leaves the loss (mask and advantage both).
            train_mask = positive_only_mask(adv, mask)
            weighted = weighted * train_mask.to(weighted.dtype)

        valid = mask.bool()
        stats = segment_stats(responses, mask, boundary, close, explore=explore)
        out = {f"e2c/{k}": v for k, v in stats.items()}
        out["e2c/explore_adv_coef"] = cfg.explore_adv_coef
        out["e2c/adv_abs_before"] = segment_mean(adv.abs(), valid)
        out["e2c/adv_abs_after"] = segment_mean(weighted.abs(), valid)
        # Realised scale per segment (|after| / |before|); under the paper's rule explore_adv_coef on
        # exploration tokens and execute_adv_coef elsewhere, under another rule whatever it does.
        for name, seg in (("explore", explore), ("execute", valid & ~explore)):
            before = (adv.abs() * seg).sum()
            if float(before) > 0:
                out[f"e2c/adv_scale_{name}"] = float((weighted.abs() * seg).sum() / before)
        if "entropy" in data:
            ent = _padded(data["entropy"])[:, :width]
            out["e2c/entropy_explore"] = segment_mean(ent, explore)
            out["e2c/entropy_execute"] = segment_mean(ent, valid & ~explore)
        if train_mask is not None:
            sampled = valid.any(-1)
            kept = train_mask.bool().any(-1) & sampled
            out["e2c/positive_kept_share"] = float(kept.sum() / sampled.sum().clamp(min=1))
        out.update(self._sampled_entropy(batch, valid, explore))
        metrics.update(out)

        # A step whose trained tokens all have zero advantage carries no policy-gradient signal (every group
        # had equal rewards): _update_actor skips it.
        self._e2c_signal = (
            bool(((weighted != 0) & valid).any())
            if train_mask is None
            else bool(((weighted != 0) & train_mask.bool()).any())
        )
        written = {"advantages": response_to_nested(weighted, mask_nt)}
        if train_mask is not None:
            # verl's actor loss aggregates over response_mask but divides token-mean by the sum of loss_mask
            # (a copy of response_mask the agent loop stored): both must lose the removed tokens. Lengths are
            # kept (the nested offsets of mask_nt), so response-length metrics still count every token.
            kept_nt = response_to_nested(train_mask, mask_nt)
            written["response_mask"] = kept_nt
            written["loss_mask"] = kept_nt
        fields = TensorDict(written, batch_size=len(batch))
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)

    def _update_actor(self, batch: Any, metrics: dict) -> Any:
        """verl's actor update, skipped on a step with nothing to learn.

        When every trained token's advantage is zero (all groups had equal rewards) and the loss has no
        other term (no entropy bonus, no KL loss), the loss is exactly 0 but AdamW would still step: along
        its momentum, with weight decay, at the full learning rate, so an early noisy direction is applied
        again on every empty step. Such a step keeps its rollout, metrics and checkpoint, and logs
        ``health/update_skipped`` 1.0; its weight sync has nothing to send (:meth:`on_step_end`). NaN
        advantages count as signal, so verl's own non-finite guard still sees them.
        """
        actor = self.config.actor_rollout_ref.actor
        other_terms = float(actor.get("entropy_coeff", 0.0) or 0.0) != 0.0 or bool(
            actor.get("use_kl_loss", False)
        )
        skip = not getattr(self, "_e2c_signal", True) and not other_terms
        self._e2c_update_skipped = skip
        metrics[health.UPDATE_SKIPPED] = float(skip)
        if skip:
            logger.warning("step %s: every advantage is zero; the actor update is skipped", self.global_steps)
            return batch
        # jemalloc in the actor workers (CPU runs) keeps the update's freed pages for the update's next
        # tensors, the checkpoint and the weight sync, and gives them all back at the end of the step, before
        # the next rollout (e2c.rl.memory.hold_freed_pages); elsewhere a no-op. e2c.hold_freed_pages=false
        # turns it off.
        if self.e2c.hold_freed_pages:
            self._e2c_holding = True
            self._e2c_on_actor_workers(hold_freed_pages)
        try:
            return super()._update_actor(batch, metrics)
        except BaseException:
            self._e2c_release_pages()
            raise

    def _e2c_release_pages(self) -> None:
        """Give back what :meth:`_update_actor` had the actor workers hold (once per hold)."""
        if getattr(self, "_e2c_holding", False):
            self._e2c_holding = False
            self._e2c_on_actor_workers(release_freed_pages)

    def _e2c_on_actor_workers(self, fn: Any) -> list[Any]:
        """``fn(actor)`` in each actor worker's process (ray's ``__ray_call__``); its results, or [] when the
        worker group has no ray workers or a call fails (logged: an optimisation, never a reason to stop)."""
        workers = list(getattr(getattr(self, "actor_rollout_wg", None), "workers", None) or [])
        if not workers:
            return []
        import ray

        try:
            return ray.get([w.__ray_call__.remote(fn) for w in workers])
        except Exception as e:
            logger.warning("%s in the actor workers failed: %s", getattr(fn, "__name__", fn), e)
            return []

    def on_step_begin(self) -> None:
        self._e2c_update_skipped = False  # set by this step's _update_actor
        super().on_step_begin()

    def on_step_end(self) -> None:
        """verl's weight sync to the rollout, unless this step skipped its update (:meth:`_update_actor`) and
        every replica is the ``hf`` rollout's: its server already holds these very weights, so the full
        gather and push (~4.5 s a step for the embedded model on 2 cores) would change nothing. The servers
        are told the step instead (:meth:`e2c.verl_cpu.hf_rollout.HFRolloutServer.weights_unchanged`), so
        their samples and sync log name it. Other rollouts (vLLM on GPUs) always sync, as verl does."""
        try:
            servers = self._e2c_hf_servers() if getattr(self, "_e2c_update_skipped", False) else []
            if not servers:
                super().on_step_end()
                return
            import ray

            ray.get([server.weights_unchanged.remote(self.global_steps) for server in servers])
            self.timing_raw["update_weights"] = 0.0
        finally:
            self._e2c_release_pages()  # after the sync, before the next rollout

    def _e2c_hf_servers(self) -> list[Any]:
        """The rollout servers when every replica is the ``hf`` rollout's; else empty."""
        from e2c.verl_cpu.hf_verl import HFReplica  # imports ray, torch and verl: only with the hf rollout

        replicas = list(getattr(getattr(self, "checkpoint_manager", None), "replicas", None) or [])
        if not replicas or not all(isinstance(r, HFReplica) for r in replicas):
            return []
        return [server for r in replicas for server in r.servers]

    def _compute_old_log_prob(self, batch: Any, metrics: dict) -> Any:
        """Under the ``e2c_on_policy`` loss (one mini-batch, one PPO epoch: the launcher picks it only
        there) the old log-probs are the update's own, detached; the separate forward pass that recomputes
        them is skipped. verl's loss still selects an ``old_log_probs`` field, so the rollout's are stored
        under that name (the loss ignores them)."""
        if self.config.actor_rollout_ref.actor.policy_loss.get("loss_mode") != ON_POLICY_LOSS:
            return super()._compute_old_log_prob(batch, metrics)
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["rollout_log_probs"]
        )
        data["old_log_probs"] = data.pop("rollout_log_probs")
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=data)
        metrics["e2c/old_log_prob_skipped"] = 1.0
        return batch

    def _sampled_entropy(self, batch: Any, valid: torch.Tensor, explore: torch.Tensor) -> dict[str, float]:
        """``health/entropy_sampled[_explore|_execute]``: -mean rollout log-prob of the sampled tokens over
        the response mask as sampled (before ``only_train_on_positive``); empty without ``rollout_log_probs``."""
        try:
            lp = _tq_fields(batch, ["rollout_log_probs"]).get("rollout_log_probs")
            if lp is None:
                return {}
            lp = _padded(lp).float()
            width = min(lp.shape[1], valid.shape[1])
            if lp.shape[0] != valid.shape[0]:
                return {}
            lp, valid, explore = lp[:, :width], valid[:, :width], explore[:, :width]
            out = {}
            for suffix, seg in (("", valid), ("_explore", explore & valid), ("_execute", valid & ~explore)):
                value = health.sampled_entropy(lp, seg)
                if value is not None:
                    out[health.ENTROPY + suffix] = value
            return out
        except Exception as e:  # a metric, never a reason to stop training
            logger.warning("health/entropy_sampled skipped: %s", e)
            return {}

    def _stop_ids(self) -> frozenset[int]:
        """The ids a rollout stops on: EOS (tokenizer and generation config, as the agent loop) and the
        chain's closing tag when it is one token."""
        if getattr(self, "_e2c_stop_ids", None) is None:
            ids = set(eos_ids(self.tokenizer))
            try:
                model = self.config.actor_rollout_ref.model.get("path", None)
                ids |= eos_ids(self.tokenizer, model_generation_config(model))
                close = get_format(self.e2c.rollout.format).execute_close
                enc = self.tokenizer.encode(close, add_special_tokens=False) if close else []
                if len(enc) == 1:
                    ids.add(int(enc[0]))
            except Exception as e:  # the tokenizer's EOS still says which responses ended
                logger.warning("health/truncated_share: stop ids beyond the tokenizer's EOS unknown (%s)", e)
            self._e2c_stop_ids = frozenset(ids)
        return self._e2c_stop_ids

    def _compute_metrics(
        self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int
    ) -> Any:
        """verl's step metrics, then the ``health/*`` ones of the step's sampled rows (:func:`health.batch_health`
        on the same rows as ``critic/score/mean``: padding rows and aborted responses left out)."""
        out = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        try:
            metrics.update(self._health_metrics(batch, metrics))
        except Exception as e:  # a metric, never a reason to stop training
            logger.warning("health metrics skipped at step %s: %s", global_steps, e)
        self._health_stop(metrics, global_steps)
        return out

    def _health_stop(self, metrics: dict, global_steps: int) -> None:
        """``e2c.health_stop_after``: when :func:`health.stop_reason` fires, the next step becomes the run's
        last (verl saves it and the launcher links final/), and the reason is printed and logged."""
        window = self.e2c.health_stop_after
        if window <= 0:
            return
        rows = getattr(self, "_e2c_health_rows", [])
        rows.append({k: metrics.get(k) for k in (health.UPDATE_SKIPPED, health.ZERO_VAR, health.WELL_FORMED)})
        self._e2c_health_rows = rows
        if getattr(self, "_e2c_stopping", False):
            return
        reason = health.stop_reason(rows, window)
        if reason is not None and global_steps + 1 < self.total_training_steps:
            self._e2c_stopping = True
            self.total_training_steps = global_steps + 1
            metrics[health.STOPPED] = 1.0
            print(
                f"[e2c-rl] health stop after step {global_steps}: {reason}; step {global_steps + 1} is the "
                "last (e2c.health_stop_after=0 turns this off)",
                flush=True,
            )

    def _health_metrics(self, batch: Any, metrics: dict) -> dict[str, float]:
        rows = [i for i, tag in enumerate(batch.tags) if not tag.get("is_padding", False)]
        data = _tq_fields(batch, ["responses", "rm_scores", "extra_fields"])
        if "responses" not in data or "rm_scores" not in data or not rows:
            return {}
        lengths = _lengths(data["responses"])
        responses = _padded(data["responses"], -1).long()
        last = [int(responses[i, n - 1]) if n > 0 else None for i, n in enumerate(lengths)]
        scores = _padded(data["rm_scores"]).float().sum(-1).tolist()
        extra = list(data["extra_fields"]) if "extra_fields" in data else [None] * len(lengths)
        infos = [_reward_info(v) for v in extra]
        if not len(scores) == len(lengths) == len(infos) == len(batch.keys):
            return {}
        out = health.batch_health(
            groups=[health.group_of(batch.keys[i]) for i in rows],
            scores=[scores[i] for i in rows],
            reward_infos=[infos[i] for i in rows],
            lengths=[lengths[i] for i in rows],
            last_tokens=[last[i] for i in rows],
            stop_ids=self._stop_ids(),
        )
        parts = [out.get(k) for k in (health.REWARD_CORRECT, health.REWARD_PLAN, health.REWARD_OVERLONG)]
        score = metrics.get("critic/score/mean")
        if score is not None and None not in parts:
            total = sum(parts) + out.get(health.REWARD_OTHER, 0.0)
            if abs(total - float(score)) > 1e-5:
                logger.warning(
                    "health: reward components add up to %.6f, critic/score/mean is %.6f", total, float(score)
                )
        return out


# Last statement: this module is complete, its registrations ran; resumes a deferred plugin registration.
registry.provided(__name__, f"trainer:{TRAINER_NAME}")
