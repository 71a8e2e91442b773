"""What a candidate launched — DESIGN.md rule 7; KNOWN_HACKS #7.

Three views, joined into one list of :class:`KernelRecord`:

- Triton launches, recorded at the Python level by wrapping ``JITFunction.run`` (compiled mode) and
  ``InterpretedFunction.run`` (the interpreter) — on every machine; the first arguments of each kernel are kept so
  the kernel can be cross-compiled for instruction analysis;
- on a GPU, every device kernel from the torch profiler (CUPTI), with its device time and stream, classified as the
  candidate's own (a Triton kernel it launched, or a ``__global__`` function named in its source) or library;
- on the CPU, the aten operators the candidate's forward called outside its Triton launches (the work a library
  would do on a GPU), from a dispatch mode.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.export.runtime import install_interpreter_bf16_dot_fix  # noqa: F401 - re-exported

# aten operators that allocate or re-describe memory without computing: not "library work".
_FREE_ATEN = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "alias", "lift_fresh",
    "_local_scalar_dense", "resize_", "set_", "is_nonzero", "item", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "_has_compatible_shallow_copy_type", "size", "stride", "dim", "is_same_size",
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class KernelRecord:
    name: str
    origin: str  # "own" or "library"
    source: str  # "triton", "extension", "aten", "cuda" (a device kernel from the profiler)
    launches: int
    device_time_us: float | None  # None where not measured (CPU)
    streams: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "origin": self.origin,
            "source": self.source,
            "launches": self.launches,
            "device_time_us": self.device_time_us,
            "streams": list(self.streams),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelRecord:
        return cls(
            name=data["name"],
            origin=data["origin"],
            source=data["source"],
            launches=int(data["launches"]),
            device_time_us=data.get("device_time_us"),
            streams=tuple(data.get("streams", ())),
        )


def _jit_name(fn: Any) -> str:
    inner = getattr(fn, "fn", fn)
    return getattr(inner, "__name__", type(fn).__name__)


class LaunchRecorder:
    """Wraps Triton's launch entry points for the life of the process (the child's)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.host_s: defaultdict[str, float] = defaultdict(float)
        self.first: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}
        self.compiled: dict[str, Any] = {}  # name -> CompiledKernel (GPU), for its cubin
        self.depth = 0
        self.trial_index = 0  # set by the candidate job: picks the autotune config under the interpreter
        self.autotune_configs: defaultdict[str, set[int]] = defaultdict(set)  # kernel -> config indices run

    def install(self) -> None:
        from triton.runtime import jit

        self._wrap(jit.JITFunction)
        try:
            from triton.runtime import interpreter
        except ImportError:
            return
        self._wrap(interpreter.InterpretedFunction)

    def _wrap(self, cls: type) -> None:
        original = cls.run
        if getattr(original, "_kernelwright_wrapped", False):
            return
        recorder = self

        def run(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if warmup:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            name = _jit_name(fn)
            recorder.depth += 1
            start = time.perf_counter()
            try:
                result = original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                recorder.depth -= 1
                recorder.host_s[name] += time.perf_counter() - start
            recorder.counts[name] += 1
            if name not in recorder.first:
                recorder.first[name] = (fn, args, dict(kwargs))
            if result is not None and hasattr(result, "asm"):
                recorder.compiled[name] = result
            return result

        run._kernelwright_wrapped = True  # type: ignore[attr-defined]
        cls.run = run

    def reset_counts(self) -> None:
        self.counts.clear()
        self.host_s.clear()


def install_interpreter_autotune(recorder: LaunchRecorder) -> bool:
    """``triton.autotune`` with several configs needs a GPU driver to benchmark them, so under the interpreter it
    fails outright. Instead, run one config per trial, rotating through the list: every config an autotuned
    kernel could pick on a GPU gets checked for correctness on some trial."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    original = Autotuner.run
    if getattr(original, "_kernelwright_wrapped", False):
        return True

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        configs = self.configs
        if len(configs) <= 1:
            return original(self, *args, **kwargs)
        index = recorder.trial_index % len(configs)
        recorder.autotune_configs[_jit_name(self.fn)].add(index)
        self.configs = [configs[index]]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = configs

    run._kernelwright_wrapped = True  # type: ignore[attr-defined]
    Autotuner.run = run
    return True


class AtenRecorder:
    """Counts aten operators called outside Triton launches while active (CPU runs)."""

    def __init__(self, recorder: LaunchRecorder) -> None:
        self.ops: Counter[str] = Counter()
        self._recorder = recorder
        self._mode: Any = None

    def __enter__(self) -> AtenRecorder:
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                name = func.overloadpacket.__name__
                if outer._recorder.depth == 0 and name not in _FREE_ATEN and not func.is_view:
                    outer.ops[f"aten::{name}"] += 1
                return func(*args, **(kwargs or {}))

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def profile_cuda_kernels(call: Any) -> list[tuple[str, float, int]]:
    """Run ``call()`` under the torch profiler; return (kernel name, device time us, stream) per device kernel."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    found: list[tuple[str, float, int]] = []
    results = getattr(prof.profiler, "kineto_results", None)
    if results is not None:
        for ev in results.events():
            if "cuda" not in str(ev.device_type()).lower():
                continue
            duration_us = ev.duration_ns() / 1e3 if hasattr(ev, "duration_ns") else float(ev.duration_us())
            stream = int(ev.device_resource_id()) if hasattr(ev, "device_resource_id") else -1
            found.append((ev.name(), duration_us, stream))
        return found
    for ev in prof.events():  # older API
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            found.append((ev.name, float(getattr(ev, "device_time", getattr(ev, "cuda_time", 0.0))), -1))
    return found


def _own(name: str, triton_names: Iterable[str], cuda_names: Iterable[str]) -> str | None:
    for n in triton_names:
        if name == n or name.startswith(n + "_") or re.search(rf"\b{re.escape(n)}\b", name):
            return "triton"
    for n in cuda_names:
        if re.search(rf"\b{re.escape(n)}\b", name):
            return "extension"
    return None


def classify_device_kernels(events: Sequence[tuple[str, float, int]], triton_names: Iterable[str],
                            cuda_names: Iterable[str]) -> list[KernelRecord]:
    triton_names, cuda_names = list(triton_names), list(cuda_names)
    grouped: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for name, us, stream in events:
        grouped[name].append((us, stream))
    records = []
    for name, items in grouped.items():
        source = _own(name, triton_names, cuda_names)
        records.append(KernelRecord(
            name=name,
            origin="own" if source else "library",
            source=source or "cuda",
            launches=len(items),
            device_time_us=sum(us for us, _ in items),
            streams=tuple(sorted({s for _, s in items})),
        ))
    return sorted(records, key=lambda r: -(r.device_time_us or 0.0))


def cpu_kernel_records(recorder: LaunchRecorder, aten: Counter[str]) -> list[KernelRecord]:
    records = [
        KernelRecord(name=name, origin="own", source="triton", launches=count, device_time_us=None)
        for name, count in recorder.counts.most_common()
    ]
    records += [
        KernelRecord(name=name, origin="library", source="aten", launches=count, device_time_us=None)
        for name, count in aten.most_common()
    ]
    return records
