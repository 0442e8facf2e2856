"""CPU support for verl 0.9.1: a ``cpu`` platform and a gloo process group.

verl knows CUDA, NPU and ROCm only, and on a machine without an accelerator falls back to CUDA and fails.
:func:`install` registers a ``cpu`` platform in verl's ``PlatformRegistry``, selects it (``VERL_PLATFORM``),
reduces verl's ``cpu:gloo,cpu:gloo`` process-group string to ``gloo``, has verl pick its FSDP engines
(``VERL_ENGINE_DEVICE=cuda``; FSDP2 only, FSDP1 needs an accelerator), and gives torch every core instead of
ray's ``OMP_NUM_THREADS=1`` (``E2C_CPU_THREADS``). Everything here is a no-op when CUDA is available, so the same
plugin is safe on GPU clusters.
More: docs/training.md, "On GPUs and on a CPU".
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import ModuleType, SimpleNamespace
from typing import Any

PLATFORM_NAME = "cpu"


def accelerator_present() -> bool:
    """True when torch sees a CUDA (or ROCm) device: then verl's own platforms apply."""
    if os.environ.get("E2C_FORCE_CPU", "") == "1":
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - torch is a hard dependency
        return False


def normalize_backend(backend: Any) -> Any:
    """``cpu:gloo,cpu:gloo`` (verl's string on CPU) -> ``gloo``; anything else unchanged.

    torch accepts ``device:backend`` pairs only for distinct devices; when every pair names the same
    backend the plain backend name means the same thing.
    """
    if not isinstance(backend, str) or "," not in backend:
        return backend
    pairs = [p.strip() for p in backend.split(",") if p.strip()]
    names = {p.split(":", 1)[-1] for p in pairs}
    devices = [p.split(":", 1)[0] for p in pairs if ":" in p]
    if len(names) == 1 and len(set(devices)) < len(devices):
        return names.pop()
    return backend


def _device_module() -> ModuleType:
    """``torch.cpu`` plus the no-op memory functions verl calls on its device module."""
    import torch

    mod = ModuleType("e2c_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(mod, name, getattr(torch.cpu, name))

    def zero(*_a: Any, **_k: Any) -> int:
        return 0

    def nothing(*_a: Any, **_k: Any) -> None:
        return None

    def mem_get_info(*_a: Any, **_k: Any) -> tuple[int, int]:
        try:
            pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
            total = os.sysconf("SC_PHYS_PAGES") * size
            return pages * size, total
        except (ValueError, OSError):  # pragma: no cover - non-POSIX
            return 0, 0

    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(mod, name, zero)
    for name in ("empty_cache", "reset_peak_memory_stats", "set_device", "manual_seed", "manual_seed_all"):
        setattr(mod, name, nothing)
    mod.mem_get_info = mem_get_info
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: "cpu"
    mod.synchronize = nothing
    mod.memory_stats = lambda *_a, **_k: {}
    mod.get_device_name = lambda *_a, **_k: "CPU"
    mod.memory = SimpleNamespace(_set_allocator_settings=nothing)
    # Checkpoint resume restores "the device's" RNG from the state saved under the device name ("cpu"),
    # which is torch's own CPU generator.
    mod.get_rng_state = torch.get_rng_state
    mod.set_rng_state = torch.set_rng_state
    return mod


def _platform_class() -> type:
    from verl.plugin.platform import PlatformBase, PlatformRegistry

    @PlatformRegistry.register(platform=PLATFORM_NAME)
    class PlatformCPU(PlatformBase):
        """verl platform for machines without an accelerator (tests and CPU demos)."""

        _module: ModuleType | None = None

        @property
        def device_name(self) -> str:
            return "cpu"

        @property
        def vendor_name(self) -> str:
            return "cpu"

        @property
        def device_module(self) -> ModuleType:
            if PlatformCPU._module is None:
                PlatformCPU._module = _device_module()
            return PlatformCPU._module

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            return not accelerator_present()

        def current_device(self) -> Any:
            # verl builds devices as f"{name}:{current_device()}" in places and as torch.device(x) in others;
            # "cpu" is valid for both.
            return "cpu"

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            import torch

            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            self.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            # verl's resource pools ask ray for "GPU" bundles; on CPU the launcher gives ray logical GPUs.
            return "GPU"

        def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
            return {"num_gpus": num_gpus}

        def ray_noset_envvars(self) -> list[str]:
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None

    return PlatformCPU


def _patch_init_process_group() -> None:
    import torch.distributed as dist

    if getattr(dist.init_process_group, "_e2c_cpu", False):
        return
    original = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            kwargs["backend"] = normalize_backend(kwargs["backend"])
        elif args:
            args = (normalize_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group._e2c_cpu = True  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group


def cpu_threads() -> int:
    """Threads for torch in this process: ``E2C_CPU_THREADS``, else every core this process may run on."""
    env = os.environ.get("E2C_CPU_THREADS", "")
    if env.strip():
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def install() -> bool:
    """Register and select the CPU platform when no accelerator is present. Returns whether it did."""
    if accelerator_present():
        return False
    import torch

    # ray exports OMP_NUM_THREADS=1 to every actor, so verl's workers and the rollout would each compute on
    # one core. On CPU the phases of a step (generate, log-probs, update) run one after another, so each
    # can use every core (SmolLM2-135M's first GRPO step on 2 cores, bench/rl_cpu_step.py: 89 s with both
    # cores against 122 s with one).
    torch.set_num_threads(cpu_threads())
    _platform_class()
    os.environ.setdefault("VERL_PLATFORM", PLATFORM_NAME)
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
    _patch_init_process_group()
    return True
