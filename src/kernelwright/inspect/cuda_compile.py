"""Compiling CUDA C++ and PTX candidates for an arch without a GPU (nvcc / ptxas), for instruction analysis.

    result = compile_cuda(source, arch="sm_90a", torch_headers=True)
    result.ok, result.log, result.cubin, result.ptx, result.resources

``compile_cuda`` runs ``nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -cubin -Xptxas -v --keep`` (the kept
PTX comes back too); with ``torch_headers`` the torch wheel's include directories and Python's are added, as
``torch.utils.cpp_extension`` would (GPU_FACTS.md: about 50 s for a source including ``torch/extension.h``, about 1 s
without). ``compile_ptx`` runs ``ptxas -v``. Results are cached by content hash under ``config.cache_dir/"cuda"``;
a compile error is a result with ``ok=False``, not an exception. A toolchain that cannot target the arch is a
:class:`ToolchainError` naming the CUDA release needed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import sysconfig
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.config import config
from kernelwright.errors import ToolchainError
from kernelwright.hardware.spec import canonical_arch
from kernelwright.inspect import tools
from kernelwright.inspect.ptxas import parse_ptxas_log, relevant_lines

log = logging.getLogger(__name__)

CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class CudaCompileResult:
    """``log`` holds the relevant lines (errors, warnings, C75xx infos); ``full_log`` everything the tools printed;
    ``resources`` the ``ptxas -v`` figures per kernel (registers, shared, stack, spill bytes)."""

    ok: bool
    arch: str
    cubin: bytes = b""
    ptx: str = ""
    log: str = ""
    full_log: str = ""
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    seconds: float = 0.0
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "arch": self.arch,
            "cubin_bytes": len(self.cubin),
            "ptx_bytes": len(self.ptx),
            "log": self.log,
            "resources": {k: dict(v) for k, v in self.resources.items()},
            "command": list(self.command),
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
        }


def _gencode(arch: str) -> tuple[str, str]:
    """``sm_90a`` -> (``compute_90a``, ``sm_90a``)."""
    return "compute_" + arch.removeprefix("sm_"), arch


def torch_include_dirs() -> list[Path]:
    """The include directories ``torch.utils.cpp_extension`` adds, found without importing torch, plus Python's."""
    dirs: list[Path] = []
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        dirs += [root / "include", root / "include" / "torch" / "csrc" / "api" / "include"]
    python_include = sysconfig.get_paths().get("include")
    if python_include:
        dirs.append(Path(python_include))
    dirs = [d for d in dirs if d.is_dir()]
    if dirs and not (dirs[0] / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists():
        dirs.append(_cpu_torch_stub_dir())
    return dirs


def _cpu_torch_stub_dir() -> Path:
    """A CPU build of torch ships c10/cuda headers without the one CUDA builds generate
    (``c10/cuda/impl/cuda_cmake_macros.h``, included by ``c10/cuda/CUDAMacros.h``); a CUDA build's copy holds one
    define. Supply it so a candidate's CUDA source compiles for inspection on a machine without a GPU."""
    stub = Path(config.cache_dir) / "cuda" / "cpu-torch-stubs"
    header = stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    if not header.exists():
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return stub


def _cache_dir(kind: str, key: str) -> Path:
    return Path(config.cache_dir) / "cuda" / f"{kind}-{key}-v{CACHE_VERSION}"


def _load_cached(directory: Path) -> CudaCompileResult | None:
    try:
        meta = json.loads((directory / "result.json").read_text())
        cubin = (directory / "kernel.cubin").read_bytes() if meta["ok"] else b""
        ptx = (directory / "kernel.ptx").read_text() if (directory / "kernel.ptx").exists() else ""
    except (OSError, ValueError, KeyError):
        return None
    return CudaCompileResult(
        ok=bool(meta["ok"]), arch=str(meta["arch"]), cubin=cubin, ptx=ptx, log=str(meta.get("log", "")),
        full_log=str(meta.get("full_log", "")), resources=dict(meta.get("resources") or {}),
        command=tuple(meta.get("command") or ()), seconds=float(meta.get("seconds", 0.0)), cached=True,
    )


def _store(directory: Path, result: CudaCompileResult) -> None:
    try:
        tmp = Path(tempfile.mkdtemp(dir=directory.parent if directory.parent.exists() else None, prefix=".tmp-"))
        (tmp / "kernel.cubin").write_bytes(result.cubin)
        (tmp / "kernel.ptx").write_text(result.ptx)
        meta = {**result.to_json(), "full_log": result.full_log}
        (tmp / "result.json").write_text(json.dumps(meta, indent=1))
        directory.parent.mkdir(parents=True, exist_ok=True)
        if directory.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return
        os.replace(tmp, directory)
    except OSError as exc:
        log.info("cannot cache the compile result in %s: %s", directory, exc)


def _resources(log_text: str) -> dict[str, dict[str, Any]]:
    return {
        name: {k: v for k, v in vars(fn).items() if k != "name" and v is not None}
        for name, fn in parse_ptxas_log(log_text).functions.items()
    }


def _key(*parts: object) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def compile_cuda(
    source: str,
    *,
    arch: str,
    extra_flags: Sequence[str] = (),
    torch_headers: bool,
    timeout: float = 600.0,
) -> CudaCompileResult:
    """Compile a CUDA C++ translation unit to a cubin (and PTX) for ``arch`` with nvcc."""
    arch = canonical_arch(arch)
    nvcc = tools.tools_for("nvcc", arch)[0]
    includes = torch_include_dirs() if torch_headers else []
    if torch_headers and len(includes) < 2:
        raise ToolchainError("torch headers requested but torch's include directory was not found; install torch")
    compute, sm = _gencode(arch)
    flags = ["-std=c++17", "-gencode", f"arch={compute},code={sm}", "-cubin", "-Xptxas", "-v", "-lineinfo"]
    if torch_headers:
        flags += ["-DTORCH_EXTENSION_NAME=kernelwright_candidate", "-DTORCH_API_INCLUDE_EXTENSION_H",
                  "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                  "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]
        flags += [f"-I{d}" for d in includes]
    flags += list(extra_flags)
    directory = _cache_dir("nvcc", _key(source, arch, flags, str(nvcc.path), nvcc.version))
    cached = _load_cached(directory)
    if cached is not None:
        return cached
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kw-nvcc-") as tmp:
        work = Path(tmp)
        (work / "kernel.cu").write_text(source)
        command = [str(nvcc.path), *flags, "--keep", "--keep-dir", str(work), "-o", str(work / "kernel.cubin"),
                   str(work / "kernel.cu")]
        run = tools.run_tool(nvcc, command[1:], timeout=timeout, cwd=work)
        result = _result(run, work, arch, command, started,
                         ptx=(work / "kernel.ptx").read_text() if (work / "kernel.ptx").exists() else "")
    log.info("nvcc %s for %s: %s in %.1f s", "compiled" if result.ok else "failed", arch, len(result.cubin),
             result.seconds)
    _store(directory, result)
    return result


def compile_ptx(ptx_text: str, arch: str, *, extra_flags: Sequence[str] = (), timeout: float = 300.0
                ) -> CudaCompileResult:
    """Assemble PTX to a cubin for ``arch`` with ptxas (``-v``: resources, spills, C75xx warnings)."""
    arch = canonical_arch(arch)
    ptxas = tools.tools_for("ptxas", arch)[0]
    flags = ["-v", "-lineinfo", f"--gpu-name={arch}", *extra_flags]
    if re.search(r"^\s*\.extern\s+\.func", ptx_text, re.M) and not {"-c", "--compile-only"} & set(flags):
        flags.append("-c")  # calls into functions defined elsewhere: assemble relocatable code
    directory = _cache_dir("ptxas", _key(ptx_text, arch, flags, str(ptxas.path), ptxas.version))
    cached = _load_cached(directory)
    if cached is not None:
        return cached
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kw-ptxas-") as tmp:
        work = Path(tmp)
        (work / "kernel.ptx").write_text(ptx_text)
        args = [*flags, str(work / "kernel.ptx"), "-o", str(work / "kernel.cubin")]
        run = tools.run_tool(ptxas, args, timeout=timeout)
        result = _result(run, work, arch, [str(ptxas.path), *args], started, ptx=ptx_text)
    _store(directory, result)
    return result


def _result(run: Any, work: Path, arch: str, command: Sequence[str], started: float, *, ptx: str
            ) -> CudaCompileResult:
    """What a compiler run in ``work`` (writing ``kernel.cubin``) produced, its log relative to ``work``."""
    full_log = (run.stdout + run.stderr).strip()
    ok = run.returncode == 0 and (work / "kernel.cubin").exists()
    return CudaCompileResult(ok=ok, arch=arch, cubin=(work / "kernel.cubin").read_bytes() if ok else b"", ptx=ptx,
                             log=relevant_lines(full_log.replace(str(work) + "/", "")), full_log=full_log,
                             resources=_resources(full_log), command=tuple(command),
                             seconds=time.perf_counter() - started)
