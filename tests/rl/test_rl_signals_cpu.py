"""Training signals that match what inference does: the elastic rollout's EOS, e3's
``only_train_on_positive`` in verl's loss, and plugin registration whatever was imported first.

CPU only, no ray, no trainer run: the agent loop runs against a scripted server, the trainer's advantage
step against an in-memory transfer queue, and the plugin in fresh interpreters.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import run_at_most

from e2c.rl.agent_loop import join_phases

ROOT = Path(__file__).resolve().parents[2]

B = 7  # exploration boundary id
EOS = 2


# -- 1. elastic budgets: an EOS that ended the exploration is not part of the chain ---------------------------


def test_join_phases_drops_the_eos_that_ended_the_exploration_cpu() -> None:
    # Inference (e2c.generation.chains) writes the boundary after the exploration's *text*, which has no EOS.
    ids, mask, lps, forced = join_phases(
        [1, 2, EOS], [-0.1, -0.2, -0.3], B, [8], [4, 5], [-0.4, -0.5], stop_ids={EOS}
    )
    assert forced
    assert ids == [1, 2, B, 8, 4, 5]
    assert mask == [1, 1, 0, 0, 1, 1]
    assert lps == [-0.1, -0.2, 0.0, 0.0, -0.4, -0.5]
    # An exploration that is only an EOS: nothing sampled survives, the boundary is forced.
    ids, mask, lps, forced = join_phases([EOS], [-0.3], B, [8], [4], [-0.4], stop_ids={EOS, 3})
    assert (ids, mask, lps, forced) == ([B, 8, 4], [0, 0, 1], [0.0, 0.0, -0.4], True)
    # A stop id inside the exploration is left alone (only the one that ended the call is dropped), and
    # without stop ids nothing changes.
    ids, _, _, _ = join_phases([EOS, 1], None, B, [8], [], None, stop_ids={EOS})
    assert ids == [EOS, 1, B, 8]
    assert join_phases([1, EOS], None, B, [8], [4], None)[0] == [1, EOS, B, 8, 4]


def test_eos_ids_cover_tokenizer_and_generation_config_cpu() -> None:
    from types import SimpleNamespace

    from e2c.rl.agent_loop import eos_ids

    tok = SimpleNamespace(eos_token_id=151645)
    assert eos_ids(tok) == {151645}
    assert eos_ids(tok, SimpleNamespace(eos_token_id=[151645, 151643])) == {151645, 151643}
    assert eos_ids(SimpleNamespace(eos_token_id=None), SimpleNamespace(eos_token_id=3)) == {3}


class _ScriptedServer:
    """Stands in for verl's server manager: answers each call from a script, records the requests."""

    def __init__(self, replies: list[tuple[list[int], list[float]]]) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[list[int], dict[str, Any]]] = []

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append((list(prompt_ids), dict(sampling_params)))
        ids, lps = self.replies.pop(0)
        return TokenOutput(token_ids=ids, log_probs=lps, stop_reason="completed")


def _agent_loop(tok: Any, server: _ScriptedServer, explore_budget: int) -> Any:
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap as Wrap

    from e2c.rl.agent_loop import E2CAgentLoop

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"response_length": 64, "prompt_length": 256},
                "model": {"path": None},
            },
            "e2c": {"rollout": {"explore_budget": explore_budget}},
        }
    )
    return E2CAgentLoop(
        trainer_config=Wrap(config=config),
        server_manager=server,
        tokenizer=tok,
        processor=None,
        dataset_cls=None,
        data_config=Wrap(config=OmegaConf.create({})),
    )


def _run(agent: Any) -> Any:
    """One rollout of ``agent`` on its own event loop (verl binds the loop when the agent is built)."""
    coro = agent.run({"temperature": 1.0, "logprobs": True}, raw_prompt=[{"role": "user", "content": "1+1?"}])
    return agent.loop.run_until_complete(coro)


def test_elastic_rollout_drops_the_exploration_eos_cpu(tiny_tok: Any) -> None:
    eos = tiny_tok.eos_token_id
    boundary = tiny_tok.encode("</EXPLORATION>", add_special_tokens=False)[0]
    opener = tiny_tok.encode("<EXECUTION>", add_special_tokens=False)
    explore, execute = [11, 12, 13], [21, 22, eos]
    server = _ScriptedServer([([*explore, eos], [-0.1, -0.2, -0.3, -0.9]), (execute, [-0.4, -0.5, -0.6])])
    loop = _agent_loop(tiny_tok, server, explore_budget=8)
    out = _run(loop)

    # The execution call continues the chain inference would build: exploration, boundary, opener; no EOS.
    second_prompt = server.requests[1][0]
    assert second_prompt == out.prompt_ids + explore + [boundary, *opener]
    assert eos not in second_prompt[len(out.prompt_ids) :]
    # The trained sequence is the same chain; the EOS and its log-prob are gone, the forced tags masked.
    assert out.response_ids == [*explore, boundary, *opener, *execute]
    assert out.response_mask == [1, 1, 1] + [0] * (1 + len(opener)) + [1, 1, 1]
    assert out.response_logprobs == [-0.1, -0.2, -0.3] + [0.0] * (1 + len(opener)) + [-0.4, -0.5, -0.6]
    assert out.extra_fields["forced_close"] is True
    assert out.extra_fields["explore_tokens"] == 3 and out.extra_fields["execute_tokens"] == 3


def test_elastic_rollout_keeps_a_sampled_boundary_cpu(tiny_tok: Any) -> None:
    boundary = tiny_tok.encode("</EXPLORATION>", add_special_tokens=False)[0]
    opener = tiny_tok.encode("<EXECUTION>", add_special_tokens=False)
    server = _ScriptedServer([([11, boundary], [-0.1, -0.2]), ([21], [-0.4])])
    loop = _agent_loop(tiny_tok, server, explore_budget=8)
    out = _run(loop)
    assert out.response_ids == [11, boundary, *opener, 21]
    assert out.response_mask == [1, 1] + [0] * len(opener) + [1]
    assert out.extra_fields["forced_close"] is False


@pytest.mark.parametrize("explore_budget", [0, 8])
def test_rollout_stops_at_the_execution_close_like_inference_cpu(tiny_tok: Any, explore_budget: int) -> None:
    # Inference stops a chain at </EXECUTION> (ChainFormat.stop_strings); text after it would be trained and
    # graded (as "trailing_text") although inference never generates it.
    close = tiny_tok.encode("</EXECUTION>", add_special_tokens=False)[0]
    boundary = tiny_tok.encode("</EXPLORATION>", add_special_tokens=False)[0]
    replies = [([11, boundary], [-0.1, -0.2]), ([21, close], [-0.3, -0.4])]
    server = _ScriptedServer(replies[1:] if explore_budget == 0 else replies)
    _run(_agent_loop(tiny_tok, server, explore_budget=explore_budget))
    execution_call = server.requests[-1][1]
    assert close in execution_call["stop_token_ids"]
    if explore_budget:
        assert server.requests[0][1]["stop_token_ids"] == [boundary]


def test_reward_decoding_drops_every_eos_id_cpu(tiny_tok: Any, tmp_path: Path) -> None:
    # The rollout stops on the generation config's EOS ids too (Qwen3: <|im_end|> and <|endoftext|>). One
    # left in the decoded text sits after </EXECUTION>: the chain would grade as "trailing_text", not "ok".
    from omegaconf import OmegaConf
    from verl import DataProto

    from e2c.rl.reward import E2CRewardManager

    other_eos = 1  # stands in for a second EOS id of the model (the tiny tokenizer has one EOS)
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [tiny_tok.eos_token_id, other_eos]})
    )
    config = OmegaConf.create({"reward": {}, "actor_rollout_ref": {"model": {"path": str(tmp_path)}}})
    manager = E2CRewardManager(config, tiny_tok)
    assert manager.eos_ids == {tiny_tok.eos_token_id, other_eos}
    text = "plan</EXPLORATION><EXECUTION>2+3=\\boxed{5}</EXECUTION>"
    ids = [*tiny_tok.encode(text, add_special_tokens=False), other_eos]
    data = DataProto.from_dict(
        tensors={
            "responses": torch.tensor([ids]),
            "attention_mask": torch.ones(1, len(ids) + 3, dtype=torch.long),
        },
        non_tensors={
            "data_source": ["synthetic/arithmetic"],
            "reward_model": [{"ground_truth": "5"}],
            "extra_info": [{}],
        },
    )
    result = manager.loop.run_until_complete(manager.run_single(data))
    assert result["reward_extra_info"]["acc"] == 1.0
    assert result["reward_extra_info"]["well_formed"] == 1.0


# -- 2. e3's only_train_on_positive: negative responses leave verl's loss, not just its advantages ------------


class _FakeQueue:
    """An in-memory stand-in for the transfer queue: one partition of nested per-sample fields."""

    def __init__(self, fields: dict[str, torch.Tensor]) -> None:
        self.fields = dict(fields)

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> Any:
        from tensordict import TensorDict

        got = {k: self.fields[k] for k in select_fields if k in self.fields}
        return TensorDict(got, batch_size=[len(keys)])

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: Any) -> Any:
        for k, v in fields.items():  # (iterating a TensorDict walks its rows)
            self.fields[k] = v
        return _Batch(keys, partition_id)


class _Batch:
    def __init__(self, keys: list[str], partition_id: str) -> None:
        self.keys, self.partition_id = keys, partition_id

    def __len__(self) -> int:
        return len(self.keys)


def _nested(rows: list[list[float]], dtype: torch.dtype) -> torch.Tensor:
    return torch.nested.as_nested_tensor([torch.tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)


def _padded(t: torch.Tensor) -> torch.Tensor:
    return torch.nested.to_padded_tensor(t, 0.0) if t.is_nested else t


def _verl_actor_loss(fields: dict[str, torch.Tensor], log_prob: torch.Tensor, ref: torch.Tensor) -> dict:
    """The actor's loss terms as verl 0.9.1 computes them (``verl/workers/utils/losses.py::ppo_loss`` on the
    engine path): policy, entropy and KL terms aggregated over ``response_mask``, the token-mean denominator
    from ``loss_mask`` (``FSDPEngine.forward_backward_batch``: ``batch_num_tokens = loss_mask.sum()``)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty

    mask = _padded(fields["response_mask"]).bool()
    info = {
        "dp_size": 1,
        "batch_num_tokens": int(_padded(fields["loss_mask"]).sum()),
        "global_batch_size": None,
    }
    config = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": None, "clip_ratio_high": None})
    config.global_batch_info = info
    adv = _padded(fields["advantages"])
    pg, _ = get_policy_loss_fn("vanilla")(
        old_log_prob=log_prob,
        log_prob=log_prob,
        advantages=adv,
        response_mask=mask,
        loss_agg_mode="token-mean",
        config=config,
    )
    entropy = agg_loss(loss_mat=fields["_entropy"], loss_mask=mask, loss_agg_mode="token-mean", **info)
    kld = kl_penalty(logprob=log_prob, ref_logprob=ref, kl_penalty="low_var_kl")
    kl = agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode="token-mean", **info)
    return {"pg": float(pg), "entropy": float(entropy), "kl": float(kl), "kld": kld}


def test_only_train_on_positive_removes_negative_responses_from_the_loss_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    import e2c.rl.trainer as trainer_mod

    # Rows: positive (tagged), negative, zero advantage (an all-equal GRPO group), positive (untagged).
    lengths = [5, 4, 3, 2]
    seq_adv = [1.5, -0.7, 0.0, 0.4]
    responses = [[1, B, 3, 4, 5], [1, 2, B, 3], [B, 1, 2], [1, 2]]
    g = torch.Generator().manual_seed(0)
    entropy = [torch.rand(n, generator=g).tolist() for n in lengths]
    queue = _FakeQueue(
        {
            "responses": _nested(responses, torch.long),
            "response_mask": _nested([[1] * n for n in lengths], torch.long),
            "loss_mask": _nested([[1] * n for n in lengths], torch.long),
            "advantages": _nested([[a] * n for a, n in zip(seq_adv, lengths)], torch.float32),
            "entropy": _nested(entropy, torch.float32),
        }
    )
    monkeypatch.setattr(trainer_mod, "tq", queue)
    monkeypatch.setattr(PPOTrainerSync, "_compute_advantage", lambda self, batch, metrics: batch)
    trainer = object.__new__(trainer_mod.E2CTrainer)
    trainer.config = OmegaConf.create({"e2c": {"only_train_on_positive": True, "explore_adv_coef": 2.0}})
    trainer.tokenizer = type(
        "Tok",
        (),
        {"encode": lambda self, s, add_special_tokens=False: {"</EXPLORATION>": [B], "</EXECUTION>": [9]}[s]},
    )()
    metrics: dict = {}
    trainer._compute_advantage(_Batch(["a", "b", "c", "d"], "train"), metrics)

    width = max(lengths)
    log_prob = -torch.rand(len(lengths), width, generator=g)
    ref = log_prob - 0.1 * torch.rand(len(lengths), width, generator=g)
    fields = dict(queue.fields)
    fields["_entropy"] = _padded(queue.fields["entropy"])
    got = _verl_actor_loss(fields, log_prob, ref)

    # By hand, over the tokens of the non-negative responses only (rows 0, 2, 3); exploration x2 in row 0.
    kept = [0, 2, 3]
    n = sum(lengths[i] for i in kept)
    weighted_adv = [[1.5 * 2.0] * 2 + [1.5] * 3, None, [0.0] * 3, [0.4, 0.4]]
    pg = -sum(sum(weighted_adv[i]) for i in kept) / n  # ratio 1 (log_prob == old_log_prob)
    ent = sum(sum(entropy[i]) for i in kept) / n
    kl = sum(float(got["kld"][i, : lengths[i]].sum()) for i in kept) / n
    assert got["pg"] == pytest.approx(pg, rel=1e-5)
    assert got["entropy"] == pytest.approx(ent, rel=1e-5)
    assert got["kl"] == pytest.approx(kl, rel=1e-5)
    # Lengths are untouched (response-length metrics come from the nested offsets), and the segment metrics
    # still describe every sampled response.
    assert _padded(queue.fields["response_mask"]).sum(-1).tolist() == [5, 0, 3, 2]
    assert queue.fields["response_mask"].offsets().diff().tolist() == lengths
    assert metrics["e2c/untagged_share"] == pytest.approx(0.25)
    assert metrics["e2c/positive_kept_share"] == pytest.approx(0.75)


def test_positive_only_mask_matches_reference_cpu() -> None:
    import random

    from reference_impls import positive_only_mask_reference

    from e2c.rl.advantage import positive_only_mask

    rng = random.Random(3)
    for _ in range(20):
        lengths = [rng.randint(0, 6) for _ in range(5)]
        mask = torch.tensor([[1] * n + [0] * (6 - n) for n in lengths])
        adv = torch.tensor([[rng.choice([-1.0, 0.0, 0.5]) * rng.random()] * 6 for _ in lengths])
        got = positive_only_mask(adv, mask)
        assert got.dtype == mask.dtype
        assert got.tolist() == positive_only_mask_reference(adv.tolist(), mask.tolist())


# -- 3. plugin registration: any import order, retried after a failure, failures loud -------------------------

EXPECTED = {"rollout:hf", "attention:sdpa_varlen", "trainer:e2c_sync", "agent_loop:e2c", "reward_manager:e2c"}

PROBE = """
import json
import e2c.rl.plugin as p
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
print("RESULT", json.dumps({
    "registered": list(p.REGISTERED), "error": p.ERROR,
    "verl": ["e2c_sync" in TRAINER_REGISTRY, "e2c" in _agent_loop_registry, "e2c" in REWARD_MANAGER,
             ("hf", "async") in _ROLLOUT_REGISTRY,
             "sdpa_varlen" in AttentionInterface._global_mapping,
             "sdpa_varlen" in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping],
}))
"""


def _result(out: str, err: str) -> tuple[dict, str]:
    line = [x for x in out.splitlines() if x.startswith("RESULT ")]
    assert line, out[-2000:] + err[-3000:]
    return json.loads(line[0][len("RESULT ") :]), err


def _probe(code: str) -> tuple[dict, str]:
    out = subprocess.run(
        [sys.executable, "-c", code + PROBE], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    return _result(out.stdout, out.stderr)


FIRST_IMPORTS = [
    "e2c.rl.reward", "e2c.rl.trainer", "e2c.rl.agent_loop", "verl", "e2c.rl.plugin", "e2c.verl_cpu.hf_verl"
]  # fmt: skip


@pytest.fixture(scope="module")
def first_import_probes() -> dict[str, tuple[dict, str]]:
    """The probe after each first import, each in a new interpreter, two at a time (an interpreter that
    imports verl spends its seconds on one core)."""
    runs = run_at_most(
        {
            first: {"args": [sys.executable, "-c", f"import {first}\n" + PROBE], "cwd": ROOT}
            for first in FIRST_IMPORTS
        }
    )
    return {first: _result(out, err) for first, (_, out, err) in runs.items()}


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
@pytest.mark.parametrize("first", FIRST_IMPORTS)
def test_plugin_registers_whatever_is_imported_first_cpu(first: str, first_import_probes: dict) -> None:
    res, err = first_import_probes[first]
    assert res["error"] is None, err[-3000:]
    assert set(res["registered"]) >= EXPECTED, res
    assert all(res["verl"]), res


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_plugin_registration_is_retried_after_a_failure_and_warns_cpu() -> None:
    code = (
        "import sys\n"
        "sys.modules['e2c.rewards.verl_score'] = None  # the reward manager's import fails once\n"
        "import verl\n"
        "import e2c.rl.plugin as p\n"
        "assert p.ERROR and 'verl_score' in p.ERROR, (p.REGISTERED, p.ERROR)\n"
        "try:\n"
        "    p.require()\n"
        "    raise SystemExit('require() did not raise')\n"
        "except RuntimeError as e:\n"
        "    assert 'verl_score' in str(e), e\n"
        "del sys.modules['e2c.rewards.verl_score']\n"
        "p.register()\n"
        "p.require()\n"
    )
    res, err = _probe(code)
    assert "WARNING" in err and "failed to register" in err and "verl_score" in err
    assert res["error"] is None and set(res["registered"]) >= EXPECTED and all(res["verl"]), res


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_plugin_check_command_cpu(tmp_path: Path) -> None:
    import os

    ok = subprocess.run(
        [sys.executable, "-m", "e2c.rl.plugin"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "registered: platform:" in ok.stdout or "registered: rollout:hf" in ok.stdout
    # A broken install (here: the trainer's transfer_queue dependency) is one line and exit status 1.
    (tmp_path / "transfer_queue.py").write_text("raise ImportError('transfer_queue blocked by the test')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    bad = subprocess.run(
        [sys.executable, "-m", "e2c.rl.plugin"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert bad.returncode == 1
    assert "e2c verl plugin: recipe not registered: recipe: ImportError: transfer_queue blocked" in bad.stderr
    assert "WARNING" in bad.stderr
