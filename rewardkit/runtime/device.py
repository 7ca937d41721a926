"""Where and in which precision a job runs: the device and dtype choice shared by the policy
trainer, reward-model training and the learned rewards' loading."""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from ..compose import ConfigError

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """``auto`` means CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"device {name!r} is not a torch device (use cpu, cuda, cuda:1)") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for but CUDA is not available; use cpu")
    return device


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` means bf16 on CUDA, fp32 elsewhere."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in _DTYPES:
        raise ConfigError(f"dtype must be auto or one of {sorted(_DTYPES)}, got {name!r}")
    return _DTYPES[name]


def memory_metrics(device: torch.device) -> dict[str, float]:
    """``memory/peak_gib``: the most GPU memory torch has held allocated on ``device`` so far
    in this process (weights, optimizer state, activations); nothing on a CPU."""
    if device.type != "cuda":
        return {}
    return {"memory/peak_gib": torch.cuda.max_memory_allocated(device) / 2**30}


def host_values(values: Sequence[Any]) -> list[float]:
    """The values of many scalars — 0-dim tensors on any device, or plain numbers — read back
    to the host together, one copy per device, in order.

    Reading a GPU tensor (``.item()``, ``float()``) waits for all the work queued before it.
    Done between a forward pass and its backward, that wait keeps the host from queueing the
    backward's kernels while the GPU runs the forward, so a small model's step becomes a
    series of stalls. A training step therefore keeps its figures as tensors and reads them
    here once, after the optimizer step."""
    out: list[Any] = list(values)
    by_device: dict[torch.device, list[int]] = {}
    for i, value in enumerate(out):
        if isinstance(value, torch.Tensor):
            by_device.setdefault(value.device, []).append(i)
        else:
            out[i] = float(value)
    for device, indices in by_device.items():
        wide = torch.float32 if device.type == "mps" else torch.float64  # mps has no float64
        read = torch.stack([out[i].detach().reshape(()).to(wide) for i in indices]).tolist()
        for i, value in zip(indices, read):
            out[i] = value
    return out


def unwrap(model: Any) -> Any:
    """The model inside a DistributedDataParallel wrapper (or the model itself)."""
    return getattr(model, "module", model)


def dtype_kwarg(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """``from_pretrained``'s dtype keyword: ``dtype`` since transformers 4.56, ``torch_dtype``
    before (4.56+ still accepts the old name with a deprecation warning)."""
    return {"dtype" if _transformers_at_least("4.56") else "torch_dtype": dtype}


@functools.lru_cache(maxsize=None)
def _transformers_at_least(version: str) -> bool:
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__) >= Version(version)
