"""Multi-process data parallel with ``torch.distributed`` (one process per device, launched by
``torchrun`` or ``accelerate launch``): each process samples its own prompts, the gradients are
averaged by DistributedDataParallel, and loss normalisers and metrics are reduced across
processes so the update equals the single-process one on the union of the batches.

A single process (no ``WORLD_SIZE`` in the environment) uses none of it.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.distributed as torch_dist

from .policy import resolve_device


@dataclass
class Dist:
    """This process's place in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> "Dist":
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        if not torch_dist.is_initialized():
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            torch_dist.init_process_group(backend)
        return cls(torch_dist.get_rank(), world, int(os.environ.get("LOCAL_RANK", "0")))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def device(self, name: str) -> torch.device:
        device = resolve_device(name)
        if device.type == "cuda" and self.active and device.index is None:
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, module: Any) -> Any:
        if not self.active or module is None:
            return module
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.local_rank] if torch.cuda.is_available() else None
        return DistributedDataParallel(module, device_ids=device_ids)

    def sum(self, value: float) -> float:
        if not self.active:
            return value
        t = torch.tensor([float(value)], dtype=torch.float64,
                         device="cuda" if torch.cuda.is_available() else "cpu")
        torch_dist.all_reduce(t)
        return t.item()

    def mean_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        """Average every metric across processes (each logs the same keys)."""
        if not self.active:
            return metrics
        keys = sorted(metrics)
        t = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64,
                         device="cuda" if torch.cuda.is_available() else "cpu")
        torch_dist.all_reduce(t)
        return {k: v / self.world_size for k, v in zip(keys, t.tolist())}

    @contextlib.contextmanager
    def no_sync(self, *modules: Any, skip: bool) -> Iterator[None]:
        """Skip the gradient all-reduce on all but the last micro-batch of a mini-batch."""
        with contextlib.ExitStack() as stack:
            if self.active and not skip:
                for module in modules:
                    if module is not None and hasattr(module, "no_sync"):
                        stack.enter_context(module.no_sync())
            yield
