"""Tensor plumbing shared by the parent and the children: flattening outputs, moving inputs, digests, files."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from kernelwright.jobs.records import TensorInfo


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


def describe(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(shape=tuple(t.shape), dtype=str(t.dtype).removeprefix("torch."), stride=tuple(t.stride()),
                      device=str(t.device), contiguous=t.is_contiguous())


def digest(t: torch.Tensor) -> str:
    """A content hash of a tensor's elements (bit-exact, NaN-safe), computed where the tensor lives.

    On the CPU it is a blake2b of the bytes; on a GPU a fingerprint computed there (:func:`_device_digest`: no copy
    to the host, milliseconds for a gigabyte where the host hash takes seconds). Digests are comparable between
    tensors on the same kind of device."""
    data = t.detach()
    if data.device.type != "cpu":
        return _device_digest(data)
    data = data.contiguous()
    h = hashlib.blake2b(digest_size=16)
    h.update(str(tuple(data.shape)).encode())
    h.update(str(data.dtype).encode())
    if data.numel():
        h.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


_PRIME = (1 << 31) - 1  # residues below 2**31: a product of two stays below 2**62, a chunk's sum below 2**63
_MIX = ((48271, 12345, 99991), (69621, 54321, 7), (16807, 31337, 65537), (39373, 27183, 1000003))
_CHUNK_WORDS = 1 << 25


def _device_digest(data: torch.Tensor) -> str:
    """A fingerprint of a tensor's bytes in logical order, on its own device: its 32-bit words w_i (zero padded)
    summed as sum(w_i * r_k(i)) mod 2**31-1 for four position weights r_k(i) = ((a*i + b)**2 + c) mod p, so that a
    changed, moved or swapped word changes it. Exact integer arithmetic (no overflow), so the same bytes give the
    same value on any device and in any reduction order. Not a cryptographic hash: it detects changes, which is
    what the verifier's checks need (a candidate that wants to defeat an in-process check can do so anyway)."""
    flat = data.contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_zeros(0, dtype=torch.uint8)
    if raw.numel() % 4:
        raw = torch.cat([raw, raw.new_zeros(4 - raw.numel() % 4)])
    words = raw.view(torch.int32)
    acc = [0] * len(_MIX)
    for start in range(0, words.numel(), _CHUNK_WORDS):
        w = words[start:start + _CHUNK_WORDS].to(torch.int64).remainder_(_PRIME)
        idx = torch.arange(start, start + w.numel(), device=w.device, dtype=torch.int64).remainder_(_PRIME)
        for k, (a, b, c) in enumerate(_MIX):
            r = (idx * a + b).remainder_(_PRIME)
            r = (r * r + c).remainder_(_PRIME)
            acc[k] = (acc[k] + int(r.mul_(w).remainder_(_PRIME).sum())) % _PRIME
    head = f"{tuple(data.shape)}|{data.dtype}|{raw.numel()}"
    return hashlib.blake2b(head.encode(), digest_size=8).hexdigest() + "".join(f"{a:08x}" for a in acc)


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
    """Load what :func:`save` wrote — safely: ``weights_only`` refuses anything but tensors and plain data.
    Memory-mapped (copy on write): a tensor's bytes are read when used, once, not copied out of the file first."""
    return list(torch.load(path, map_location="cpu", weights_only=True, mmap=True))


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


def nbytes_of(desc: TensorInfo) -> int:
    """Bytes of a tensor as :func:`describe` wrote it (shape and dtype)."""
    try:
        itemsize = dtype_from_name(desc.dtype).itemsize
    except ValueError:
        itemsize = 4
    return int(desc.numel * itemsize)


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
