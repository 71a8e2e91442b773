"""References reused by the verifies of one run (issue 28): a search verifies many candidates of one problem under
one seed, and every one of them used to run the reference job again (13-40 s at full size on the H200).

An entry is what a reference job left for the rest of the protocol — its reports, the answers the parent loaded
(native and float64, and the module state the first forward changes) and the bytes of the files it wrote for the
candidate and the baselines (inputs, init arguments, weights). It lives in the orchestrator's memory only: the
answers are never written anywhere a later candidate could read them, and each verify gets its own fresh copy of
the shared files, so a candidate that rewrites its inputs on disk cannot reach the next one's.

The key holds everything the reference's results depend on: the problem's content (and path: a problem may read
files beside it), the seed, the trial plan, the sizes, the device, the precision policy, torch's version. Entries
are evicted least recently used first, within ``reference_cache_gb``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.isolation.process import ChildRun


@dataclass(frozen=True)
class Entry:
    run: ChildRun
    refs: dict[int, dict[str, Any]]
    ref_state: dict[str, Any]
    ref_state64: dict[str, Any]
    shared_files: tuple[tuple[str, bytes], ...]
    nbytes: int

    def write_shared(self, shared: Path) -> None:
        """The files the reference wrote for the other jobs, afresh into this verify's own shared folder."""
        for name, data in self.shared_files:
            (shared / name).write_bytes(data)


def key_of(problem_sha256: str, spec: dict[str, Any], torch_version: str) -> str:
    """The cache key of a reference job's spec (its folders left out: they differ per verify)."""
    fields = {k: v for k, v in spec.items() if k not in ("shared_dir", "private_dir", "alone")}
    text = json.dumps({"problem_sha256": problem_sha256, "torch": torch_version, "spec": fields}, sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def make_entry(run: ChildRun, refs: dict[int, dict[str, Any]], ref_state: dict[str, Any],
               ref_state64: dict[str, Any], shared: Path, capacity_bytes: int) -> Entry | None:
    """The entry, or None where it would not fit in ``capacity_bytes`` (then no file is read)."""
    paths = [p for p in sorted(shared.iterdir()) if p.is_file()]
    nbytes = _tensor_bytes(refs) + _tensor_bytes(ref_state) + _tensor_bytes(ref_state64) + sum(
        p.stat().st_size for p in paths)
    if not 0 < nbytes <= capacity_bytes:
        return None
    files = tuple((p.name, p.read_bytes()) for p in paths)
    return Entry(run=run, refs=refs, ref_state=ref_state, ref_state64=ref_state64, shared_files=files, nbytes=nbytes)


def physical_bytes() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def available_bytes() -> int:
    """The kernel's estimate of memory available without swapping (``MemAvailable``; all of it where unreadable)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_bytes()


class ReferenceCache:
    """A bounded, thread-safe LRU of :class:`Entry` by key (bench and search verify from several threads)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        # Processes whose caches share this machine's memory (a bench's --jobs workers each hold one): the default
        # budget is split between them, and four workers at a quarter of the memory each were an OOM kill.
        self.sharers = 1

    def capacity_bytes(self) -> int:
        from kernelwright.config import config

        gigabytes = float(config.reference_cache_gb)
        if gigabytes < 0:
            return int(0.25 * physical_bytes() / max(1, self.sharers))
        return int(gigabytes * (1 << 30))

    def room_bytes(self) -> int:
        """How large a new entry may be now: within the budget, and leaving an eighth of the machine's memory
        available (the verify's files in /dev/shm, the other jobs' processes and their tensors share it)."""
        held = sum(e.nbytes for e in self._entries.values())
        spare = available_bytes() + min(held, self.capacity_bytes()) - physical_bytes() // 8
        return max(0, min(self.capacity_bytes(), spare))

    def get(self, key: str) -> Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def fits(self, nbytes: int) -> bool:
        return 0 < nbytes <= self.capacity_bytes()

    def put(self, key: str, entry: Entry) -> bool:
        """Keep ``entry`` (evicting the least recently used ones to make room); False where it alone is larger
        than the whole budget, or the budget is 0."""
        capacity = self.capacity_bytes()
        if not 0 < entry.nbytes <= capacity:
            return False
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = entry
            while sum(e.nbytes for e in self._entries.values()) > capacity:
                self._entries.popitem(last=False)
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


CACHE = ReferenceCache()
