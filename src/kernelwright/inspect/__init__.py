"""Instruction-level evidence: what the kernels a candidate launches actually execute (docs/protocol.md).

    from kernelwright.inspect import compile_for_arch, analyze_artifact, evaluate
    artifact = compile_for_arch(kernel, args, kwargs, "sm_90a")     # a Triton kernel, no GPU needed
    summary = analyze_artifact(artifact)                            # SASS classes, resources, occupancy
    findings = evaluate([summary], traits, "sm_90a")                # no-tensor-core, tf32-in-fp32, spills, ...

Binaries: :func:`analyze_binary` (cubin, fatbin, object, CUDA extension ``.so``); sources: ``cuda_compile``;
executed counts: ``ncu``. Importing this package imports neither torch nor triton.
"""

from __future__ import annotations

from kernelwright.inspect.analysis import KernelSummary, analyze_artifact, analyze_binary, analyze_cubin
from kernelwright.inspect.expectations import evaluate
from kernelwright.inspect.tools import find_tool
from kernelwright.inspect.triton_compile import CompiledArtifact, capture_language_state, compile_for_arch

__all__ = [
    "CompiledArtifact",
    "KernelSummary",
    "analyze_artifact",
    "analyze_binary",
    "analyze_cubin",
    "capture_language_state",
    "compile_for_arch",
    "evaluate",
    "find_tool",
]
