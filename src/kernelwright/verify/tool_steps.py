"""The steps of a verify that run a tool over a candidate once its trials pass — its instruction summary (the SASS of
what it compiled), compute-sanitizer, Nsight Compute's profiled call — and the rule for a job that ran out of memory
beside others. A mixin of the verifier's ``_Verification`` (it reads the same attributes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelwright.config import config
from kernelwright.isolation import protocol
from kernelwright.isolation.process import ChildRun
from kernelwright.records import Severity
from kernelwright.verify.instructions import instruction_evidence, native_arch

if TYPE_CHECKING:
    from kernelwright.inspect.analysis import KernelSummary


def out_of_memory_beside_others(run: ChildRun) -> bool:
    """Whether a job ran out of memory — its own report, or the kernel's out-of-memory killer (SIGKILL) — while it
    shared the device and the host with other jobs (the GPU lock is on: a parallel bench, issue 43). Such a job is
    run once more alone: what its neighbours held is never charged to it. A job that fakes it gains nothing but a
    second run, alone, whose verdict stands."""
    from kernelwright.hardware import gpu_lock

    if not gpu_lock.enabled() or run.timed_out or run.budget_cut:
        return False
    error = run.report(protocol.JobError)
    if error is not None:
        text = f"{error.message}".lower()
        return error.code == "out-of-memory" or "out of memory" in text or text.startswith("outofmemoryerror")
    return run.signal_name == "SIGKILL"


def what_failed(run: ChildRun) -> str:
    error = run.report(protocol.JobError)
    return (error.message if error else run.describe_exit())[:160]


class ToolSteps:
    """The verifier's tool steps (a mixin: ``self`` is the verification)."""

    judge: Any
    opts: Any
    device: str
    device_facts: dict[str, Any]
    traits: Any
    problem: Any
    candidate: Any
    seed: int
    timeout: float
    phases: dict[str, float]
    executed: Any

    def _sanitize_tools(self) -> tuple[str, ...]:
        if self.opts.sanitize is not None:
            return tuple(self.opts.sanitize)
        # The default: hand-written CUDA C++, and Triton kernels whose PTX the candidate rewrites
        if self.device == "cuda" and (self.candidate.uses_load_inline or self.candidate.rewrites_ptx):
            from kernelwright.verify.sanitize import TOOLS

            return TOOLS
        return ()

    def _sanitize(self) -> None:
        """compute-sanitizer's tools over the candidate's forward at reduced sizes (verify/sanitize.py)."""
        from kernelwright.verify import sanitize

        limit = self.opts.deadline.cap(self.timeout, at_least_s=1.0)
        seconds = sanitize.judge(self.judge, self.problem.path, self.candidate.path, self._sanitize_tools(),
                                 device=self.device, seed=self.seed,
                                 size_overrides=dict(self.opts.size_overrides or {}), timeout_s=limit)
        self.phases.update(seconds)  # each tool's own seconds, inside the "sanitizer" phase

    def _profiles(self) -> bool:
        wanted = self.opts.executed if self.opts.executed is not None else bool(config.executed)
        return wanted and self.device == "cuda"

    def _executed(self, instructions: list[KernelSummary]) -> None:
        """One call of the candidate's forward under Nsight Compute: executed counts by class beside the SASS's
        (verify/executed.py), after the checks and outside every timed run."""
        from kernelwright.verify import executed

        native = native_arch(self.device_facts)
        static = [s for s in instructions if native is None or s.arch == native]
        limit = self.opts.deadline.cap(float(config.executed_timeout_s), at_least_s=1.0)
        found = executed.profile(self.problem.path, self.candidate.path, device=self.device, seed=self.seed,
                                 size_overrides=dict(self.opts.size_overrides or {}), timeout_s=limit,
                                 static=static)
        self.executed = found
        if not found.ran:
            self.judge.add("executed-unavailable", found.note, Severity.NOTE)
            return
        executed.judge_evidence(self.judge, found, static, self.traits)

    def _instructions(self, run: ChildRun) -> list[KernelSummary]:
        return instruction_evidence(run, native=native_arch(self.device_facts), traits=self.traits, judge=self.judge)
