"""Evaluators for the search: how candidates are timed and verified on a GPU, and verified alone on the CPU."""

from __future__ import annotations

import logging
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.config import config
from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.generate.families.base import DEFAULT_POLICY, Policy
from kernelwright.search.records import Candidate, Evaluator, Outcome
from kernelwright.verify.records import Verdict, VerifyOptions

log = logging.getLogger(__name__)

MAX_WORKER_RESTARTS = 3


def _options(policy: Policy, **extra: object) -> VerifyOptions:
    return VerifyOptions(policy=policy, **extra)  # type: ignore[arg-type]


@dataclass
class CpuEvaluator:
    """No GPU: nothing is timed; the verifier proves correctness under the Triton interpreter and compiles the
    kernels for ``arch`` for the instruction summary."""

    problem: Path
    arch: str
    policy: Policy = DEFAULT_POLICY
    timed: bool = False
    max_elements: int = 1 << 18  # inputs larger than this are checked at reduced sizes (the interpreter is slow)
    # The reduced sizes, worked out once (running the problem): given by the caller when the problem must not run
    # in this process (a generated problem: ``kernelwright.verify.probe`` computes them in the isolated child).
    size_overrides: dict[str, int] | None = None
    # One seed for every verify of this search, drawn here (no candidate can know it): the reference then runs
    # once and every later candidate reuses it (verify/refcache.py).
    verify_seed: int = field(default_factory=lambda: secrets.randbelow(2**31 - 1000))

    def time(self, candidates: Sequence[Candidate], *, deadline: Deadline = NO_DEADLINE) -> Iterator[Outcome]:
        return iter(())

    def verify(self, candidate: Candidate, *, compile_baseline: bool, deadline: Deadline = NO_DEADLINE) -> Verdict:
        from kernelwright.verify.verifier import verify

        if self.size_overrides is None:
            self.size_overrides = self._sizes_for(candidate)
        return verify(self.problem, candidate.path, _options(self.policy, device="cpu", inspect_archs=(self.arch,),
                                                             size_overrides=self.size_overrides or None,
                                                             reduce_on_cpu=False,  # sizes chosen above
                                                             deadline=deadline, seed=self.verify_seed,
                                                             reuse_reference=True))


    def _sizes_for(self, candidate: Candidate) -> dict[str, int]:
        """The inputs' sizes reduced; and the weights' too where they alone exceed the budget (a 16384x4096 bf16
        linear ran out of the interpreter's 10 minutes with only its tokens reduced), provided the templates write
        this very file at those sizes — then no number in it depends on them."""
        from kernelwright.problem.files import read_problem
        from kernelwright.problem.sizes import problem_work, reduced_sizes, state_elements
        from kernelwright.search.candidates import same_candidate_at

        problem = read_problem(self.problem)
        overrides = reduced_sizes(problem, max_elements=self.max_elements)
        try:
            # Weights too big for the interpreter, or work too much at the reduced inputs (a convolution's fixed
            # 64 -> 128 channels, or its 105 taps over 32 channels): the constructor's sizes shrink too, where the
            # candidate stays the same.
            heavy = (state_elements(problem) > self.max_elements
                     or not problem_work(problem, overrides).fits())
        except Exception:  # noqa: BLE001 - a model that cannot be built on meta: keep the weights as they are
            heavy = False
        if heavy:
            broad = reduced_sizes(problem, max_elements=self.max_elements, constructor=True)
            if broad and broad != overrides and same_candidate_at(self.problem, candidate, broad,
                                                                   arch=self.arch):
                log.info("checking at reduced weights too: %s", broad)
                return broad
        return overrides


@dataclass
class GpuEvaluator:
    """Times candidates in one long-lived worker process (replaced if a CUDA error kills it); verifies with the
    full protocol."""

    problem: Path
    policy: Policy = DEFAULT_POLICY
    seed: int = 0
    timed: bool = True
    # More verification options for the finalists (``kernelwright bench``: compile modes, reused baselines).
    verify_options: dict[str, Any] = field(default_factory=dict)
    # Seconds a search keeps for verifying a finalist (tuning gets the rest of its budget): one full protocol
    # (reference, candidate, baselines with two torch.compile modes, decoys) took 60-100 s a problem on the H200
    # (2026-12-02, run 15 of docs/gpu-validation.md).
    verify_estimate_s: float = 90.0
    verify_seed: int = field(default_factory=lambda: secrets.randbelow(2**31 - 1000))  # as CpuEvaluator's

    def time(self, candidates: Sequence[Candidate], *, deadline: Deadline = NO_DEADLINE) -> Iterator[Outcome]:
        from kernelwright.isolation.process import run_child
        from kernelwright.isolation.protocol import JobError
        from kernelwright.jobs import TimingSettings, Tuned, TuneSpec, TuneStart

        pending = list(candidates)
        restarts = 0
        while pending and restarts <= MAX_WORKER_RESTARTS:
            # The worker lives no longer than the budget: killed at the deadline, it leaves the rest untimed.
            if deadline.expired():
                return
            workdir = Path(tempfile.mkdtemp(prefix="kernelwright-tune-"))
            spec = TuneSpec(problem=str(self.problem), device="cuda", seed=self.seed,
                            policy=self.policy, candidates=tuple((c.index, str(c.path)) for c in pending), n_sets=2,
                            timing=TimingSettings.from_config(target_ms=min(config.timing_target_ms, 200.0)))
            try:
                run = run_child("tune", spec, workdir=workdir, timeout_s=config.timeout_s, device="cuda",
                                deadline=deadline)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            by_index = {c.index: c for c in pending}
            finished = set()
            for tuned in run.reports(Tuned):
                candidate = by_index.get(tuned.index)
                if candidate is None:
                    continue
                finished.add(candidate.index)
                if tuned.ok and tuned.measurement is not None:
                    yield Outcome(candidate=candidate, status="timed", median_ms=tuned.measurement.median_ms)
                else:
                    yield Outcome(candidate=candidate, status="wrong" if "wrong output" in tuned.error else "failed",
                                  error=tuned.error or "no measurement")
            started = [m.index for m in run.reports(TuneStart)]
            if run.budget_cut:
                return  # the budget ran out, not the candidate's fault
            error = run.report(JobError)  # the job itself failed (the child reports it, then says done)
            if error:
                failure = f"the tuning worker failed: {error.message[:300]}"
            else:
                lines = [line for line in run.stderr_tail.splitlines() if line.strip()]
                failure = f"the tuning worker {run.describe_exit()}" + (f": {lines[-1][:300]}" if lines else "")
            broken = error is not None or not run.finished
            if broken and not started:
                # It failed before its first candidate (the reference, the device): the same for every one.
                for candidate in pending:
                    yield Outcome(candidate=candidate, status="failed", error=failure)
                return
            if broken and started[-1] not in finished:
                # It died inside this candidate (a crash or a hang): charge it to the candidate.
                culprit = by_index[started[-1]]
                finished.add(culprit.index)
                yield Outcome(candidate=culprit, status="failed", error=failure)
            pending = [c for c in pending if c.index not in finished]
            restarts += 1

    def verify(self, candidate: Candidate, *, compile_baseline: bool, deadline: Deadline = NO_DEADLINE) -> Verdict:
        from kernelwright.verify.verifier import verify

        extra = {"seed": self.verify_seed, "reuse_reference": True, **self.verify_options}
        compile_baseline = compile_baseline and extra.pop("compile_baseline", True)
        return verify(self.problem, candidate.path,
                      _options(self.policy, device="cuda", compile_baseline=compile_baseline, deadline=deadline,
                               **extra))


def evaluator_for(problem: str | Path, device: str, arch: str, policy: Policy) -> Evaluator:
    """The evaluator a search uses by default: timing and the full protocol on a GPU, the CPU proof elsewhere."""
    if device == "cuda":
        return GpuEvaluator(Path(problem), policy=policy)
    return CpuEvaluator(Path(problem), arch=arch, policy=policy)
