"""Finding and running NVIDIA's binary tools: cuobjdump, nvdisasm, ptxas, nvcc, compute-sanitizer.

Candidates, in order: Triton's wheel (``triton/backends/nvidia/bin``), NVIDIA's pip wheels (``nvidia/cu13/bin``,
``nvidia/cuda_nvcc/bin``, ...), ``$CUDA_HOME``/``$CUDA_PATH``, ``/usr/local/cuda``, then ``PATH``. Each tool's CUDA
release is read from ``--version``. Given an arch, the newest tool that supports it is chosen: CUDA 13 dropped Volta
(cuobjdump 13.x prints "SM70 is deprecated" and still exits 0), and Blackwell needs 12.8 or later.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelwright.errors import InputError, ToolchainError

log = logging.getLogger(__name__)

TOOLS = ("cuobjdump", "nvdisasm", "ptxas", "nvcc", "compute-sanitizer")
# output that means the tool refused the input even though it exited 0
REFUSAL_RE = re.compile(r"(?im)^\S*\s*fatal\s*:.*$|is deprecated|unsupported gpu architecture|not supported")


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    path: Path
    version: tuple[int, int] | None  # CUDA release, e.g. (12, 8); None if --version was unreadable

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}" if self.version else "unknown"

    def describe(self) -> str:
        return f"{self.name} {self.version_text} ({self.path})"


def _module_dir(module: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])]


def candidate_dirs() -> list[Path]:
    """Directories searched for tools, most preferred first."""
    dirs: list[Path] = [d / "backends" / "nvidia" / "bin" for d in _module_dir("triton")]
    for nvidia in _module_dir("nvidia"):
        dirs += [nvidia / sub / "bin" for sub in ("cu13", "cu12", "cuda_nvcc", "cuda_cuobjdump", "cuda_nvdisasm")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs.append(Path("/usr/local/cuda/bin"))
    return dirs


def _executables(name: str) -> list[Path]:
    found: list[Path] = []
    names = [name, f"{name}-blackwell"] if name == "ptxas" else [name]
    for directory in candidate_dirs():
        for exe in names:
            path = directory / exe
            if path.is_file() and os.access(path, os.X_OK):
                found.append(path)
    which = shutil.which(name)
    if which:
        found.append(Path(which))
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


@functools.cache
def tool_version(path: Path) -> tuple[int, int] | None:
    """The CUDA release a tool belongs to, from ``--version`` ("release 12.8")."""
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"release (\d+)\.(\d+)", out.stdout + out.stderr)
    return (int(match.group(1)), int(match.group(2))) if match else None


@functools.cache
def all_tools(name: str) -> tuple[Tool, ...]:
    """Every copy of ``name`` found, newest release first (stable among equal versions)."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}")
    tools = [Tool(name=name, path=p, version=tool_version(p)) for p in _executables(name)]
    return tuple(sorted(tools, key=lambda t: t.version or (0, 0), reverse=True))


def supports(tool: Tool, arch: str) -> bool:
    """Whether ``tool``'s CUDA release can handle ``arch`` (per gpus.toml's cuda_min/cuda_max)."""
    bounds = _arch_bounds(arch)
    if bounds is None or tool.version is None:
        return True
    low, high = bounds
    return (low is None or tool.version >= low) and (high is None or tool.version <= high)


def _arch_bounds(arch: str) -> tuple[tuple[int, int] | None, tuple[int, int] | None] | None:
    from kernelwright.hardware.spec import arch_spec

    try:
        spec = arch_spec(arch)
    except InputError:
        return None
    return spec.cuda_min, spec.cuda_max


def needed_versions(arch: str) -> str:
    bounds = _arch_bounds(arch)
    if not bounds:
        return "a CUDA release that knows it"
    low, high = bounds
    if low and high:
        return f"CUDA {low[0]}.{low[1]} to {high[0]}.{high[1]} tools"
    if high:
        return f"CUDA {high[0]}.{high[1]} or older tools"
    if low:
        return f"CUDA {low[0]}.{low[1]} or newer tools"
    return "any CUDA release"


_INSTALL_HINT = {
    "cuobjdump": "pip install triton (its wheel ships cuobjdump) or put the CUDA toolkit's bin directory on PATH",
    "nvdisasm": "pip install triton (its wheel ships nvdisasm) or put the CUDA toolkit's bin directory on PATH",
    "ptxas": "pip install triton (its wheel ships ptxas) or put the CUDA toolkit's bin directory on PATH",
    "nvcc": "install the CUDA toolkit (or pip install nvidia-cuda-nvcc) and set CUDA_HOME or PATH",
    "compute-sanitizer": "install the CUDA toolkit's compute-sanitizer and set CUDA_HOME or PATH",
}


def tools_for(name: str, arch: str | None = None) -> list[Tool]:
    """Copies of ``name`` able to handle ``arch``, preferred first; ToolchainError if there are none."""
    tools = list(all_tools(name))
    if not tools:
        raise ToolchainError(f"no {name} found in Triton's wheel, nvidia-* wheels, CUDA_HOME or PATH; "
                             f"{_INSTALL_HINT[name]}")
    if arch is None:
        return tools
    usable = [t for t in tools if supports(t, arch)]
    if not usable:
        found = ", ".join(t.describe() for t in tools)
        raise ToolchainError(f"no {name} here can handle {arch} (found {found}); {arch} needs {needed_versions(arch)}"
                             f"{_volta_hint(arch)}")
    return usable


def _volta_hint(arch: str) -> str:
    if arch.startswith("sm_7") and not arch.startswith("sm_75"):
        return " (triton 3.6's wheel ships CUDA 12.8 tools; or pip install nvidia-cuda-cuobjdump-cu12)"
    return ""


def find_tool(name: str, arch: str | None = None) -> Path:
    """Path of the preferred ``name`` (cuobjdump, nvdisasm, ptxas, nvcc), optionally one that supports ``arch``."""
    return tools_for(name, arch)[0].path


def run_tool(
    tool: Tool | Path, args: Sequence[str], *, timeout: float = 300.0, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a tool, capturing text output; a missing binary or a timeout is a ToolchainError."""
    path = tool.path if isinstance(tool, Tool) else tool
    try:
        return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except FileNotFoundError:
        raise ToolchainError(f"{path} vanished or is not executable; reinstall it") from None
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"{path.name} took more than {timeout:.0f} s on {' '.join(args)[:200]}") from None


def refusal(output: str) -> str | None:
    """The line in which a tool refused its input (it may still have exited 0), or None."""
    match = REFUSAL_RE.search(output)
    if not match:
        return None
    line_start = output.rfind("\n", 0, match.start()) + 1
    line_end = output.find("\n", match.end())
    return output[line_start : line_end if line_end >= 0 else None].strip()
