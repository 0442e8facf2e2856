"""Training signals that match what inference does (issue 13): the elastic rollout's EOS, e3's
``only_train_on_positive`` in verl's loss, and plugin registration whatever was imported first.

CPU only, no ray, no trainer run: the agent loop runs against a scripted server, the trainer's advantage
step against an in-memory transfer queue, and the plugin in fresh interpreters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2c.rl.agent_loop import join_phases

ROOT = Path(__file__).resolve().parents[1]

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
