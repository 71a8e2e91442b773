"""Tensor plumbing shared by the parent and the children: flattening outputs, moving inputs, digests, files."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch


def flatten_outputs(value: Any) -> list[Any]:
    """A forward's result as a flat list: a tensor is one output, a tuple/list its elements (one level)."""
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def container_of(value: Any) -> str:
    """What a forward's result is at the top: ``"tensor"``, ``"tuple"`` or ``"list"`` (a caller indexing the
    result, or passing it on as a tensor, depends on it)."""
    if isinstance(value, tuple):
        return "tuple"
    if isinstance(value, list):
        return "list"
    return "tensor" if isinstance(value, torch.Tensor) else type(value).__name__


def to_device(values: Sequence[Any], device: torch.device | str) -> list[Any]:
    """Copy tensors to ``device`` as new allocations (also when already there); other values pass through."""
    return [v.to(device, copy=True) if isinstance(v, torch.Tensor) else v for v in values]


def describe(t: torch.Tensor) -> dict[str, Any]:
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "stride": list(t.stride()),
        "device": str(t.device),
        "contiguous": t.is_contiguous(),
    }


def digest(t: torch.Tensor) -> str:
    """A content hash of a tensor's elements (bit-exact, NaN-safe), computed on the CPU."""
    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    data = data.contiguous()
    h = hashlib.blake2b(digest_size=16)
    h.update(str(tuple(data.shape)).encode())
    h.update(str(data.dtype).encode())
    if data.numel():
        h.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    """(first byte, one past the last byte) of the memory a tensor can touch, or None if it is empty."""
    if t.numel() == 0:
        return None
    start = t.data_ptr()
    extent = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride())) + 1
    return start, start + extent * t.element_size()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    sa, sb = storage_span(a), storage_span(b)
    return sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]


def save(values: Sequence[Any], path: Path) -> None:
    """Save CPU copies of tensors (and plain values) for another process."""
    cpu = [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in values]
    torch.save(cpu, path)


def load(path: Path) -> list[Any]:
    """Load what :func:`save` wrote — safely: ``weights_only`` refuses anything but tensors and plain data."""
    return list(torch.load(path, map_location="cpu", weights_only=True))


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half an ulp at 1.0 for a floating dtype."""
    return float(torch.finfo(dtype).eps) / 2.0


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def nbytes_of(desc: Mapping[str, Any]) -> int:
    """Bytes of a tensor as :func:`describe` wrote it (shape and dtype)."""
    import math as _math

    try:
        itemsize = dtype_from_name(desc["dtype"]).itemsize
    except (KeyError, ValueError):
        itemsize = 4
    return int(_math.prod(desc.get("shape", [])) * itemsize)


def result_shape(container: str | None) -> str | None:
    """A tuple and a list are used alike (indexed, unpacked); a tensor is not a sequence of outputs."""
    return "sequence" if container in ("tuple", "list") else container


def uniform(tensor: Any) -> bool:
    """Every element the same value (NaN counted equal to NaN)."""
    flat = tensor.reshape(-1)
    first = flat[:1]
    same = flat == first
    if flat.is_floating_point() or flat.is_complex():
        same = same | (flat.isnan() & first.isnan())
    return bool(same.all())
