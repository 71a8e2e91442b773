"""Compiling a Triton kernel for any NVIDIA arch without a GPU, specialised exactly as Triton's JIT would.

    from kernelwright.inspect.triton_compile import compile_for_arch
    artifact = compile_for_arch(add_kernel, (x, y, out, n), {"BLOCK": 1024}, "sm_90a")
    artifact.cubin, artifact.ptx, artifact.n_regs, artifact.ptxas_log

Given the launch's actual arguments, Triton's own binder (``create_function_from_signature``) computes the
specialisation -- pointer dtypes, integer widths, the divisibility-by-16 of pointers and integers that lets 128-bit
accesses appear, constexprs -- and ``JITFunction._pack_args`` turns it into the ``ASTSource`` that the JIT compiles.
These are the same calls ``JITFunction.run`` makes in triton 3.6 and 3.9; only the target differs (a
``GPUTarget("cuda", cc, 32)`` instead of the driver's).

Works on ``triton.autotune`` / ``triton.heuristics`` wrappers (the chosen config and computed values are applied) and
under the interpreter (``TRITON_INTERPRET=1``), where ``@triton.jit`` yields ``InterpretedFunction`` objects: those
are rebuilt as ``JITFunction`` s, and ``triton.language`` attributes that the interpreter leaves patched after a
launch (its device-function calls patch ``tl.core`` without restoring it, triton 3.6 and 3.9) are restored while
compiling. Call :func:`capture_language_state` before the first interpreted launch for the most reliable restore.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import inspect
import io
import json
import logging
import os
import re
import sys
import tempfile
import time
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.config import config
from kernelwright.errors import InputError, ToolchainError
from kernelwright.hardware.spec import canonical_arch, compute_capability_of

log = logging.getLogger(__name__)

LOG_CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class CompiledArtifact:
    """One Triton kernel compiled for one arch. ``n_spills`` is spill-store bytes / 4 (Triton's convention of
    counting 32-bit words); ``shared_bytes`` is the kernel's dynamic shared memory (``metadata.shared``)."""

    name: str
    arch: str
    cubin: bytes
    ptx: str
    n_regs: int
    n_spills: int
    shared_bytes: int
    num_warps: int
    num_stages: int | None
    ptxas_log: str
    signature: Mapping[str, str] = field(default_factory=dict)
    constexprs: Mapping[str, str] = field(default_factory=dict)
    triton_version: str = ""
    compile_seconds: float = 0.0

    @property
    def threads_per_block(self) -> int:
        return self.num_warps * 32

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arch": self.arch,
            "cubin_bytes": len(self.cubin),
            "cubin_sha256": hashlib.sha256(self.cubin).hexdigest(),
            "n_regs": self.n_regs,
            "n_spills": self.n_spills,
            "shared_bytes": self.shared_bytes,
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "signature": dict(self.signature),
            "constexprs": dict(self.constexprs),
            "triton_version": self.triton_version,
            "compile_seconds": round(self.compile_seconds, 3),
            "ptxas_log": self.ptxas_log,
        }


# ------------------------------------------------------------------------------------------------ interpreter


_MISSING = object()
_SNAPSHOT: dict[int, tuple[object, dict[str, object]]] | None = None


def _language_objects() -> list[object]:
    import triton.language as tl

    objects: list[object] = [tl, tl.core, tl.math, tl.tensor, tl.dtype]
    for extra in ("tensor_descriptor_base", "condition"):
        value = getattr(tl.core, extra, None)
        if value is not None:
            objects.append(value)
    standard = getattr(tl, "standard", None)
    if standard is not None:
        objects.append(standard)
    return objects


def _language_modules() -> list[types.ModuleType]:
    return [m for name, m in list(sys.modules.items())
            if isinstance(m, types.ModuleType) and (name == "triton.language" or name.startswith("triton.language."))]


def capture_language_state() -> None:
    """Record ``triton.language`` as it is now, so that :func:`compile_for_arch` can undo what the interpreter
    leaves patched. Cheap; call it in a process that will run interpreted kernels before the first launch."""
    global _SNAPSHOT
    if _SNAPSHOT is None:
        _SNAPSHOT = {id(obj): (obj, dict(vars(obj))) for obj in _language_objects()}
        if any(_interpreter_made(v) for _, values in _SNAPSHOT.values() for v in values.values()):
            log.info("triton.language was already patched by the interpreter when captured")


def _interpreter_made(value: object) -> bool:
    try:
        import triton.runtime.interpreter as interpreter
    except ImportError:  # pragma: no cover - triton without the interpreter
        return False
    if isinstance(value, property):
        value = value.fget
    if isinstance(value, functools.partial):
        value = value.func
    if value is builtins.print:
        return True
    code = getattr(value, "__code__", None)
    return code is not None and code.co_filename == interpreter.__file__


def _original_value(obj: object, name: str, value: object) -> object:
    kwdefaults = getattr(value, "__kwdefaults__", None) or {}
    member = kwdefaults.get("member", _MISSING)  # the interpreter's wrapper of a builtin keeps the original
    if member is not _MISSING and not _interpreter_made(member):
        return member
    if _SNAPSHOT is not None and id(obj) in _SNAPSHOT:
        saved = _SNAPSHOT[id(obj)][1].get(name, _MISSING)
        if saved is _MISSING:
            return _MISSING  # added by the interpreter: remove
        if not _interpreter_made(saved):
            return saved
    import triton.language as tl

    for twin in (tl, tl.core):  # module-level names are exported by both triton.language and .core
        if isinstance(obj, types.ModuleType) and twin is not obj:
            other = vars(twin).get(name, _MISSING)
            if other is not _MISSING and not _interpreter_made(other):
                return other
    return None  # unknown: leave it


@contextlib.contextmanager
def pristine_language() -> Iterator[None]:
    """Undo, for the duration of the block, what the Triton interpreter left patched in ``triton.language``."""
    changes: list[tuple[object, str, object]] = []
    unresolved: list[str] = []
    for obj in _language_objects():
        for name, value in list(vars(obj).items()):
            if not _interpreter_made(value):
                continue
            original = _original_value(obj, name, value)
            if original is None:
                unresolved.append(f"{getattr(obj, '__name__', obj)}.{name}")
                continue
            changes.append((obj, name, value))
            if original is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, original)
    if unresolved:
        log.debug("interpreter patches left in place: %s", ", ".join(unresolved[:10]))
    # triton.language's own @jit functions (tl.sum, tl.max, tl.cdiv, ...) are InterpretedFunctions under the
    # interpreter: the compiler needs JITFunctions in their place
    for module in _language_modules():
        for name, value in list(vars(module).items()):
            if _is_interpreted(value):
                changes.append((module, name, value))
                setattr(module, name, as_jit_function(value))
    try:
        yield
    finally:
        for obj, name, value in reversed(changes):
            setattr(obj, name, value)


def _is_interpreted(obj: object) -> bool:
    return type(obj).__name__ == "InterpretedFunction" and hasattr(obj, "fn")


_JIT_MEMO: dict[int, tuple[object, Any]] = {}


def as_jit_function(obj: Any) -> Any:
    """A ``triton.runtime.jit.JITFunction`` for ``obj``: itself, or one rebuilt from an ``InterpretedFunction``
    (with the helpers it calls rebuilt too, through its globals and closure)."""
    from triton.runtime.jit import JITFunction

    if isinstance(obj, JITFunction):
        return obj
    if not _is_interpreted(obj):
        raise InputError(f"{obj!r} is not a @triton.jit function (got {type(obj).__name__})")
    memo = _JIT_MEMO.get(id(obj))
    if memo is not None and memo[0] is obj:
        return memo[1]
    pyfn = obj.fn
    new_globals = dict(pyfn.__globals__)
    closure = pyfn.__closure__
    jit_kwargs = {k: v for k, v in (getattr(obj, "kwargs", None) or {}).items()
                  if k in inspect.signature(JITFunction.__init__).parameters}
    clone = types.FunctionType(pyfn.__code__, new_globals, pyfn.__name__, pyfn.__defaults__, closure)
    clone.__kwdefaults__ = pyfn.__kwdefaults__
    clone.__annotations__ = dict(getattr(pyfn, "__annotations__", {}))
    clone.__module__ = pyfn.__module__
    clone.__qualname__ = pyfn.__qualname__
    clone.__doc__ = pyfn.__doc__
    jit = JITFunction(clone, **jit_kwargs)
    _JIT_MEMO[id(obj)] = (obj, jit)  # before recursing: kernels may be mutually recursive through globals
    for key, value in list(new_globals.items()):
        if _is_interpreted(value):
            new_globals[key] = as_jit_function(value)
    if closure:
        cells = tuple(
            types.CellType(as_jit_function(c.cell_contents)) if _cell_is_interpreted(c) else c for c in closure
        )
        if any(a is not b for a, b in zip(cells, closure)):
            clone = types.FunctionType(pyfn.__code__, new_globals, pyfn.__name__, pyfn.__defaults__, cells)
            clone.__kwdefaults__ = pyfn.__kwdefaults__
            clone.__annotations__ = dict(getattr(pyfn, "__annotations__", {}))
            clone.__module__, clone.__qualname__ = pyfn.__module__, pyfn.__qualname__
            jit = JITFunction(clone, **jit_kwargs)
            _JIT_MEMO[id(obj)] = (obj, jit)
    return jit


def _cell_is_interpreted(cell: types.CellType) -> bool:
    try:
        return _is_interpreted(cell.cell_contents)
    except ValueError:  # empty cell
        return False


# ------------------------------------------------------------------------------------------------ wrappers


def resolve_launch(kernel: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Peel ``triton.autotune`` / ``triton.heuristics`` wrappers, applying what each adds to the launch: the
    autotuner's chosen config (``best_config`` after a launch) and the heuristics' computed values."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    kwargs = dict(kwargs)
    while isinstance(kernel, (Autotuner, Heuristics)):
        if isinstance(kernel, Heuristics):
            named = dict(zip(kernel.arg_names, args))
            for name, heuristic in kernel.values.items():
                kwargs[name] = heuristic({**named, **kwargs})
        else:
            kwargs.update(_autotune_config(kernel, args, kwargs).all_kwargs())
        kernel = kernel.fn
    return kernel, tuple(args), kwargs


def _autotune_config(tuner: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    if len(tuner.configs) == 1:
        return tuner.configs[0]
    named = {**dict(zip(tuner.arg_names, args)), **kwargs}
    key_values = [named[k] for k in tuner.keys if k in named]
    key_values += [str(v.dtype) for k, v in named.items() if k in tuner.arg_names and hasattr(v, "dtype")]
    cached = getattr(tuner, "cache", {}).get(tuple(key_values))
    if cached is not None:
        return cached
    best = getattr(tuner, "best_config", None)
    if best is not None:
        return best
    log.warning("autotuner for %s has not chosen a config for these arguments; using its first config",
                getattr(tuner, "base_fn", tuner).__name__ if hasattr(tuner, "base_fn") else "a kernel")
    return tuner.configs[0]


# ------------------------------------------------------------------------------------------------ compiling


_BINDERS: dict[tuple[int, int], tuple[Any, Any, Any, Any]] = {}
_ARTIFACTS: dict[tuple[Any, ...], tuple[Any, CompiledArtifact]] = {}  # key -> (the JITFunction, artifact)
_LAUNCH_ONLY_KWARGS = ("grid", "warmup", "stream")


def _binder(jit: Any, capability: int) -> tuple[Any, Any, Any]:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    key = (id(jit), capability)
    cached = _BINDERS.get(key)
    if cached is None or cached[0] is not jit:
        target = GPUTarget("cuda", capability, 32)
        backend = make_backend(target)
        binder = create_function_from_signature(jit.signature, jit.params, backend)
        cached = (jit, target, backend, binder)
        _BINDERS[key] = cached
    return cached[1], cached[2], cached[3]


def compile_for_arch(jit_fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], arch: str) -> CompiledArtifact:
    """Compile ``jit_fn`` for ``arch`` (``"sm_80"``, ``"sm_90a"``, ``"sm_100a"``, ...) as Triton's JIT would for
    a launch with these arguments (tensors on any device, ints, floats, constexpr and ``num_warps``/``num_stages``
    keywords). Needs no GPU. Repeated calls with the same function, specialisation and arch are served from memory;
    Triton's own disk cache serves repeated processes. A kernel that does not compile raises
    ``triton.compiler.CompilationError`` (the caller turns it into a finding)."""
    import triton

    name = canonical_arch(arch)
    major, minor = compute_capability_of(name)
    capability = major * 10 + minor
    kernel, args, launch_kwargs = resolve_launch(jit_fn, tuple(args), kwargs)
    for key in _LAUNCH_ONLY_KWARGS:
        launch_kwargs.pop(key, None)
    # A candidate that rewrites its PTX (generate/ptx_variant.py) compiles in its scope (Triton's stages hook and
    # the rewrite's own cache), as its launches do.
    ptx_scope = getattr(kernel, "kernelwright_ptx_scope", None) or getattr(jit_fn, "kernelwright_ptx_scope", None)
    ptx_key = getattr(kernel, "kernelwright_ptx_key", None) or getattr(jit_fn, "kernelwright_ptx_key", None)
    jit = as_jit_function(kernel)
    target, backend, binder = _binder(jit, capability)
    bound_args, specialization, options = binder(*args, **launch_kwargs)
    sig_names = {p.name for p in jit.params}
    cache_key = (
        id(jit), capability, str(specialization),
        tuple(sorted((k, repr(v)) for k, v in launch_kwargs.items() if k not in sig_names)),
        ptx_key,
    )
    cached = _ARTIFACTS.get(cache_key)
    if cached is not None and cached[0] is jit:
        return cached[1]
    options, signature, constexprs, attrs = jit._pack_args(backend, launch_kwargs, bound_args, specialization,
                                                           options)
    source = triton.compiler.ASTSource(jit, signature, constexprs, attrs)
    started = time.perf_counter()
    compiled, printed = _compile(triton, source, target, options, fresh=False, ptx_scope=ptx_scope)
    cubin: bytes = compiled.asm["cubin"]
    ptxas_log = _cached_log(cubin) if "ptxas" not in printed else None
    if "ptxas" not in printed and ptxas_log is None:
        # Triton's cache served the cubin, so no ptxas ran: compile once more, bypassing that cache, for the log of
        # exactly this cubin (re-running ptxas with guessed flags can disagree, e.g. on spills)
        compiled, printed = _compile(triton, source, target, options, fresh=True, ptx_scope=ptx_scope)
        cubin = compiled.asm["cubin"]
    elapsed = time.perf_counter() - started
    ptx: str = compiled.asm["ptx"]
    ptx_arch = _ptx_target(ptx) or name
    if ptxas_log is None:
        ptxas_log = _ptxas_log(printed, cubin, ptx, ptx_arch, options)
    from kernelwright.inspect.ptxas import parse_ptxas_log

    kernel_name = compiled.metadata.name
    record = parse_ptxas_log(ptxas_log).functions.get(kernel_name)
    artifact = CompiledArtifact(
        name=kernel_name,
        arch=ptx_arch,
        cubin=cubin,
        ptx=ptx,
        n_regs=(record.registers if record and record.registers else _registers(cubin, ptx_arch, kernel_name)),
        n_spills=((record.spill_store_bytes or 0) // 4) if record else 0,
        shared_bytes=int(getattr(compiled.metadata, "shared", 0) or 0),
        num_warps=int(compiled.metadata.num_warps),
        num_stages=getattr(compiled.metadata, "num_stages", None),
        ptxas_log=ptxas_log,
        signature={k: str(v) for k, v in signature.items()},
        constexprs={_constexpr_name(jit, k): repr(v) for k, v in constexprs.items()},
        triton_version=triton.__version__,
        compile_seconds=elapsed,
    )
    _ARTIFACTS[cache_key] = (jit, artifact)
    log.info("compiled %s for %s in %.2f s (%d registers, %d B shared)", kernel_name, ptx_arch, elapsed,
             artifact.n_regs, artifact.shared_bytes)
    return artifact


def _constexpr_name(jit: Any, key: Any) -> str:
    if isinstance(key, tuple) and key and isinstance(key[0], int) and key[0] < len(jit.arg_names):
        return ".".join([jit.arg_names[key[0]], *map(str, key[1:])])
    return str(key)


def _ptx_target(ptx: str) -> str | None:
    match = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    return match.group(1) if match else None


def _compile(triton: Any, source: Any, target: Any, options: Any, *, fresh: bool,
             ptx_scope: Any = None) -> tuple[Any, str]:
    """``triton.compile`` with ptxas's log printed (and captured) if ptxas runs; ``fresh`` bypasses Triton's cache;
    ``ptx_scope``: a PTX-rewriting candidate's compile scope (generate/ptx_variant.py)."""
    captured = io.StringIO()
    with pristine_language(), _triton_knobs(fresh=fresh), contextlib.redirect_stdout(captured), \
            (ptx_scope() if ptx_scope is not None else contextlib.nullcontext()):
        compiled = triton.compile(source, target=target, options=options.__dict__)
    return compiled, captured.getvalue()


@contextlib.contextmanager
def _triton_knobs(*, fresh: bool) -> Iterator[None]:
    """Have Triton print ptxas's ``-v`` log on a compile; with ``fresh``, compile even if its cache has the kernel."""
    try:
        from triton import knobs
    except ImportError:  # pragma: no cover - very old triton
        yield
        return
    nvidia = getattr(knobs, "nvidia", None)
    compilation = getattr(knobs, "compilation", None)
    with contextlib.ExitStack() as stack:
        if nvidia is not None and hasattr(nvidia, "dump_ptxas_log"):
            stack.enter_context(nvidia.scope())
            nvidia.dump_ptxas_log = True
        if fresh and compilation is not None and hasattr(compilation, "always_compile"):
            stack.enter_context(compilation.scope())
            compilation.always_compile = True
        yield


def _log_cache_path(cubin: bytes) -> Path:
    return Path(config.cache_dir) / "ptxas-logs" / f"{hashlib.sha256(cubin).hexdigest()}-v{LOG_CACHE_VERSION}.json"


def _cached_log(cubin: bytes) -> str | None:
    try:
        return str(json.loads(_log_cache_path(cubin).read_text())["log"])
    except (OSError, ValueError, KeyError):
        return None


def _ptxas_log(printed: str, cubin: bytes, ptx: str, arch: str, options: Any) -> str:
    """ptxas's log for this cubin: as Triton printed it, else (a Triton too old to print it) from re-running the
    same ptxas on the PTX with Triton's main flags. Cached by the cubin's hash."""
    if "ptxas" in printed:
        text = "\n".join(line for line in printed.splitlines() if line.strip())
    else:
        text = _rerun_ptxas(ptx, arch, options)
    _store_log(_log_cache_path(cubin), text)
    return text


def _store_log(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump({"log": text}, handle)
        os.replace(tmp, path)
    except OSError as exc:
        log.info("cannot cache ptxas log in %s: %s", path.parent, exc)


def _triton_ptxas(capability: int) -> Path | None:
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return Path(get_ptxas(capability).path)
    except Exception as exc:  # noqa: BLE001 - any failure here just means "use our own search"
        log.debug("Triton's ptxas lookup failed: %s", exc)
        return None


def _rerun_ptxas(ptx: str, arch: str, options: Any) -> str:
    from kernelwright.inspect import tools

    major, minor = compute_capability_of(arch)
    ptxas = _triton_ptxas(major * 10 + minor) or tools.find_tool("ptxas", arch)
    flags = ["-v", "-lineinfo", f"--gpu-name={arch}"]
    if not getattr(options, "enable_fp_fusion", True):
        flags.append("--fmad=false")
    with tempfile.TemporaryDirectory(prefix="kw-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        result = tools.run_tool(ptxas, [*flags, str(src), "-o", str(Path(tmp) / "kernel.cubin")])
    if result.returncode != 0:
        raise ToolchainError(f"ptxas ({ptxas}) failed to re-assemble Triton's PTX for {arch}: "
                             f"{result.stderr.strip()[:300]}")
    return (result.stdout + result.stderr).strip()


def _registers(cubin: bytes, arch: str, name: str) -> int:
    """Registers of ``name`` in ``cubin`` from ``cuobjdump -res-usage`` (0 if unavailable)."""
    from kernelwright.inspect import sass, tools

    try:
        tool = tools.tools_for("cuobjdump")[0]
        with tempfile.TemporaryDirectory(prefix="kw-res-") as tmp:
            path = Path(tmp) / "kernel.cubin"
            path.write_bytes(cubin)
            usage = sass.parse_res_usage(tools.run_tool(tool, ["-res-usage", str(path)]).stdout)
    except ToolchainError as exc:
        log.info("no register count for %s (%s): %s", name, arch, exc)
        return 0
    for (_, function), resources in usage.items():
        if function == name:
            return resources.registers
    return 0
