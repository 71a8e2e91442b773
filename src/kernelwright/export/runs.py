"""Reading the run folders ``kernelwright optimize`` writes, as variants of one op.

A run folder holds ``run.json`` (the problem's source and hash, the target arch, the precision policy),
``best.py`` (the verified KernelBench ``ModelNew``) and ``verdict.json`` (the verifier's verdict on it). Everything
here is static: nothing of the run's code is executed (that is :mod:`kernelwright.export.probe`'s job, in a child).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.errors import InputError, ToolchainError
from kernelwright.records import Policy

# a run's precision policy as torch.get_float32_matmul_precision() names it (the runtime compares them)
PRECISION_SUFFIX = {"highest": "", "high": "_tf32", "medium": "_reduced"}


@dataclass(frozen=True, kw_only=True)
class RunVariant:
    """One passed run, ready to become a variant of an exported op."""

    path: Path
    problem_name: str
    problem_sha256: str
    problem_source: str
    arch: str  # canonical: "sm_90a"
    capability: tuple[int, int]
    precision: str  # "highest" (fp32), "high" (TF32 allowed) or "medium" (fp16/bf16 compute allowed)
    language: str  # "triton" or "cuda"
    source: str  # best.py, verbatim
    source_sha256: str
    kernels: tuple[str, ...]
    generator: str | None
    run_id: int | None
    device: str | None
    device_name: str | None
    timed: bool
    verdict: dict[str, Any] = field(default_factory=dict)  # the summary variants.json records
    toolchain: str = ""  # what checked that the arch can be built, or why it was not checked
    backward: BackwardVariant | None = None  # the run's generated backward (optimize --backward), if it passed
    backward_note: str = ""  # why the run has none, when it has a backward folder

    @property
    def id(self) -> str:
        return self.arch + PRECISION_SUFFIX[self.precision]


@dataclass(frozen=True, kw_only=True)
class BackwardVariant:
    """A run's ``backward/`` folder: the generated backward problem's verified kernels."""

    source: str  # backward/best.py, verbatim
    gradients: tuple[str, ...]  # what its forward returns, in order: the op's input names and state keys
    verdict: dict[str, Any]


def read_backward(folder: Path, forward_sha256: str) -> tuple[BackwardVariant | None, str]:
    """The run's generated backward, or None and why not (empty when the run has no ``backward/`` folder)."""
    import ast

    from kernelwright.problem.files import read_candidate

    bfolder = folder / "backward"
    if not (bfolder / "run.json").is_file():
        return None, ""
    try:
        meta = _read_json(bfolder / "run.json", "")
        verdict = _read_json(bfolder / "verdict.json", f"{bfolder} has no verdict.json")
    except InputError as exc:
        return None, str(exc)
    if not meta.get("passed") or verdict.get("status") != "passed":
        return None, f"the generated backward did not pass verification ({verdict.get('status') or 'no verdict'})"
    values: dict[str, Any] = {}
    try:
        for stmt in ast.parse(str(meta.get("problem_source") or "")).body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id in ("GRADIENTS", "FORWARD_SHA256"):
                values[stmt.targets[0].id] = ast.literal_eval(stmt.value)
    except (SyntaxError, ValueError):
        pass
    if values.get("FORWARD_SHA256") != forward_sha256 or not isinstance(values.get("GRADIENTS"), list):
        return None, "backward/ was not generated from this run's problem (FORWARD_SHA256 differs); rerun optimize"
    best = bfolder / (meta.get("best") or "best.py")
    candidate = read_candidate(best) if best.is_file() else None
    if candidate is None or verdict.get("candidate_sha256") not in (None, candidate.sha256):
        return None, "backward/best.py is missing or not the file its verdict judged; rerun optimize --backward"
    return BackwardVariant(source=candidate.source, gradients=tuple(values["GRADIENTS"]),
                           verdict=verdict_summary(verdict)), ""


def read_run(path: str | Path) -> RunVariant:
    """Read and check one run folder; :class:`InputError` with a one-line reason if it cannot be exported."""
    from kernelwright.problem.files import read_candidate

    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"run folder {folder} does not exist (give the --out folder of kernelwright optimize)")
    meta = _read_json(folder / "run.json", f"{folder} has no run.json: it is not a kernelwright optimize run "
                                           "folder (or was written before run.json existed: rerun optimize)")
    if meta.get("kind") != "kernelwright-run":
        raise InputError(f"{folder}/run.json is not a kernelwright run record")
    if not meta.get("passed") or meta.get("status") != "passed":
        raise InputError(f"run {folder} did not pass verification (status {meta.get('status') or 'none'}): "
                         "there is no verified kernel to export")
    best = folder / (meta.get("best") or "best.py")
    if not meta.get("best") or not best.is_file():
        raise InputError(f"run {folder} has no best.py: there is no kernel to export")
    verdict = _read_json(folder / "verdict.json", f"run {folder} has no verdict.json: the kernel's verification "
                                                  "cannot be shown")
    if verdict.get("status") != "passed":
        raise InputError(f"run {folder}: verdict.json says {verdict.get('status')!r}, not passed")
    source_text = str(meta.get("problem_source") or "")
    sha = hashlib.sha256(source_text.encode()).hexdigest()
    if not source_text or sha != meta.get("problem_sha256"):
        raise InputError(f"run {folder}: run.json's problem source does not match its problem_sha256 "
                         "(the file was edited); rerun optimize")
    if verdict.get("problem_sha256") not in (None, sha):
        raise InputError(f"run {folder}: verdict.json judged a different problem than run.json records")
    candidate = read_candidate(best)
    if candidate.problem_with_structure:
        raise InputError(f"run {folder}: {candidate.problem_with_structure}")
    if verdict.get("candidate_sha256") not in (None, candidate.sha256):
        raise InputError(f"run {folder}: best.py is not the file the verdict judged (it changed after "
                         "verification); rerun optimize or restore it")
    language = "cuda" if candidate.uses_load_inline or candidate.cuda_kernels else "triton"
    arch, capability, toolchain = check_arch(str(meta.get("arch") or ""), language, folder)
    backward, backward_note = read_backward(folder, sha)
    precision = Policy.from_json(meta).matmul_precision
    return RunVariant(
        path=folder.resolve(),
        problem_name=str(meta.get("problem_name") or "problem"),
        problem_sha256=sha,
        problem_source=source_text,
        arch=arch,
        capability=capability,
        precision=precision,
        language=language,
        source=candidate.source,
        source_sha256=candidate.sha256,
        kernels=candidate.cuda_kernels if language == "cuda" else candidate.triton_kernels,
        generator=meta.get("generator"),
        run_id=meta.get("run_id"),
        device=meta.get("device"),
        device_name=meta.get("device_name"),
        timed=bool(meta.get("timed")),
        verdict=verdict_summary(verdict),
        toolchain=toolchain,
        backward=backward,
        backward_note=backward_note,
    )


def check_arch(arch: str, language: str, folder: Path) -> tuple[str, tuple[int, int], str]:
    """The run's arch, canonical, with its compute capability and the tool that can build for it. An arch
    kernelwright's hardware table does not know, an AMD arch, or one no local ptxas/nvcc supports is an error."""
    from kernelwright.hardware.spec import arch_spec, canonical_arch, compute_capability_of
    from kernelwright.inspect.tools import all_tools, tools_for

    try:
        name = canonical_arch(arch)
    except InputError:
        raise InputError(f"run {folder}: run.json's arch {arch!r} is not an arch name") from None
    if name.startswith("gfx"):
        raise InputError(f"run {folder} targets {name}, an AMD arch: exported ops choose variants by CUDA compute "
                         "capability, so only NVIDIA runs can be exported")
    try:
        arch_spec(name)
    except InputError:
        raise InputError(f"run {folder} targets {name}, an arch kernelwright's hardware table does not list, so "
                         "no toolchain here is known to build it (kernelwright hw --list shows the known ones)") from None
    tool = "ptxas" if language == "triton" else "nvcc"
    if language == "cuda" and not all_tools("nvcc"):
        return name, compute_capability_of(name), "not checked: no nvcc here (load_inline builds it at first use)"
    try:
        found = tools_for(tool, name)[0]
    except ToolchainError as exc:
        raise InputError(f"run {folder} targets {name}, which no {tool} here can build: {exc}") from None
    return name, compute_capability_of(name), found.describe()


def verdict_summary(verdict: dict[str, Any]) -> dict[str, Any]:
    """What variants.json keeps of a verdict: status, message, where it ran, timing and speedups, kernels."""
    timing = verdict.get("timing") or {}
    candidate = timing.get("candidate") or {}
    device = verdict.get("device") or {}
    return {
        "status": verdict.get("status"),
        "message": verdict.get("message"),
        "clean": verdict.get("clean"),
        "seed": verdict.get("seed"),
        "device": {k: device.get(k) for k in ("type", "name", "interpreter", "torch", "triton") if k in device},
        "median_ms": candidate.get("median_ms"),
        "speedups": dict(verdict.get("speedups") or {}),
        "percent_of_floor": verdict.get("percent_of_floor"),
        "kernels": [k.get("name") for k in verdict.get("kernels") or [] if k.get("origin") == "own"],
        "findings": [f.get("code") for f in verdict.get("findings") or []],
        "size_overrides": dict(verdict.get("size_overrides") or {}),
        # the evidence that the kernels build for the arch: compiled (cross-compiled on a CPU) at verification
        "instructions": [{k: i.get(k) for k in ("name", "arch", "registers", "spill_store_bytes", "shared_bytes",
                                                 "tensor_core_instructions", "utilisation")}
                         for i in verdict.get("instructions") or []],
    }


def _read_json(path: Path, missing: str) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(missing)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path} is not readable JSON ({exc}); rerun optimize") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON object; rerun optimize")
    return data
