"""What the box of one job shows it (isolation/box.py arranges it): every job its own PID namespace (or a
subreaper), no capabilities and its memory limit; an untrusted job (a candidate, the sanitizer's run of one) besides
the kernelwright cache read-only, the folders where other jobs' files live hidden, the cache's secret hidden, and
in view only its working directory, the files it must read and, read-only, what Python runs from."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _hidden_roots() -> list[str]:
    """Folders where other jobs' files live (every verify's working directory): hidden from an untrusted job."""
    import tempfile

    from kernelwright.config import config

    roots = [tempfile.gettempdir(), "/dev/shm", config.scratch_dir or ""]
    found: list[str] = []
    for root in roots:
        real = os.path.realpath(root) if root else ""
        if real and real != "/" and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _shared_lock_files() -> list[str]:
    """The GPU lock's files (a parallel bench's): every job on a GPU takes turns on them, so an untrusted job keeps
    them in view and writable wherever they lie (made here, since only an existing file can be bound)."""
    from kernelwright.config import config
    from kernelwright.hardware import gpu_lock

    path = config.gpu_lock or ""
    if not path:
        return []
    found = []
    for name in (path, path + ".gate", gpu_lock.hold_log(path)):
        with contextlib.suppress(OSError):
            os.close(os.open(name, os.O_RDWR | os.O_CREAT, 0o600))
            found.append(os.path.realpath(name))
    return found


def _outermost(paths: set[str]) -> list[str]:
    """``paths`` without those inside another of them."""
    return sorted(p for p in paths if not any(_under(p, [q]) and p != q for q in paths))


def box_plan(workdir: Path, memory_limit_bytes: int, *, untrusted: bool, keep: Sequence[str] = ()) -> dict[str, Any]:
    """What :mod:`kernelwright.isolation.box` arranges for one job. Every job: its own PID namespace (or a
    subreaper), no capabilities, the memory limit. An untrusted job besides: the kernelwright cache read-only, the
    temporary folders hidden, and back in view only its working directory, ``keep`` (the files it must read) and
    what Python itself is run from."""
    from kernelwright.config import config

    plan: dict[str, Any] = {"mode": config.job_box, "memory_limit": int(memory_limit_bytes), "drop_privileges": True}
    if not untrusted:
        return plan
    cache = Path(config.cache_dir)
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
    hidden = _hidden_roots()
    python = [sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              *sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep),
              str(Path(__file__).resolve().parents[2])]
    kept = [str(workdir.resolve()), *(os.path.realpath(k) for k in keep), *_shared_lock_files()]
    # What Python runs from (the interpreter, torch, kernelwright itself) is read-only to the job: code a later
    # job imports, or a trusted one, is not the candidate's to rewrite.
    # A path that is, or holds, a hidden folder (a script's own folder in /tmp first on sys.path) would bring it
    # back in view: such a path is left out (what Python needs inside it is on the list by its own name).
    code = _outermost({real for real in (os.path.realpath(p) for p in python if p and os.path.exists(p))
                       if not any(h == real or _under(h, [real]) for h in hidden)})
    keys = cache / "keys"  # the cache's secret (verify/decoys.py's digests): out of the job's sight
    with contextlib.suppress(OSError):
        keys.mkdir(parents=True, exist_ok=True, mode=0o700)
    plan.update(readonly=[*code, *([str(cache.resolve())] if cache.is_dir() else [])],
                hide=[*hidden, *([str(keys.resolve())] if keys.is_dir() else [])], keep=sorted({k for k in kept if _under(k, hidden) or _under(k, [str(cache.resolve())])}))
    return plan
