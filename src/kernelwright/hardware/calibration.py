"""Measured ceilings of the local GPU: what a large device-to-device copy and a library matmul actually reach.

These feed the verifier's *achievable* roofline floor (protocol rule 11). They are measured once per device,
driver and torch version (well under 15 s) and cached as JSON under ``config.cache_dir / "calibration"``:

    from kernelwright.hardware.calibration import measured_ceilings, load_cached_ceilings
    ceilings = measured_ceilings()                 # measures on first use, then reads the cache
    load_cached_ceilings("NVIDIA H200")            # never touches CUDA; None when not measured yet

Copy bandwidth counts read + write bytes. Matmul rates are for square random matrices, medians of several timed
repetitions with CUDA events: 8192 for fp16/bf16/tf32, 4096 for strict fp32 (no TF32) so that it stays fast.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import re
import statistics
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelwright.config import config

log = logging.getLogger(__name__)

CACHE_VERSION = 1
COPY_BYTES = 1 << 30  # 1 GiB source (2 GiB of traffic per copy)
MATMUL_SIZES = {"fp16": 8192, "bf16": 8192, "tf32": 8192, "fp32": 4096}
WARMUP_REPS = 2
TIMED_REPS = 7


@dataclass(frozen=True, kw_only=True)
class Ceilings:
    """What the device reached: ``copy_gbs`` (read + write GB/s) and ``matmul_tflops`` per dtype
    (``fp32`` strict IEEE, ``tf32``, ``fp16``, ``bf16``; a dtype the device lacks is absent)."""

    device_name: str
    copy_gbs: float
    matmul_tflops: Mapping[str, float] = field(default_factory=dict)
    measured_at: str  # ISO 8601, UTC
    torch_version: str
    driver_version: str
    details: Mapping[str, Any] = field(default_factory=dict)  # sizes, repetitions, per-rep times

    def to_json(self) -> dict[str, Any]:
        return {
            "version": CACHE_VERSION,
            "device_name": self.device_name,
            "copy_gbs": self.copy_gbs,
            "matmul_tflops": dict(self.matmul_tflops),
            "measured_at": self.measured_at,
            "torch_version": self.torch_version,
            "driver_version": self.driver_version,
            "details": dict(self.details),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ceilings:
        return cls(
            device_name=str(data["device_name"]),
            copy_gbs=float(data["copy_gbs"]),
            matmul_tflops={str(k): float(v) for k, v in dict(data.get("matmul_tflops") or {}).items()},
            measured_at=str(data["measured_at"]),
            torch_version=str(data["torch_version"]),
            driver_version=str(data.get("driver_version", "unknown")),
            details=dict(data.get("details") or {}),
        )


# ----------------------------------------------------------------------------------------------------- cache


def _cache_dir() -> Path:
    return Path(config.cache_dir) / "calibration"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower() or "unknown"


def cache_path(device_name: str, driver_version: str, torch_version: str) -> Path:
    name = f"{_slug(device_name)}__driver-{_slug(driver_version)}__torch-{_slug(torch_version)}.json"
    return _cache_dir() / name


def installed_torch_version() -> str:
    """torch's version from its distribution metadata (no import of torch, no CUDA)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def driver_version() -> str:
    """The NVIDIA kernel driver's version from ``/proc/driver/nvidia/version`` (no CUDA call); ``"unknown"``."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    match = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9][0-9.]+)", text)
    return match.group(1) if match else "unknown"


def load_cached_ceilings(
    device_name: str, *, driver: str | None = None, torch_version: str | None = None
) -> Ceilings | None:
    """The cached ceilings for this device, driver and torch version (defaults: the installed ones), or None.
    Reads files only; never touches CUDA."""
    path = cache_path(device_name, driver or driver_version(), torch_version or installed_torch_version())
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable calibration cache %s: %s", path, exc)
        return None
    if data.get("version") != CACHE_VERSION:
        return None
    try:
        return Ceilings.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("ignoring malformed calibration cache %s: %s", path, exc)
        return None


def store_ceilings(ceilings: Ceilings) -> Path:
    path = cache_path(ceilings.device_name, ceilings.driver_version, ceilings.torch_version)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(ceilings.to_json(), handle, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


# ----------------------------------------------------------------------------------------------------- measuring


def measured_ceilings(device_index: int = 0, *, refresh: bool = False) -> Ceilings:
    """The ceilings of CUDA device ``device_index``: from the cache unless ``refresh``, else measured and cached.

    Raises :class:`kernelwright.errors.ToolchainError` when there is no such CUDA device."""
    import torch

    from kernelwright.errors import ToolchainError

    if not torch.cuda.is_available() or device_index >= torch.cuda.device_count():
        raise ToolchainError(
            f"no CUDA device {device_index} to calibrate (torch {torch.__version__} sees "
            f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}); run on a GPU machine"
        )
    name = torch.cuda.get_device_name(device_index)
    if not refresh:
        cached = load_cached_ceilings(name, torch_version=installed_torch_version())
        if cached is not None:
            return cached
    from kernelwright.hardware import gpu_lock

    with gpu_lock.exclusive():  # a parallel bench: nothing else on the device while its ceilings are measured
        ceilings = _measure(torch, device_index, name)
    path = store_ceilings(ceilings)
    log.info("calibrated %s: copy %.0f GB/s, matmul %s; cached in %s", name, ceilings.copy_gbs,
             dict(ceilings.matmul_tflops), path)
    return ceilings


def _time_ms(torch: Any, fn: Callable[[], object], *, warmup: int = WARMUP_REPS, reps: int = TIMED_REPS) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)))
    return times


@contextlib.contextmanager
def _matmul_precision(torch: Any, *, allow_tf32: bool) -> Iterator[None]:
    saved_flag = torch.backends.cuda.matmul.allow_tf32
    saved_precision = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved_flag
        torch.set_float32_matmul_precision(saved_precision)


def _measure(torch: Any, device_index: int, name: str) -> Ceilings:
    device = torch.device("cuda", device_index)
    major, _minor = torch.cuda.get_device_capability(device_index)
    details: dict[str, Any] = {}
    with torch.cuda.device(device_index):
        free, _total = torch.cuda.mem_get_info(device_index)
        nbytes = min(COPY_BYTES, max(free // 8, 1 << 24)) // 16 * 16
        src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 255)
        dst = torch.empty_like(src)
        copy_ms = _time_ms(torch, lambda src=src, dst=dst: dst.copy_(src))
        copy_gbs = 2 * nbytes / (statistics.median(copy_ms) * 1e-3) / 1e9
        details["copy"] = {"bytes": nbytes, "ms": copy_ms}
        del src, dst

        rates: dict[str, float] = {}
        wanted = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        for key, dtype in wanted.items():
            if key in ("tf32", "bf16") and major < 8:
                continue  # no TF32/BF16 tensor cores before Ampere
            n = MATMUL_SIZES[key]
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            out = torch.empty(n, n, device=device, dtype=dtype)
            with _matmul_precision(torch, allow_tf32=(key == "tf32")):
                ms = _time_ms(torch, lambda a=a, b=b, out=out: torch.mm(a, b, out=out))
            rates[key] = 2 * n**3 / (statistics.median(ms) * 1e-3) / 1e12
            details[f"matmul_{key}"] = {"n": n, "ms": ms}
            del a, b, out
        torch.cuda.empty_cache()
    return Ceilings(
        device_name=name,
        copy_gbs=copy_gbs,
        matmul_tflops=rates,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        torch_version=installed_torch_version(),
        driver_version=driver_version(),
        details=details,
    )
