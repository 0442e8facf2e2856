"""verl-side classes of the ``hf`` rollout (imported lazily by verl's registries; see :mod:`e2c.verl_cpu.hf_rollout`)."""

from __future__ import annotations

import os
from typing import Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica

from e2c.verl_cpu.hf_rollout import ROLLOUT_NAME, HFRolloutServer, server_actor_name


class HFReplica(RolloutReplica):
    """One :class:`HFRolloutServer` per replica, on the node of the replica's first worker."""

    async def launch_servers(self) -> None:
        node_id = None
        if self.workers:
            node_id = await self.workers[0].__ray_call__.remote(
                lambda _: ray.get_runtime_context().get_node_id()
            )
        options: dict[str, Any] = {
            "name": server_actor_name(self.replica_rank),
            "max_concurrency": self.max_concurrency,
            "num_cpus": 0,
        }
        if node_id is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        server = (
            ray.remote(HFRolloutServer)
            .options(**options)
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        # Fail here, not in the first generate call, if the model cannot be loaded.
        await server.get_stats.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"{ROLLOUT_NAME}://replica-{self.replica_rank}"

    def rollout_worker_use_gpu(self) -> bool:
        return False


class HFServerAdapter(BaseRollout):
    """Trainer-side handle of the replica's :class:`HFRolloutServer`: weight sync only."""

    def __init__(
        self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **_: Any
    ) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = (
            int(self.config.tensor_model_parallel_size)
            * int(self.config.data_parallel_size)
            * int(self.config.pipeline_model_parallel_size)
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self._has_server = rank % world == 0
        self.server_handle = None

    def _server(self) -> Any:
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_actor_name(self.replica_rank))
        return self.server_handle

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    async def update_weights(self, weights: Any, global_steps: int | None = None, **kwargs: Any) -> None:
        if kwargs.get("wire_format", "named_tensors") != "named_tensors":
            raise NotImplementedError(
                "the hf rollout takes full named tensors (checkpoint_engine.backend=naive)"
            )
        state: dict[str, torch.Tensor] = {}
        # Every rank walks the generator: with FSDP each full tensor is an all-gather.
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            if self._has_server:
                state[name] = tensor.detach().to("cpu").clone()
        if self._has_server:
            await self._server().update_weights.remote(
                state, global_steps, kwargs.get("peft_config"), bool(kwargs.get("base_sync_done", True))
            )
