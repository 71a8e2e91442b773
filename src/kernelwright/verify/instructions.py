"""Instruction-level evidence in a verdict: what the candidate's kernels compile to, and what that says against
the problem (kernelwright.inspect's expectations)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright.isolation.process import ChildRun
from kernelwright.records import ProblemTraits, Severity
from kernelwright.verify.findings import Judge

if TYPE_CHECKING:
    from kernelwright.inspect.analysis import KernelSummary


def instruction_evidence(run: ChildRun, *, native: str | None, traits: ProblemTraits | None,
                         judge: Judge) -> list[KernelSummary]:
    """The instruction summaries of what the candidate's child compiled or built (cubins cross-compiled for the
    archs asked for, CUDA extensions disassembled for the GPU's own arch), with the expectations' findings added to
    ``judge``."""
    cubins = run.events("cubin")
    binaries = run.events("binary")  # CUDA extensions the candidate built (GPU runs)
    if not cubins and not binaries:
        return []
    try:
        from kernelwright.inspect import analyze_cubin
        from kernelwright.inspect.analysis import analyze_binary
        from kernelwright.inspect.expectations import evaluate
    except ImportError as exc:
        judge.add("inspection-unavailable", f"instruction analysis unavailable: {exc}", Severity.NOTE)
        return []
    summaries_by_arch: dict[str, list[Any]] = {}
    out: list[KernelSummary] = []
    for message in binaries:
        try:
            found = analyze_binary(message["path"], arch=native)
        except Exception as exc:
            judge.add("inspection-failed", f"disassembling the CUDA extension {message.get('name')} "
                                           f"failed: {exc}", Severity.NOTE)
            continue
        for summary in found:
            summaries_by_arch.setdefault(native or "unknown", []).append(summary)
            out.append(replace(summary, launched_as=summary.launched_as or f"{message.get('name')} (CUDA extension)"))
    for message in cubins:
        arch = message["arch"]
        if arch == "native":
            arch = native
        ptx_path = message.get("ptx_path")
        warps = message.get("num_warps")
        try:
            found = analyze_cubin(
                Path(message["path"]), arch=arch, name=message.get("name"),
                ptxas_log=message.get("ptxas_log", "") or "",
                ptx=Path(ptx_path).read_text() if ptx_path and Path(ptx_path).exists() else "",
                threads_per_block=int(warps) * 32 if warps else None,
                dynamic_shared_bytes=message.get("shared"),
            )
        except Exception as exc:
            judge.add("inspection-failed", f"disassembling {message.get('name') or message['path']} "
                                           f"failed: {exc}", Severity.NOTE)
            continue
        for summary in found:
            if summary.spilled is None and message.get("n_spills") is not None:
                # No ptxas log for a kernel Triton compiled at run time; its n_spills counts 4-byte words.
                summary = replace(summary, spill_store_bytes=4 * int(message["n_spills"]))
            summaries_by_arch.setdefault(arch or "unknown", []).append(summary)
            out.append(replace(summary, launched_as=summary.launched_as or message.get("name") or summary.name))
    if traits is not None:
        several = len(summaries_by_arch) > 1
        for arch, summaries in summaries_by_arch.items():
            try:
                for f in evaluate(summaries, traits, arch):
                    judge.add(f.code, f"[{arch}] {f.message}" if several else f.message, f.severity,
                              **{**dict(f.details), "arch": arch})
            except Exception as exc:
                judge.add("inspection-failed", f"expectations for {arch} failed: {exc}", Severity.NOTE)
    return out


def native_arch(device_facts: Mapping[str, Any]) -> str | None:
    """The arch of the GPU the candidate ran on (``sm_90a`` on an H200: the arch-specific variant it runs)."""
    from kernelwright.hardware.local import arch_for_capability

    cc = str(device_facts.get("compute_capability", ""))
    major, _, minor = cc.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return arch_for_capability(int(major), int(minor))
