"""verl-side classes of the ``hf`` rollout (imported lazily by verl's registries; see :mod:`e2c.verl_cpu.hf_rollout`)."""

from __future__ import annotations

import os
import time
from typing import Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica

from e2c.verl_cpu.hf_rollout import ROLLOUT_NAME, HFRolloutServer, server_actor_name, sync_via
from e2c.verl_cpu.shared_weights import SharedWeightsWriter


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
        self._shared = SharedWeightsWriter() if self._has_server and sync_via() == "shm" else None
        self._same_node: bool | None = None

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
        peft_config = kwargs.get("peft_config")
        shared = self._has_server and peft_config is None and await self._shared_ok()
        state: dict[str, torch.Tensor] = {}
        started = time.time()
        # Every rank walks the generator: with FSDP each full tensor is an all-gather.
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            if self._has_server:
                # The shared file is written before this call returns: no copy of its own is needed.
                tensor = tensor.detach().to("cpu")
                state[name] = tensor if shared else tensor.clone()
        if not self._has_server:
            return
        if shared:
            assert self._shared is not None
            manifest = self._shared.write(state)
            sent = time.time()
            try:
                await self._server().update_weights_shared.remote(
                    manifest, global_steps, {"gather_s": sent - started, "sent_at": sent}
                )
            finally:
                self._shared.forget_path()  # the server has mapped it (or failed): the name is not needed
        else:
            sent = time.time()
            await self._server().update_weights.remote(
                state,
                global_steps,
                peft_config,
                bool(kwargs.get("base_sync_done", True)),
                {"gather_s": sent - started, "sent_at": sent},
            )

    async def _shared_ok(self) -> bool:
        """Whether this sync may go through the shared file: it is on (``E2C_ROLLOUT_SYNC_VIA``) and the
        server runs on this machine (asked once)."""
        if self._shared is None:
            return False
        if self._same_node is None:
            here = ray.get_runtime_context().get_node_id()
            self._same_node = await self._server().node_id.remote() == here
        return self._same_node
