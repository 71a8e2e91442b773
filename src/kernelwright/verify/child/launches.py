"""What a candidate launched — protocol rule 7; integrity #7.

Three views, joined into one list of :class:`KernelRecord`:

- Triton launches, recorded at the Python level by wrapping ``JITFunction.run`` (compiled mode) and
  ``InterpretedFunction.run`` (the interpreter) — on every machine; the first arguments of each kernel are kept so
  the kernel can be cross-compiled for instruction analysis;
- on a GPU, every device kernel from the torch profiler (CUPTI), with its device time and stream, classified as the
  candidate's own or library. Own means *launched by the candidate*: a Triton kernel the recorder saw launched (the
  exact name), or a ``__global__`` function of CUDA source the candidate compiled through ``load_inline``/``load``
  (its whole qualified name). A name merely written in the candidate's file proves nothing: a docstring holding
  ``__global__ void native(`` must not turn ``at::native::…`` into the candidate's work;
- on the CPU, the aten operators the candidate's forward called outside its Triton launches (the work a library
  would do on a GPU), from a dispatch mode.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from kernelwright.jobs import KernelRecord
from kernelwright.problem.files import global_functions

# aten operators that allocate or re-describe memory without computing: not "library work".
_FREE_ATEN = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "alias", "lift_fresh",
    "_local_scalar_dense", "resize_", "set_", "is_nonzero", "item", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "_has_compatible_shallow_copy_type", "size", "stride", "dim", "is_same_size",
}  # fmt: skip


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
        self.launched: set[str] = set()  # every Triton kernel launched so far (names, for the profiler's list)
        self.extension_calls: Counter[str] = Counter()  # calls into the candidate's compiled CUDA extensions
        self.cuda_functions: set[str] = set()  # __global__ functions of the CUDA sources the candidate compiled
        self.cuda_namespaces: set[str] = set()  # namespaces those sources declare
        self.extension_files: dict[str, str] = {}  # extension name -> its built shared object
        self.library_triton: Counter[str] = Counter()  # Triton kernels of installed libraries, launched

    def own_calls(self) -> int:
        """Launches of the candidate's own code since the last reset: Triton kernels plus extension calls."""
        return sum(self.counts.values()) + sum(self.extension_calls.values())

    def install(self) -> None:
        from triton.runtime import jit

        self._wrap(jit.JITFunction)
        self._wrap_direct_launches()
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
            if _installed_code(fn):
                # A Triton kernel of an installed library (Liger, torch's own Triton ops): library work.
                recorder.library_triton[name] += 1
                recorder.depth += 1
                try:
                    return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
                finally:
                    recorder.depth -= 1
            recorder.depth += 1
            start = time.perf_counter()
            try:
                result = original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                recorder.depth -= 1
                recorder.host_s[name] += time.perf_counter() - start
            recorder.counts[name] += 1
            recorder.launched.add(name)
            if name not in recorder.first:
                recorder.first[name] = (fn, args, dict(kwargs))
            if result is not None and hasattr(result, "asm"):
                recorder.compiled[name] = result
            return result

        run._kernelwright_wrapped = True  # type: ignore[attr-defined]
        cls.run = run

    def _wrap_direct_launches(self) -> None:
        """A compiled kernel launched directly (``kernel.warmup(...)`` then ``compiled[grid](...)``) bypasses
        ``JITFunction.run``; every real launch asks the compiled kernel for its launch metadata, so count there the
        launches made outside ``run``."""
        try:
            from triton.compiler.compiler import CompiledKernel
        except ImportError:
            return
        original = getattr(CompiledKernel, "launch_metadata", None)
        if original is None or getattr(original, "_kernelwright_wrapped", False):
            return
        recorder = self

        def launch_metadata(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.depth == 0:
                name = str(getattr(kernel, "name", "") or "")
                if _installed_code(getattr(getattr(kernel, "src", None), "fn", None)):
                    recorder.library_triton[name] += 1
                else:
                    recorder.counts[name] += 1
                    recorder.launched.add(name)
            return original(kernel, *args, **kwargs)

        launch_metadata._kernelwright_wrapped = True  # type: ignore[attr-defined]
        CompiledKernel.launch_metadata = launch_metadata

    def record_cuda_sources(self, sources: Iterable[str]) -> None:
        for text in sources:
            self.cuda_functions.update(global_functions(text))
            for declared in _NAMESPACE.findall(text):  # "namespace kw::ops {" declares kw and ops
                if declared:
                    self.cuda_namespaces.update(part.strip() for part in declared.split("::"))
                else:
                    self.cuda_namespaces.add(_ANONYMOUS)

    def reset_counts(self) -> None:
        self.counts.clear()
        self.host_s.clear()
        self.extension_calls.clear()
        self.library_triton.clear()


_NAMESPACE = re.compile(r"\bnamespace\s*((?:\w+(?:\s*::\s*\w+)*)?)\s*\{")


def _installed_roots() -> tuple[str, ...]:
    import site
    import sysconfig

    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


def _installed_code(fn: Any) -> bool:
    """Whether a jit function's Python source lives in an installed package (site-packages, the standard library)
    rather than in the candidate's own files."""
    inner = getattr(fn, "fn", fn)
    filename = getattr(getattr(inner, "__code__", None), "co_filename", None)
    if not filename:
        return False
    path = os.path.realpath(filename)
    return path.startswith(_INSTALLED_ROOTS) or f"{os.sep}site-packages{os.sep}" in path \
        or f"{os.sep}dist-packages{os.sep}" in path


_INSTALLED_ROOTS = _installed_roots()


def install_extension_recorder(recorder: LaunchRecorder) -> None:
    """Wrap ``torch.utils.cpp_extension.load_inline``/``load`` (GPU runs): remember the ``__global__`` functions of
    the CUDA sources the candidate really compiled, and count calls into the module it gets back."""
    import torch.utils.cpp_extension as ext

    def counted(module: Any) -> Any:
        for attr in dir(module):
            fn = getattr(module, attr)
            if attr.startswith("__") or not callable(fn) or isinstance(fn, type) or getattr(
                    fn, "_kernelwright_counted", False):
                continue

            def call(*args: Any, _fn: Any = fn, _name: str = attr, **kwargs: Any) -> Any:
                recorder.extension_calls[_name] += 1
                recorder.depth += 1
                try:
                    return _fn(*args, **kwargs)
                finally:
                    recorder.depth -= 1

            call._kernelwright_counted = True  # type: ignore[attr-defined]
            try:
                setattr(module, attr, call)
            except (AttributeError, TypeError):
                continue
        return module

    def sources_of(args: tuple[Any, ...], kwargs: dict[str, Any], inline: bool) -> list[str]:
        if inline:
            cuda = kwargs.get("cuda_sources", args[1] if len(args) > 1 else None)
            cpp = kwargs.get("cpp_sources", args[0] if args else None)
            texts = []
            for part in (cuda, cpp):
                texts += [part] if isinstance(part, str) else list(part or [])
            return texts
        paths = kwargs.get("sources", args[0] if args else [])
        texts = []
        for path in [paths] if isinstance(paths, str) else list(paths or []):
            try:
                texts.append(Path(path).read_text(errors="replace"))
            except OSError:
                continue
        return texts

    for attr, inline in (("load_inline", True), ("load", False)):
        original = getattr(ext, attr, None)
        if original is None or getattr(original, "_kernelwright_wrapped", False):
            continue

        def load(name: Any, *args: Any, _original: Any = original, _inline: bool = inline, **kwargs: Any) -> Any:
            recorder.record_cuda_sources(sources_of(args, kwargs, _inline))
            module = _original(name, *args, **kwargs)
            if getattr(module, "__file__", None):
                recorder.extension_files[str(name)] = str(module.__file__)
            return counted(module)

        load._kernelwright_wrapped = True  # type: ignore[attr-defined]
        setattr(ext, attr, load)


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


_ANONYMOUS = "(anonymous namespace)"


def qualified_name(demangled: str) -> tuple[str, ...]:
    """The scope path of a profiler kernel name, without return type, template arguments or parameters:
    ``void (anonymous namespace)::softmax_warp_forward<float, 10>(float*, …)`` gives
    ``("(anonymous namespace)", "softmax_warp_forward")``; ``add_kernel(float*, int)`` gives ``("add_kernel",)``."""
    text = demangled.replace(_ANONYMOUS, "\0")
    depth, kept = 0, []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                break
            kept.append(ch)
    words = "".join(kept).split()
    if not words:
        return ()
    return tuple(part.replace("\0", _ANONYMOUS) for part in words[-1].split("::") if part)


def _own(name: str, triton_names: set[str], cuda_functions: set[str], cuda_namespaces: set[str]) -> str | None:
    # Triton names the device kernel after the jit function (older releases appended a specialisation suffix
    # such as "_0d1d2de").
    if name in triton_names or any(
            name.startswith(n + "_") and re.fullmatch(r"[0-9cde]+", name[len(n) + 1:]) for n in triton_names):
        return "triton"
    path = qualified_name(name)
    if path and path[-1] in cuda_functions and all(scope in cuda_namespaces for scope in path[:-1]):
        return "extension"
    return None


def classify_device_kernels(events: Sequence[tuple[str, float, int]], triton_names: Iterable[str],
                            cuda_functions: Iterable[str] = (), cuda_namespaces: Iterable[str] = ()) -> list[KernelRecord]:
    """Group the profiler's kernels by name; own = launched by the candidate (see the module's docstring)."""
    triton_set, functions, namespaces = set(triton_names), set(cuda_functions), set(cuda_namespaces)
    grouped: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for name, us, stream in events:
        grouped[name].append((us, stream))
    records = []
    for name, items in grouped.items():
        source = _own(name, triton_set, functions, namespaces)
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
        KernelRecord(name=name, origin="library", source="triton", launches=count, device_time_us=None)
        for name, count in recorder.library_triton.most_common()
    ]
    records += [
        KernelRecord(name=name, origin="library", source="aten", launches=count, device_time_us=None)
        for name, count in aten.most_common()
    ]
    return records

