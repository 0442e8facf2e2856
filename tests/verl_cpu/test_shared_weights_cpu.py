"""The CPU rollout's weight sync through a shared-memory file (e2c.verl_cpu.shared_weights)."""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.verl_cpu.shared_weights import (
    ALIGN,
    PREFIX,
    SharedWeightsReader,
    SharedWeightsWriter,
    plan_slots,
)

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int8, torch.bool]


def tensor_of(dtype: torch.dtype, shape: tuple[int, ...], seed: int, transpose: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g) * 50
    t = t.to(dtype) if dtype.is_floating_point else (t > 0 if dtype == torch.bool else t.to(dtype))
    return t.t() if transpose and t.dim() == 2 else t  # a non-contiguous view


tensors = st.builds(
    tensor_of,
    st.sampled_from(DTYPES),
    st.lists(st.integers(0, 9), min_size=0, max_size=3).map(tuple),
    st.integers(0, 2**16),
    st.booleans(),
)
states = st.dictionaries(st.text(min_size=1, max_size=12), tensors, min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(states)
def test_a_state_reads_back_equal_from_aligned_disjoint_slots_cpu(state: dict[str, torch.Tensor]) -> None:
    slots, size = plan_slots(state)
    ends = [(s.offset, s.offset + s.nbytes) for s in slots]
    assert all(s.offset % ALIGN == 0 for s in slots)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(ends))
    assert size == (ends[-1][1] if ends else 0)
    writer, reader = SharedWeightsWriter(), SharedWeightsReader()
    try:
        out = reader.read(writer.write(state))
        assert list(out) == list(state)
        for name, t in state.items():
            assert out[name].dtype == t.dtype and out[name].shape == t.shape
            assert torch.equal(out[name], t)
    finally:
        writer.close()


def test_one_file_per_layout_and_its_name_goes_once_mapped_cpu(tmp_path: Path) -> None:
    writer, reader = SharedWeightsWriter(tmp_path), SharedWeightsReader()
    state = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3, dtype=torch.bfloat16)}
    first = writer.write(state)
    assert Path(first.path).name.startswith(PREFIX) and Path(first.path).parent == tmp_path
    assert torch.equal(reader.read(first)["w"], state["w"])
    writer.forget_path()
    assert list(tmp_path.iterdir()) == []  # nothing left on disk or in /dev/shm
    state["w"].mul_(-1)
    again = writer.write(state)  # same layout: same file, rewritten in place, still mapped by the reader
    assert again is first
    assert torch.equal(reader.read(again)["w"], -torch.arange(6.0).reshape(2, 3))
    wider = writer.write({"w": torch.zeros(3, 3), "b": state["b"]})  # new layout: a new file
    assert wider.path != first.path and Path(wider.path).exists()
    assert torch.equal(reader.read(wider)["w"], torch.zeros(3, 3))
    writer.close()
    assert list(tmp_path.iterdir()) == []


def test_the_server_loads_a_shared_sync_and_keeps_its_own_copy_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync through the file logs the same movement as one through ray, its seconds by part, and the
    movement's start survives the trainer rewriting the file."""
    from e2c.verl_cpu.hf_rollout import SYNC_LOG_ENV, HFRolloutServer, WeightMovementLog

    log = tmp_path / "rollout_sync.jsonl"
    monkeypatch.setenv(SYNC_LOG_ENV, str(log))
    loaded: list[dict[str, torch.Tensor]] = []
    server = HFRolloutServer.__new__(HFRolloutServer)
    server.engine = SimpleNamespace(
        load_weights=lambda sd: loaded.append({k: v.clone() for k, v in sd.items()}) or len(sd)
    )
    server._engine_thread = ThreadPoolExecutor(1)
    server.shared = SharedWeightsReader()
    server.movement, server._moved, server.global_steps = WeightMovementLog(), {}, None
    server.stats = {"weight_updates": 0, "batches": 0, "requests": 0, "tokens": 0, "seconds": 0.0}
    server._logged = {"batches": 0, "requests": 0, "tokens": 0, "seconds": 0.0}
    writer = SharedWeightsWriter(tmp_path)
    state = {"w": torch.tensor([1.0, 2.0])}

    async def steps() -> None:
        for step, value in ((0, 2.0), (1, 2.5)):
            state["w"][1] = value
            manifest = writer.write(state)
            await server.update_weights_shared(manifest, step, {"gather_s": 0.25, "sent_at": 0.0})
            writer.forget_path()

    asyncio.run(steps())
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x["global_steps"], x["tensors"]) for x in lines] == [(0, 1), (1, 1)]
    assert lines[1]["weight_rel_l2"] == pytest.approx(0.5 / 5**0.5)
    assert torch.equal(server.movement.start["w"], torch.tensor([1.0, 2.0]))
    assert [x["w"].tolist() for x in loaded] == [[1.0, 2.0], [1.0, 2.5]]
    for x in lines:
        assert x["sync_gather_s"] == 0.25 and x["sync_via"] == "shm"
        assert {"sync_transfer_s", "sync_movement_s", "sync_load_s"} <= set(x)
    writer.close()
    assert os.listdir(tmp_path) == ["rollout_sync.jsonl"]


def test_a_bad_sync_route_names_the_choices_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from e2c.verl_cpu.hf_rollout import SYNC_VIA_ENV, sync_via

    monkeypatch.setenv(SYNC_VIA_ENV, "nfs")
    with pytest.raises(ValueError, match=r"E2C_ROLLOUT_SYNC_VIA='nfs' is not one of shm, ray"):
        sync_via()
    monkeypatch.delenv(SYNC_VIA_ENV)
    assert sync_via() == "shm"
