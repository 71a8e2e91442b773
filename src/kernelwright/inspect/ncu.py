"""Executed evidence from Nsight Compute: what the kernels actually ran, and where that disagrees with the SASS.

    command = ncu_command(["python", "-m", "kernelwright.inspect.ncu_driver", problem, candidate])
    kernels = parse_raw_csv(completed.stdout)              # one ExecutedKernel per profiled launch
    findings = compare(static_summaries, merge_launches(kernels), traits)

The command is ``ncu --clock-control none --csv --page raw --print-units base --print-kernel-base mangled
--print-metric-instances details --metrics ...``: base units (bytes, ns), mangled names that match the cubin's
function names, and instanced values (``sass__inst_executed_per_opcode``) printed in one cell as ``OPCODE value``
pairs. The parser locates the CSV header (``"ID","Process ID",...``) among the profiler's ``==PROF==`` lines and the
application's own output, skips the units row, and tolerates thousands separators and scaled units.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.errors import ToolchainError
from kernelwright.records import Finding, ProblemTraits, Severity

log = logging.getLogger(__name__)

TENSOR_METRICS = (
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
)
METRICS = (
    *TENSOR_METRICS,
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sass__inst_executed_register_spilling",
    "smsp__inst_executed.sum",
    "gpu__time_duration.sum",
    "sass__inst_executed_per_opcode",
)
_NON_METRIC_COLUMNS = {
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
    "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
}
_UNIT_SCALE = {
    "byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30,
    "nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
    "inst": 1, "kinst": 1e3, "minst": 1e6, "ginst": 1e9,
}


@dataclass(frozen=True, kw_only=True)
class ExecutedKernel:
    """One profiled launch (or several launches of one kernel, merged): metric values in base units."""

    name: str
    launches: int = 1
    block: str = ""
    grid: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)
    opcode_counts: Mapping[str, float] = field(default_factory=dict)
    # Other instanced per-opcode metrics (``sass__thread_inst_executed_true_per_opcode``: threads with a true
    # predicate), by metric name: opcode -> count.
    instanced: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def metric(self, name: str) -> float | None:
        return self.metrics.get(name)

    @property
    def tensor_instructions(self) -> float | None:
        """Tensor-core instructions executed: from the per-opcode SASS counts where ncu gave them, else the
        tensor pipes' instruction counters (the largest, not their sum).

        The counters are not instruction counts on sm_90 (run 45, H200, ncu 2025.3, 2026-12-03): the hmma pipe's
        read 2.1e6 in PyTorch's elementwise copy and 1.97e5 in an FFMA-only GEMM, neither with a tensor opcode
        among their executed SASS; and in an HGMMA kernel the hmma and gmma counters both read the HGMMA count
        (4.19e6 each), so their sum doubled it."""
        if self.opcode_counts:
            return sum(n for op, n in self.opcode_counts.items() if _is_tensor_opcode(op))
        values = [self.metrics[m] for m in TENSOR_METRICS if m in self.metrics]
        return max(values) if values else None

    @property
    def dram_bytes(self) -> float | None:
        parts = [self.metrics.get("dram__bytes_read.sum"), self.metrics.get("dram__bytes_write.sum")]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None

    @property
    def spill_instructions(self) -> float | None:
        return self.metrics.get("sass__inst_executed_register_spilling")

    def hottest(self, n: int = 10) -> list[tuple[str, float]]:
        return sorted(self.opcode_counts.items(), key=lambda kv: kv[1], reverse=True)[:n]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "launches": self.launches,
            "block": self.block,
            "grid": self.grid,
            "tensor_instructions": self.tensor_instructions,
            "tensor_pipe_pct": self.metrics.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
            "dram_bytes": self.dram_bytes,
            "dram_throughput_pct": self.metrics.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            "l1_hit_pct": self.metrics.get("l1tex__t_sector_hit_rate.pct"),
            "l2_hit_pct": self.metrics.get("lts__t_sector_hit_rate.pct"),
            "achieved_occupancy_pct": self.metrics.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
            "spill_instructions": self.spill_instructions,
            "duration_ns": self.metrics.get("gpu__time_duration.sum"),
            # a merged record's counts are its launches' sums (run 43 read 86 us for two 43 us launches): per launch
            "duration_ns_per_launch": _per(self.metrics.get("gpu__time_duration.sum"), self.launches),
            "dram_bytes_per_launch": _per(self.dram_bytes, self.launches),
            "hottest_opcodes": [[op, n] for op, n in self.hottest()],
            "tensor_opcodes": {op: n for op, n in self.opcode_counts.items() if _is_tensor_opcode(op)},
            "metrics": dict(self.metrics),
        }


def _per(total: float | None, launches: int) -> float | None:
    return None if total is None else total / max(1, launches)


def _is_tensor_opcode(opcode: str) -> bool:
    from kernelwright.inspect.sass import TENSOR_CLASSES, classify

    return classify(opcode) in TENSOR_CLASSES


# ------------------------------------------------------------------------------------------------ command


def find_ncu() -> Path:
    for candidate in (os.environ.get("NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise ToolchainError("ncu (Nsight Compute) not found; install it with the CUDA toolkit or put it on PATH "
                         "(--executed needs it; the static inspection does not)")


def ncu_command(
    program: Sequence[str],
    *,
    ncu: Path | str | None = None,
    metrics: Sequence[str] = METRICS,
    kernel_regex: str | None = None,
    launch_count: int | None = 200,
    launch_skip: int = 0,
    nvtx_range: str | None = None,
) -> list[str]:
    """The ncu command line that profiles ``program`` (argv) and prints raw metrics as CSV on stdout."""
    command = [
        str(ncu or find_ncu()), "--clock-control", "none", "--target-processes", "all", "--csv", "--page", "raw",
        "--print-units", "base", "--print-kernel-base", "mangled", "--print-metric-instances", "details",
        "--metrics", ",".join(metrics),
    ]
    if kernel_regex:
        command += ["--kernel-name", f"regex:{kernel_regex}"]
    if nvtx_range:  # only the kernels launched inside this push/pop range
        command += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    if launch_skip:
        command += ["--launch-skip", str(launch_skip)]
    if launch_count:
        command += ["--launch-count", str(launch_count)]
    return [*command, *program]


_MISSING_METRIC_RE = re.compile(r"(?i)failed to find metric[s]?\s*:?\s*([\w.,\s]+)")


def run_ncu(program: Sequence[str], *, timeout: float = 600.0, env: Mapping[str, str] | None = None,
            metrics: Sequence[str] = METRICS, **options: Any) -> list[ExecutedKernel]:
    """Profile ``program`` under ncu; metrics this GPU or ncu version lacks are dropped and the run retried once."""
    wanted = list(metrics)
    for _attempt in range(2):
        command = ncu_command(program, metrics=wanted, **options)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=dict(env or os.environ))
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"ncu ran longer than {timeout:.0f} s; profile fewer launches") from None
        output = done.stdout + "\n" + done.stderr
        if "ERR_NVGPUCTRPERM" in output:
            raise ToolchainError("ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): run it "
                                 "as root or load the driver with NVreg_RestrictProfilingToAdminUsers=0")
        missing = _missing_metrics(output, wanted)
        if missing and len(missing) < len(wanted):
            log.info("ncu lacks metrics %s; retrying without them", ", ".join(missing))
            wanted = [m for m in wanted if m not in missing]
            continue
        kernels = parse_raw_csv(done.stdout)
        if not kernels and done.returncode != 0:
            tail = "; ".join(line for line in output.splitlines() if "ERROR" in line)[:300]
            raise ToolchainError(f"ncu failed (exit {done.returncode}): {tail or 'no output'}")
        return kernels
    return []


def _missing_metrics(output: str, wanted: Sequence[str]) -> list[str]:
    missing: list[str] = []
    for match in _MISSING_METRIC_RE.finditer(output):
        missing += [m for m in wanted if m in match.group(1)]
    return list(dict.fromkeys(missing))


# ------------------------------------------------------------------------------------------------ parsing


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "").replace(" ", "")
    if not cleaned or cleaned in ("n/a", "N/A", "-"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


_INSTANCE_RE = re.compile(r"\(?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)\)?\s*[:=]?\s*([0-9][0-9,]*(?:\.[0-9]+)?)")


def parse_instances(text: str) -> dict[str, float]:
    """An instanced metric's cell (``"HMMA 1,024; IMAD 77"``, ``"(HGMMA) 8;(LDG) 3"``, ``"FFMA: 5"``) -> counts."""
    counts: dict[str, float] = {}
    for name, value in _INSTANCE_RE.findall(text):
        number = _number(value.rstrip(","))
        if number is not None:
            counts[name] = counts.get(name, 0.0) + number
    return counts


_FIELD_LIMIT = 1 << 28


def parse_raw_csv(text: str) -> list[ExecutedKernel]:
    """``ncu --csv --page raw`` output (possibly mixed with ``==PROF==`` lines and program output) -> launches."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID","')), None)
    if start is None:
        return []
    body = [line for line in lines[start:] if line.startswith('"')]
    # A library kernel's per-opcode instance list can exceed csv's default 128 KiB a field (cuBLAS's 4096^3 GEMM did
    # on the H100, run 66): raised for the whole process, which reads no untrusted CSV.
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_LIMIT))
    rows = list(csv.reader(io.StringIO("\n".join(body))))
    if not rows:
        return []
    header = rows[0]
    units: list[str] = [""] * len(header)
    data = rows[1:]
    if data and data[0] and data[0][0] == "":
        units, data = data[0], data[1:]
    kernels: list[ExecutedKernel] = []
    for row in data:
        if len(row) < len(header):
            continue
        cells = dict(zip(header, row))
        metrics: dict[str, float] = {}
        opcodes: dict[str, float] = {}
        instanced: dict[str, dict[str, float]] = {}
        for column, unit, value in zip(header, units, row):
            if column in _NON_METRIC_COLUMNS:
                continue
            if column.startswith("sass__inst_executed_per_opcode"):
                opcodes = parse_instances(value)
                continue
            if "per_opcode" in column:
                instanced[column] = parse_instances(value)
                continue
            number = _number(value)
            if number is None:
                continue
            metrics[column] = number * _UNIT_SCALE.get(unit.strip().lower(), 1)
        kernels.append(ExecutedKernel(
            name=cells.get("Kernel Name", ""),
            block=cells.get("Block Size", ""),
            grid=cells.get("Grid Size", ""),
            metrics=metrics,
            opcode_counts=opcodes,
            instanced=instanced,
        ))
    return kernels


_SUMMED = (".sum",)


def merge_launches(kernels: Sequence[ExecutedKernel]) -> list[ExecutedKernel]:
    """One record per kernel name: counts summed over launches, percentages averaged."""
    groups: dict[str, list[ExecutedKernel]] = {}
    for kernel in kernels:
        groups.setdefault(kernel.name, []).append(kernel)
    merged: list[ExecutedKernel] = []
    for name, launches in groups.items():
        metrics: dict[str, float] = {}
        for key in {k for launch in launches for k in launch.metrics}:
            values = [launch.metrics[key] for launch in launches if key in launch.metrics]
            summed = key.endswith(_SUMMED) or key == "sass__inst_executed_register_spilling"
            metrics[key] = sum(values) if summed else sum(values) / len(values)
        opcodes: dict[str, float] = {}
        # Summed only where every launch has its opcode counts: a partial sum would undercount (tensor_instructions
        # trusts these counts over the pipe counters), so without them all the counters decide.
        if all(launch.opcode_counts for launch in launches):
            for launch in launches:
                for op, n in launch.opcode_counts.items():
                    opcodes[op] = opcodes.get(op, 0.0) + n
        instanced: dict[str, dict[str, float]] = {}
        for column in {c for launch in launches for c in launch.instanced}:
            if all(column in launch.instanced for launch in launches):
                total: dict[str, float] = {}
                for launch in launches:
                    for op, n in launch.instanced[column].items():
                        total[op] = total.get(op, 0.0) + n
                instanced[column] = total
        merged.append(ExecutedKernel(name=name, launches=sum(k.launches for k in launches), block=launches[0].block,
                                     grid=launches[0].grid, metrics=metrics, opcode_counts=opcodes,
                                     instanced=instanced))
    return merged


# ------------------------------------------------------------------------------------------------ comparison


def compare(static: Sequence[Any], executed: Sequence[ExecutedKernel], traits: ProblemTraits | None = None
            ) -> list[Finding]:
    """Where the static view (KernelSummary list) and the executed counts disagree, kernel by kernel (matched by
    mangled name), plus what only the executed view shows (tensor pipe idle, occupancy far below the theoretical).
    """
    findings: list[Finding] = []
    by_name = {k.name: k for k in executed}
    for summary in static:
        run = by_name.get(summary.name)
        if run is None:
            continue
        classes = summary.histogram_by_class
        static_tensor = sum(classes.get(c, 0) for c in ("mma", "wgmma", "tcgen05"))
        executed_tensor = run.tensor_instructions
        details = {"kernel": summary.name, "static_classes": {c: classes.get(c, 0) for c in ("mma", "wgmma",
                   "tcgen05")}, "executed_tensor_instructions": executed_tensor, "launches": run.launches}
        if static_tensor and executed_tensor == 0:
            findings.append(Finding(
                code="executed-mismatch", severity=Severity.WARNING, details=details,
                message=f"{summary.name}: {static_tensor} tensor-core instructions in the SASS but none executed "
                f"in {run.launches} launch(es): the tensor-core path never ran",
            ))
        if not static_tensor and executed_tensor:
            findings.append(Finding(
                code="executed-mismatch", severity=Severity.NOTE, details=details,
                message=f"{summary.name}: no tensor-core instruction in the inspected SASS, yet {executed_tensor:.0f} "
                "executed (the launched binary differs from the one inspected)",
            ))
        spills = run.spill_instructions
        if summary.spilled is False and spills:
            findings.append(Finding(
                code="executed-mismatch", severity=Severity.NOTE,
                details={"kernel": summary.name, "executed_spill_instructions": spills},
                message=f"{summary.name}: ptxas reported no spills but {spills:.0f} spill instructions executed",
            ))
        achieved = run.metrics.get("sm__warps_active.avg.pct_of_peak_sustained_active")
        theoretical = (summary.occupancy or {}).get("occupancy")
        if achieved is not None and theoretical and achieved / 100 < 0.5 * theoretical:
            findings.append(Finding(
                code="achieved-occupancy-low", severity=Severity.NOTE,
                details={"kernel": summary.name, "achieved_pct": achieved, "theoretical": theoretical},
                message=f"{summary.name}: achieved occupancy {achieved:.0f}% against {theoretical:.0%} theoretical "
                "(too few blocks, tail effects or imbalance)",
            ))
        pipe = run.metrics.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
        tensor_problem = traits is not None and traits.dominant in ("matmul", "conv", "attention")
        if tensor_problem and static_tensor and pipe is not None and pipe < 10:
            findings.append(Finding(
                code="low-tensor-utilisation", severity=Severity.NOTE,
                details={"kernel": summary.name, "tensor_pipe_pct": pipe},
                message=f"{summary.name}: tensor pipe active {pipe:.1f}% of peak while the kernel ran",
            ))
    return findings
