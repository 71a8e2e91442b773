"""Poisoning memory before a candidate call — protocol rule 5; integrity #1 and #13.

Two mechanisms, so that an output the candidate did not write cannot look right:

- the CUDA caching allocator's free blocks are overwritten with a byte pattern (every block the candidate's next
  ``torch.empty`` could be carved from), after growing the cache so that outputs of the expected size come from it;
- PyTorch's own ``fill_uninitialized_memory`` (under ``use_deterministic_algorithms(..., warn_only=True)``) fills
  every ``torch.empty*`` result with NaN (floats) or the largest integer — on the CPU as well as the GPU.

Pattern ``nan`` uses 0xFF bytes (a NaN in fp32/fp16/bf16) plus the NaN fill; pattern ``finite`` uses 0x41 bytes
(12.06 in fp32, 2.63 in fp16) without it, so a result that depends on leftover memory changes between the two.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from kernelwright.verify import trials

_BYTE = {trials.POISON_NAN: 0xFF, trials.POISON_FINITE: 0x41}


def _fill_free_cuda_blocks(device: torch.device, byte: int, min_free_bytes: int) -> int:
    stats = torch.cuda.memory_stats(device)
    free_cached = stats.get("reserved_bytes.all.current", 0) - stats.get("allocated_bytes.all.current", 0)
    if free_cached < min_free_bytes:
        try:  # grow the cache: the block returns to it when freed
            grow = torch.empty(min_free_bytes - free_cached, dtype=torch.uint8, device=device)
            del grow
        except torch.OutOfMemoryError:
            pass
    sizes = []
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device", device.index) != device.index:
            continue
        for block in segment.get("blocks", []):
            if block.get("state") == "inactive":
                sizes.append(int(block["size"]))
    held = []
    filled = 0
    for size in sorted(sizes, reverse=True):
        try:
            block = torch.empty(size, dtype=torch.uint8, device=device)
        except torch.OutOfMemoryError:
            continue
        block.fill_(byte)
        held.append(block)
        filled += size
    del held
    torch.cuda.synchronize(device)
    return filled


def poison(device: torch.device, pattern: str, *, min_free_bytes: int = 0) -> int:
    """Overwrite free device memory with ``pattern``; return the bytes filled (0 on the CPU)."""
    if device.type == "cuda":
        return _fill_free_cuda_blocks(device, _BYTE[pattern], min_free_bytes)
    return 0


_EMPTY_OPS = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided")


def _fill_bytes(t: torch.Tensor, byte: int) -> None:
    if t.numel() == 0:
        return
    if t.dtype == torch.bool:
        t.fill_(True)
        return
    raw = torch.empty(0, dtype=torch.uint8, device=t.device)
    raw.set_(t.untyped_storage())
    raw.fill_(byte)


@contextlib.contextmanager
def _fill_empty_with(byte: int) -> Iterator[None]:
    from torch.utils._python_dispatch import TorchDispatchMode

    class FillEmpty(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in _EMPTY_OPS and isinstance(out, torch.Tensor):
                _fill_bytes(out, byte)
            return out

    with FillEmpty():
        yield


@contextlib.contextmanager
def fill_uninitialized(pattern: str) -> Iterator[None]:
    """While active, every ``torch.empty*`` result holds the poison: NaN (pattern ``nan``, PyTorch's own
    deterministic fill) or 0x41 bytes (pattern ``finite``, a dispatch mode) — on the CPU as well as the GPU."""
    if pattern != trials.POISON_NAN:
        with _fill_empty_with(_BYTE[pattern]):
            yield
        return
    # The C switches directly: torch.use_deterministic_algorithms also imports torch._inductor (~2 s).
    c = torch._C
    previous = (c._get_deterministic_algorithms(), c._get_deterministic_algorithms_warn_only(),
                c._get_deterministic_fill_uninitialized_memory())
    c._set_deterministic_algorithms(True, warn_only=True)
    c._set_deterministic_fill_uninitialized_memory(True)
    try:
        yield
    finally:
        c._set_deterministic_algorithms(previous[0], warn_only=previous[1])
        c._set_deterministic_fill_uninitialized_memory(previous[2])
