"""The verifier's orchestration: reference child → candidate child → judgement → baselines → verdict.

The parent never imports the problem or the candidate and never touches the GPU; it plans the trials, starts the
children (:mod:`kernelwright.isolation.process`), holds the reference's answers in memory only while the candidate
runs (they are deleted from disk first), judges every output (:mod:`kernelwright.verify.compare`), and assembles a
:class:`~kernelwright.verify.records.Verdict`. Candidate failures of every kind are verdicts; only unusable
*input* (a missing file, a broken problem) raises :class:`~kernelwright.errors.InputError`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright import jobs
from kernelwright.config import config
from kernelwright.errors import ConfigError, InputError
from kernelwright.hardware.calibration import installed_torch_version
from kernelwright.hardware.local import resolve_device
from kernelwright.isolation import protocol
from kernelwright.isolation.process import (
    ChildRun,
    discard_prestarted,
    prestart_child,
    run_child,
    warm_zygote,
)
from kernelwright.problem.files import CandidateFile, ProblemFile, read_candidate, read_problem
from kernelwright.records import EAGER_DEFAULTS, Finding, ProblemTraits, Severity, Status
from kernelwright.verify import compare, tensors, trials
from kernelwright.verify.boundary import BoundaryJudging
from kernelwright.verify.findings import (
    INTEGRITY_CODES,
    SPECIAL_TRIAL_CODES,
    UNCLEAN_CODES,
    Judge,
    headline_rank,
)
from kernelwright.verify.groups import GroupedChecking, GroupPlan
from kernelwright.verify.judging import UNREPORTED, TrialJudging
from kernelwright.verify.phases import BudgetSpent as _BudgetSpent
from kernelwright.verify.phases import PhaseClock
from kernelwright.verify.records import TrialOutcome, Verdict, VerifyOptions
from kernelwright.verify.scratch_share import ScratchShare
from kernelwright.verify.tool_steps import ToolSteps, out_of_memory_beside_others, what_failed
from kernelwright.verify.workdir import WarmWorkdir
from kernelwright.version import __version__

if TYPE_CHECKING:
    from kernelwright.inspect.analysis import KernelSummary
    from kernelwright.verify.roofline import Roofline

log = logging.getLogger(__name__)

def verify(problem: str | Path, candidate: str | Path, options: VerifyOptions | None = None) -> Verdict:
    """Verify ``candidate`` (a KernelBench ``ModelNew`` file) against ``problem`` (a KernelBench problem file)."""
    opts = options or VerifyOptions()
    started = time.monotonic()
    problem_file = read_problem(problem)
    candidate_file = read_candidate(candidate)
    if opts.tolerance not in compare.MODES:
        raise ConfigError(f"tolerance {opts.tolerance!r} is not one of {', '.join(compare.MODES)}")
    unknown = sorted(set(opts.size_overrides or {}) - set(problem_file.sizes))
    if unknown:
        known = ", ".join(sorted(problem_file.sizes)) or "none"
        raise InputError(f"problem {problem_file.path.name} has no module-level size {unknown[0]!r} "
                         f"(its sizes: {known})")
    device = resolve_device(opts.device)
    warm_zygote(device)  # its imports overlap the sizing below and the reference's set-up
    sizing_started = time.monotonic()
    if device == "cpu" and opts.reduce_on_cpu and not opts.size_overrides:
        from kernelwright.problem.sizes import reduced_sizes

        try:
            smaller = reduced_sizes(problem_file, max_elements=int(config.cpu_max_elements))
        except Exception as exc:  # noqa: BLE001 - the check at full size says what is wrong with the problem
            log.info("no reduced sizes for %s: %s", problem_file.path.name, exc)
            smaller = {}
        if smaller:
            log.info("checking %s at reduced sizes %s: the Triton interpreter is far too slow for the sizes as "
                        "written (--size NAME=VALUE chooses, --full-size keeps them)", problem_file.path.name,
                        ", ".join(f"{k}={v}" for k, v in smaller.items()))
            opts = replace(opts, size_overrides=smaller)
    sizing_s = round(time.monotonic() - sizing_started, 2)
    seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31 - 1000)
    factor = float(opts.tolerance_factor or config.tolerance_factor)
    base = dict(
        problem=str(problem_file.path), candidate=str(candidate_file.path),
        problem_sha256=problem_file.sha256, candidate_sha256=candidate_file.sha256, seed=seed,
        device={"type": device}, tolerance={"mode": opts.tolerance, "factor": factor},
        kernelwright_version=__version__, size_overrides=dict(opts.size_overrides or {}),
    )
    structural = candidate_file.problem_with_structure
    if structural:
        code = "syntax-error" if candidate_file.syntax_error else "missing-modelnew"
        return Verdict(status=Status.COMPILE_ERROR, message=structural, clean=False,
                       findings=(Finding(code=code, message=structural),),
                       duration_s=time.monotonic() - started, **base)

    scratch = config.scratch_dir or None
    if scratch and not Path(scratch).is_dir():
        raise ConfigError(f"scratch_dir {scratch} is not a folder; create it or set scratch_dir = \"\" "
                          "(the system's temporary directory)")
    workdir = _WARM.take(scratch) or Path(tempfile.mkdtemp(prefix="kernelwright-verify-", dir=scratch))
    try:
        verdict = _Verification(problem_file, candidate_file, opts, device, seed, factor, workdir, base).run()
    finally:
        if config.keep_workdir:
            log.warning("kept the verifier's working directory %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        if opts.reuse_reference and config.prestart:
            # One of a run's verifies (a search's, a bench's): the next one's children start now, while this one's
            # caller goes on. With its reference reused the next verify's candidate job came 1 s after its start,
            # into a child still importing torch (the candidate phase took 26 s where the reference's own took 23).
            _WARM.prepare(scratch, device, timing=opts.timing)
    phases = {"sizes": sizing_s, **verdict.phases} if sizing_s >= 0.05 else dict(verdict.phases)
    return replace(verdict, duration_s=time.monotonic() - started, phases=phases)


_WARM = WarmWorkdir()
atexit.register(_WARM.close)


@dataclass(frozen=True)
class BaselineTimings:
    """What :func:`time_baselines` measured: each asked-for baseline's measurement (None where it failed or was
    cut), the ones the deadline cut (pending, not failed: a later call may time them) and the notes on failures."""

    measured: dict[str, jobs.Measurement | None]
    cut: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


def time_baselines(problem: str | Path, names: Sequence[str], options: VerifyOptions | None = None
                   ) -> BaselineTimings:
    """PyTorch's side of a verify alone: the baselines ``names`` (``eager``, ``compile``,
    ``compile_max_autotune``) timed exactly as a verify times them, on a verify's random input sets, with no
    candidate. kernelwright bench starts it beside a problem's search, so that torch.compile's and max-autotune's
    compile (minutes of CPU work on a cold machine) overlaps the search instead of following the winner's verify.
    Runs only the problem's own ``Model`` (trusted), in the verifier's reference and baseline children; stops at
    ``options.deadline``, and what that cut is in ``cut``."""
    opts = options or VerifyOptions()
    problem_file = read_problem(problem)
    device = resolve_device(opts.device)
    seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31 - 1000)
    factor = float(opts.tolerance_factor or config.tolerance_factor)
    workdir = Path(tempfile.mkdtemp(prefix="kernelwright-baselines-", dir=config.scratch_dir or None))
    try:
        return _Verification(problem_file, None, opts, device, seed, factor, workdir, {}).baselines_only(names)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class _Verification(TrialJudging, BoundaryJudging, ToolSteps, GroupedChecking):
    def __init__(self, problem: ProblemFile, candidate: CandidateFile | None, opts: VerifyOptions, device: str, seed: int,
                 factor: float, workdir: Path, base: dict[str, Any]) -> None:
        self.problem, self.candidate, self.opts = problem, candidate, opts
        self.device, self.seed, self.factor = device, seed, factor
        self.workdir, self.base = workdir, base
        self.shared = workdir / "shared"
        self.private = workdir / "private"
        self.ref_state: dict[str, Any] = {}  # the buffers the reference's first forward changed (trials.STATE_FILE)
        self.ref_state64: dict[str, Any] = {}  # the same buffers of the float64 model after the same forward
        self.out = workdir / "candidate-out"
        for d in (self.shared, self.private, self.out):
            d.mkdir()
        self.judge = Judge()
        self.timeout = float(opts.timeout_s or config.timeout_s)
        self.plan = trials.plan_trials(seed, opts.trials or config.trials,
                                       distribution=opts.distribution_trials, second_shape=opts.shape_trial)
        self.job_trials = list(self.plan)  # the trials of the reference's and the candidate's job now running
        self.share = ScratchShare(str(workdir.parent))  # held shared while this verify's files exist
        self.output_bytes = 0  # one call's outputs, from trial 0's reference
        self.groups: GroupPlan | None = None  # where the trials' files could not all fit (verify/groups.py)
        self.output_keys: dict[int, str] = {}  # digests of earlier groups' outputs and answers (replays across them)
        self.answer_keys: dict[int, str] = {}
        self.device_facts: dict[str, Any] = {"type": device}
        self.traits: ProblemTraits | None = None
        self.work: Any = None
        self.reference_kernels: list[str] = []
        # Wall time of each step of the protocol, for the verdict and (as they start and end) the progress file.
        self.clock = PhaseClock(opts.progress_file, candidate=str(candidate.path) if candidate else "")
        self.baseline_names: tuple[str, ...] | None = None  # time only these (time_baselines)
        self.phases = self.clock.phases
        self.budget_cut: str | None = None  # the job the deadline stopped, if it did
        self.ceilings: dict[str, Any] = {}  # the device's measured ceilings (the baseline job or the cache)
        self.expected_trials: list[int] = []  # the trials the candidate's child must report
        self.expects_timing = False
        self.profile_trial: int | None = None  # the trial whose kernel list the child must report
        self.inspect_archs: tuple[str, ...] = ()  # the archs it must compile each own kernel for
        self.trials_without_own: list[int] = []  # checked calls that ran no kernel of the candidate's own
        self.executed: Any = None  # the profiled call's executed evidence (verify/executed.py), on a GPU pass
        # What the user allowed, made explicit in the tolerance (precision findings then become notes).
        self.allowed_roundoff = compare.allowed_roundoff(opts.policy)
        # Where the float64 judging runs: this process runs no untrusted code and opens a CUDA context only for
        # it, holding a parallel bench's GPU lock shared meanwhile (never during anyone's measurement).
        self.judge_device = "cuda" if device == "cuda" and config.judge_on_device else "cpu"

    def _compare(self, got: Any, expected: Any, ref64: Any, scale_floor: float = 0.0) -> compare.Comparison:
        return compare.compare(got, expected, ref64, mode=self.opts.tolerance, factor=self.factor,
                               allowed_unit_roundoff=self.allowed_roundoff, scale_floor=scale_floor,
                               device=self.judge_device)

    def _device_judging(self) -> Any:
        from kernelwright.hardware import gpu_lock

        return gpu_lock.sharing() if self.judge_device != "cpu" else contextlib.nullcontext()

    # -- children -----------------------------------------------------------------------------------------------
    def _run(self, job: str, spec: protocol.JobSpec, timeout: float | None = None) -> ChildRun:
        """Run one job; its time limit is cut to the deadline (the caller's budget), if any."""
        if self.opts.deadline.expired(margin_s=1.0):
            raise _BudgetSpent(job)
        run = run_child(job, spec, workdir=self.workdir, timeout_s=timeout or self.timeout, device=self.device,
                        deadline=self.opts.deadline)
        if run.lock_wait_s:  # a diagnostic of the phases (the child's own word), never evidence
            self.phases["gpu_lock_wait"] = round(self.phases.get("gpu_lock_wait", 0.0) + run.lock_wait_s, 2)
        if run.budget_cut:
            self.budget_cut = job
        return run

    # -- the whole protocol -------------------------------------------------------------------------------------
    def run(self) -> Verdict:
        if config.prestart:
            # The processes that come after the reference start now: their torch import (5-9 s on the H200
            # machine) and CUDA context overlap the reference's work instead of following it.
            prestart_child("candidate", workdir=self.workdir, device=self.device)
            if self.device == "cuda" and self.opts.timing:
                prestart_child("baseline", workdir=self.workdir, device=self.device)
        try:
            self._share_scratch()
            return self._protocol()
        except _BudgetSpent as cut:
            return Verdict(status=Status.TIMEOUT, clean=False, phases=dict(self.phases), **self.base,
                           message=f"the budget ran out before the {cut.job} job could run; give the run more "
                                   "time (--budget)",
                           findings=(Finding(code="budget-spent", message=f"no time left for the {cut.job} job"),))
        finally:
            self.share.close()
            discard_prestarted(self.workdir)  # a job the verdict did not need (a failed candidate's baselines)

    def baselines_only(self, names: Sequence[str]) -> BaselineTimings:
        """The reference job for a verify's random input sets (its answers unused), then the baseline job."""
        from kernelwright.verify.baseline import COMPILE_MODES

        names = tuple(dict.fromkeys(names))
        random = [t for t in self.plan if t.kind == trials.RANDOM]
        self.plan = random[:max(1, int(config.input_sets))]
        self.job_trials = list(self.plan)
        self.baseline_names = names
        self.opts = replace(self.opts, compile_baseline=any(n in COMPILE_MODES for n in names),
                            compile_modes=tuple(n for n in names if n in COMPILE_MODES), reuse_baselines={})
        if config.prestart:
            prestart_child("baseline", workdir=self.workdir, device=self.device)
        try:
            self._share_scratch()
            with self.clock.phase("reference"):
                self._reference()
            with self.clock.phase("baselines"):
                found = self._baselines()
        except _BudgetSpent:
            return BaselineTimings(dict.fromkeys(names), cut=names)
        finally:
            self.share.close()
            discard_prestarted(self.workdir)
        measured = {n: found.get(n) for n in names}
        cut = tuple(n for n, m in measured.items() if m is None) if self.budget_cut == "baseline" else ()
        notes = tuple(f.message for f in self.judge.findings if f.code in ("baseline-failed", "baselines-cut"))
        return BaselineTimings(measured, cut, notes)

    def _protocol(self) -> Verdict:
        with self.clock.phase("reference"):
            refs, ref_trials, semantics = self._reference()
        with self.clock.phase("candidate"):
            cand = self._candidate(ref_trials)
            if out_of_memory_beside_others(cand):
                # Its neighbours' memory, not necessarily its own: the candidate runs again with the device (and
                # the host) to itself, and that run is its verdict.
                self.judge.add("rerun-alone", "the candidate's job ran out of memory beside other jobs of this run "
                               f"({what_failed(cand)}); it ran again alone and that run is judged", Severity.NOTE)
                shutil.rmtree(self.out, ignore_errors=True)
                self.out.mkdir()
                cand = self._candidate(ref_trials, alone=True)
        failure = self._child_failure(cand)
        with self.clock.phase("judging"), self._device_judging():  # every output against the float64 reference
            judged = failure is None and self._judge_trials(cand, refs, ref_trials, semantics)
            self._judge_kernels(cand)
        timing: dict[str, jobs.Measurement | None] = {}
        timed = cand.report(jobs.TimingResult) if self.expects_timing else None  # else the candidate wrote it
        if failure is None and timed:
            m = self._timing_from_samples(timed.measurement)
            if m is not None:
                timing["candidate"] = m
        if failure is None and timed and "candidate" in timing:
            m = timing["candidate"]
            if timed.side_stream:
                self.judge.add("side-stream",
                               f"work the timed stream did not see: {m.unexplained_ms_per_call:.3f} ms per call "
                               f"beyond the measured {m.median_ms:.3f} ms (another stream or a thread)",
                               unexplained_ms_per_call=m.unexplained_ms_per_call, median_ms=m.median_ms)
            without_own = timed.calls_without_own_kernel
            # Only where every checked call's own launches were visible from Python: a candidate whose kernels run
            # from a replayed CUDA graph or a compiled region shows none on any call, checked or timed.
            visible = all(t.own_calls > 0 for t in cand.reports(jobs.CandidateTrial))
            if without_own and visible and not self.opts.allow_library_only and not self.judge.has("no-own-kernel"):
                self.judge.add("timed-call-mismatch",
                               f"{without_own} of {timed.timed_calls} timed calls launched no kernel of "
                               "the candidate's own: what was timed is not what was checked",
                               calls_without_own_kernel=without_own)
            if judged:  # a candidate already wrong when checked says nothing new by being wrong when timed
                with self.clock.phase("judging"), self._device_judging():
                    self._judge_timed_outputs(timed.timed_trials, refs)
        for finding in cand.reports(jobs.ChildFinding):
            self.judge.add(finding.code, finding.message, **finding.details)
        self._notes(cand)
        with self.clock.phase("instructions"):
            instructions = self._instructions(cand)
        if self.groups and len(self.groups.groups) > 1 and failure is None and judged \
                and not self._integrity_failed():
            failure, failed_run, judged = self._later_groups(refs, semantics)
            cand = failed_run or cand
        if self._sanitize_tools() and failure is None and judged and not self._integrity_failed():
            with self.clock.phase("sanitizer"):
                self._sanitize()
        if self._profiles() and failure is None and judged and not self._integrity_failed():
            with self.clock.phase("executed"):
                self._executed(instructions)
        if failure is None and judged and not self._integrity_failed() and "candidate" in timing:
            with self.clock.phase("baselines"):
                timing.update(self._baselines())
        with self.clock.phase("roofline"):
            roofline, percent = self._roofline(timing)
        with self.clock.phase("decoys"), self._device_judging():
            self._degenerate_check(refs)
        return self._verdict(failure, cand, timing, roofline, percent, instructions)

    # -- reference ----------------------------------------------------------------------------------------------
    def _reference(self) -> tuple[dict[int, dict[str, Any]], dict[int, jobs.ReferenceTrial], jobs.Semantics]:
        spec = self._reference_spec(self.job_trials)
        from kernelwright.verify import refcache

        key = refcache.key_of(self.problem.sha256, spec.to_json(), installed_torch_version())
        caching = self.opts.reuse_reference and refcache.CACHE.capacity_bytes() > 0
        reused = refcache.CACHE.get(key) if caching else None
        if reused is not None:
            reused.write_shared(self.shared)
            run = reused.run
            self.judge.add("reference-reused", "the reference's inputs and answers came from an earlier verify of "
                           "this run (same problem content, seed, trials, sizes and device)", Severity.NOTE)
            return self._reference_from(run, {i: dict(r) for i, r in reused.refs.items()}, reused.ref_state,
                                        reused.ref_state64)
        run, refs, ref_state, ref_state64 = self._reference_job(spec)
        if caching and self.groups is None:
            # Before any candidate runs: the shared files as the reference wrote them.
            entry = refcache.make_entry(run, refs, ref_state, ref_state64, self.shared,
                                        refcache.CACHE.room_bytes())
            if entry is not None:
                refcache.CACHE.put(key, entry)
        return self._reference_from(run, refs, ref_state, ref_state64)

    def _reference_spec(self, job_trials: Sequence[trials.TrialSpec], held: int = 0) -> jobs.ReferenceSpec:
        sizes = dict(self.opts.size_overrides or {})
        return jobs.ReferenceSpec(
            problem=str(self.problem.path), device=self.device, init_seed=self.seed,
            trials=tuple(job_trials), shared_dir=str(self.shared), private_dir=str(self.private),
            policy=self.opts.policy, size_globals={**self.problem.size_globals, **sizes}, size_overrides=sizes,
            candidate_outputs=self._candidate_outputs(job_trials), timed_sets=self._timed_on_device(job_trials),
            shape_seed=self.plan[0].seed if self.groups else None,
            scratch_limit=int(float(config.scratch_limit_gb) * (1 << 30)), held_bytes=held)

    def _reference_job(self, spec: jobs.ReferenceSpec
                       ) -> tuple[ChildRun, dict[int, dict[str, Any]], dict[str, Any], dict[str, Any]]:
        """One reference job, its answers read into this process and deleted from disk; a plan whose files cannot
        all fit becomes trial groups (verify/groups.py) and the job runs again for the first."""
        self.private.mkdir(exist_ok=True)
        run = self._run("reference", spec)
        if out_of_memory_beside_others(run):
            self.judge.add("rerun-alone", "the reference's job ran out of memory beside other jobs of this run "
                           f"({what_failed(run)}); it ran again alone", Severity.NOTE)
            for leftover in self.private.glob("*"):
                leftover.unlink()
            run = self._run("reference", replace(spec, alone=True))
        if self.budget_cut == "reference":
            raise _BudgetSpent("reference (cut short)")
        error = run.report(protocol.JobError)
        need = run.report(jobs.ScratchNeed)
        if error and error.code in ("scratch-space", "device-memory") and need is not None and self.groups is None:
            if error.code == "scratch-space" and self._scratch_to_itself():
                return self._reference_job(spec)  # the whole plan again, with no other verify's files beside it
            self._plan_groups(need)  # a one-line InputError where not even one group fits
            self._clear_reference_files()
            return self._reference_job(self._reference_spec(self.job_trials))
        if error and error.status == "problem_error":
            log.info("the problem failed:\n%s", error.detail)
            raise InputError(f"problem {self.problem.path.name}: {error.message}; fix the problem file")
        if error or not run.finished:
            what = error.message if error else run.describe_exit()
            raise InputError(f"problem {self.problem.path.name}: computing the reference failed: {what}")
        refs: dict[int, dict[str, Any]] = {}
        import torch

        for path in sorted(self.private.glob("ref-*.pt")):
            index = int(path.stem.split("-")[1])
            refs[index] = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        state = self.private / trials.STATE_FILE
        saved = torch.load(state, map_location="cpu", weights_only=True) if state.is_file() else {}
        shutil.rmtree(self.private, ignore_errors=True)  # the answers now live only in this process
        return run, refs, saved.get("native") or {}, saved.get("fp64") or {}

    def _candidate_outputs(self, job_trials: Sequence[trials.TrialSpec]) -> int:
        """The output files a candidate's job writes beside the reference's: a checked call's each, a timed input
        set's each on a GPU (none where only the baselines are wanted, no timed sets in a later group)."""
        if self.baseline_names is not None:
            return 0
        return len(job_trials) + self._timed_on_device(job_trials)

    def _timed_on_device(self, job_trials: Sequence[trials.TrialSpec]) -> int:
        """The input sets a candidate's job times (the first group's, on a GPU)."""
        timed = self.device == "cuda" and self.opts.timing and job_trials[0].index == 0
        return len(self._timed_sets()) if timed and self.baseline_names is None else 0

    def _timed_sets(self) -> tuple[int, ...]:
        """The random trials whose inputs the timed calls and the baselines rotate among: the first ones of the
        first group (all of them kept until the verdict), at most ``input_sets``."""
        if self.groups is not None:
            return self.groups.kept
        randoms = [t.index for t in self.plan if t.kind == trials.RANDOM]
        return tuple(randoms[:int(config.input_sets)])

    def _reference_from(self, run: ChildRun, refs: dict[int, dict[str, Any]], ref_state: dict[str, Any],
                        ref_state64: dict[str, Any]
                        ) -> tuple[dict[int, dict[str, Any]], dict[int, jobs.ReferenceTrial], jobs.Semantics]:
        facts = run.report(jobs.DeviceFacts)
        if facts:
            self.device_facts = facts.facts
        ref_trials = {t.index: t for t in run.reports(jobs.ReferenceTrial)}
        self.ref_state, self.ref_state64 = ref_state, ref_state64
        work = run.report(jobs.Work)
        if work:
            from kernelwright.verify.roofline import traits

            self.work = work.work
            self.traits = traits(self.work, policy=self.opts.policy)
        self._notes(run)
        kernels = run.report(jobs.ReferenceKernels)
        self.reference_kernels = list(kernels.names) if kernels else []
        return refs, ref_trials, run.report(jobs.Semantics) or jobs.Semantics()

    # -- candidate ----------------------------------------------------------------------------------------------
    def _candidate(self, ref_trials: dict[int, jobs.ReferenceTrial], *, alone: bool = False,
                   checks_only: bool = False) -> ChildRun:
        """The candidate's job on the trials of this job (``checks_only``: a later trial group's, which times,
        profiles and compiles nothing: the first group did)."""
        # A trial drawn on another (a repoison's inputs, an in-place trial's buffers) runs only where that one does.
        runnable = [t for t in self.job_trials
                    if not ref_trials.get(t.index, UNREPORTED).skipped
                    and (t.source is None or not ref_trials.get(t.source, UNREPORTED).skipped)]
        # Trial 0's outputs' bytes (a later group's job holds no trial 0: the first group's figure), left free when
        # the device is poisoned.
        if 0 in ref_trials:
            self.output_bytes = sum(tensors.nbytes_of(o) for o in ref_trials[0].outputs)
        expected = self.output_bytes
        random_indices = [t.index for t in runnable if t.kind == trials.RANDOM]
        archs = tuple(self.opts.inspect_archs) if self.opts.inspect_archs is not None else (
            (config.arch,) if self.device == "cpu" and config.cpu_instructions else ())
        timed = self.device == "cuda" and self.opts.timing and not checks_only
        # The job sees its own working directory, not the temporary folders (isolation/plan.py box_plan): the
        # candidate file goes there, under its own name.
        copy = self.workdir / "candidate-src" / self.candidate.path.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(self.candidate.path, copy)
        spec = jobs.CandidateSpec(
            candidate=str(copy), device=self.device, init_seed=self.seed,
            trials=tuple(runnable), shared_dir=str(self.shared), out_dir=str(self.out),
            policy=self.opts.policy, expected_output_bytes=expected,
            # Which call is profiled is drawn afresh (not from --seed): a candidate cannot know which call to
            # behave on. Every trial's own launches are counted besides.
            profile_trial=secrets.choice(random_indices) if random_indices and not checks_only else None,
            watch_paths=(str(self.problem.path), str(self.private)), inspect_archs=() if checks_only else archs,
            arch=config.arch, triton_kernels=tuple(self.candidate.triton_kernels),
            timing=jobs.TimingSettings.from_config() if timed else None,
            n_sets=min(len(self._timed_sets()), len(random_indices)) or 1, alone=alone)
        for t in self.job_trials:
            if t not in runnable:
                reason = ref_trials.get(t.index, UNREPORTED).skipped or "its source trial was skipped"
                self.judge.outcomes[t.index] = TrialOutcome(index=t.index, kind=t.kind, seed=t.seed,
                                                            status="skipped", note=reason)
        self.expected_trials = [t.index for t in runnable]
        self.expects_timing = spec.timing is not None
        self.profile_trial, self.inspect_archs = spec.profile_trial, spec.inspect_archs
        return self._run("candidate", spec)

    def _child_failure(self, run: ChildRun) -> tuple[Status, str] | None:
        """The candidate's run ended early: the status and a one-line message, or None."""
        self._boundary(run)
        error = run.report(protocol.JobError)
        started = run.reports(jobs.TrialStart)
        phase = run.report(jobs.Phase)
        during = f" during trial {started[-1].index} ({started[-1].kind})" if started else ""
        if phase and phase.name == "timing":
            during = " while being timed"
        missing = self._unreported(run)
        in_instructions = phase is not None and phase.name == "instructions"
        if in_instructions and missing and (error or not run.finished or run.timed_out or run.returncode != 0):
            # Every check had reported, but the process died compiling its kernels: no pass without the summary
            # (an exit here is also how a candidate would hide a TF32 kernel).
            what = error.message if error else run.describe_exit()
            self.judge.add("evidence-missing", f"the instruction summary is missing ({', '.join(missing[:3])}): "
                           f"compiling the candidate's kernels failed ({what})", missing=missing)
            return Status.CRASHED, f"the candidate's process {run.describe_exit()} while its kernels were " \
                                   "compiled for the instruction summary, which a pass needs"
        if in_instructions and not missing and (error or not run.finished or run.timed_out):
            what = error.message if error else run.describe_exit()
            self.judge.add("instructions-unavailable",
                           f"compiling the candidate's kernels for the instruction summary failed ({what}) after "
                           "every kernel's summary was in; the verdict stands on the checks", Severity.WARNING)
            return None
        if run.timed_out:
            # Not evidence of a special case even during a special trial: the job's one time limit covers every
            # trial, so a slow honest candidate (a CPU interpreter run) can run out of it on the last trial. A
            # verdict of timeout accuses nothing; the message says where the time ran out.
            if self.budget_cut == "candidate":
                self.judge.add("budget-spent", f"the budget ran out{during}")
                return Status.TIMEOUT, f"the budget ran out{during}: the candidate's process was stopped (give " \
                                       "the run more time with --budget)"
            return Status.TIMEOUT, f"the candidate {run.describe_exit()}{during}"
        if error:
            status = Status(error.status) if error.status in Status._value2member_map_ else Status.RUNTIME_ERROR
            self.judge.add(error.code, error.message, details=error.detail)
            special = self._special_trial_failure(run, started) if status is Status.RUNTIME_ERROR else None
            return special or (status, error.message)
        if not run.finished:
            return self._special_trial_failure(run, started) or (
                Status.CRASHED, f"the candidate's process {run.describe_exit()}{during}")
        if missing:
            # "done" was said, yet what a pass depends on is not all there: a clean exit past the checks
            self.judge.add("evidence-missing", f"the candidate's job ended without reporting "
                           f"{', '.join(missing[:4])}{during}", missing=missing)
            return None
        if run.returncode != 0:
            return Status.CRASHED, f"the candidate's process {run.describe_exit()} without a clean exit{during}"
        return None

    def _special_trial_failure(self, run: ChildRun, started: list[jobs.TrialStart]) -> tuple[Status, str] | None:
        """A candidate that ran every ordinary trial but died (raised, crashed, hung) on a special one — a second
        shape, scaled inputs — fails that trial's test, not just "crashed"."""
        if not started or started[-1].kind not in SPECIAL_TRIAL_CODES:
            return None
        finished = {t.index for t in run.reports(jobs.CandidateTrial)}
        ordinary = [t.index for t in self.job_trials if t.kind == trials.RANDOM]
        if not all(i in finished for i in ordinary):
            return None
        kind = started[-1].kind
        code, _ = SPECIAL_TRIAL_CODES[kind]
        error = run.report(protocol.JobError)
        what = error.message if error else run.describe_exit()
        message = f"passes the ordinary trials but fails on the {kind.replace('_', '-')} trial: {what}"
        self.judge.add(code, message, trial=started[-1].index)
        return Status.REJECTED, f"{code}: {message}"

    def _notes(self, run: ChildRun) -> None:
        from kernelwright.verify.codes import CODES

        for note in run.reports(protocol.Note):  # at the code's usual severity (a cross-compile failure warns)
            known = CODES.get(note.code)
            self.judge.add(note.code, note.message, known.severity if known else Severity.NOTE)
        build = run.report(jobs.CudaBuild)
        if build:
            result = build.result
            state = {True: "compiled", False: "failed to compile", None: "was not compiled"}[result.ok]
            self.judge.add("cuda-build", f"CUDA extension {build.name!r} {state} for {build.arch}",
                           Severity.NOTE if result.ok else Severity.WARNING, **result.to_json())

    def _integrity_failed(self) -> bool:
        return any(f.code in INTEGRITY_CODES and f.severity is Severity.ERROR for f in self.judge.findings)

    # -- instruction evidence -----------------------------------------------------------------------------------
    # -- baselines and roofline ---------------------------------------------------------------------------------
    def _baselines(self) -> dict[str, jobs.Measurement | None]:
        from kernelwright.verify.baseline import (
            cached_ceilings,
            collect_baselines,
            mentions_convolution,
            plan_baselines,
        )

        variants, reused = plan_baselines(self.opts, self.judge, device=str(self.device),
                                          convolutions=mentions_convolution(self.problem.path))
        if self.baseline_names is not None:
            variants = [v for v in variants if v in self.baseline_names]
        if not variants:
            self.ceilings = cached_ceilings(self.device_facts.get("name")) or self.ceilings
            if self.ceilings or not str(self.device).startswith("cuda"):
                return dict(reused)
            # Every baseline reused, but this machine has not measured its ceilings yet (a fresh GPU machine: run
            # 38's and 39's rows had no floor): the baseline job runs for the calibration alone.
        spec = jobs.BaselineSpec(
            problem=str(self.problem.path), device=self.device, init_seed=self.seed, shared_dir=str(self.shared),
            input_sets=self._timed_sets(), policy=self.opts.policy, variants=tuple(variants),
            size_overrides=dict(self.opts.size_overrides or {}), timing=jobs.TimingSettings.from_config())
        run = self._run("baseline", spec, timeout=max(self.timeout, 1800.0))
        found, ceilings = collect_baselines(run, reused, self.judge, budget_cut=self.budget_cut == "baseline")
        self.ceilings = ceilings or self.ceilings
        return found

    def _roofline(self, timing: dict[str, jobs.Measurement | None]) -> tuple[Roofline | None, float | None]:
        if self.work is None:
            return None, None
        from kernelwright.verify.roofline import place

        return place(self.work, timing, device=self.device, device_name=self.device_facts.get("name"),
                     ceilings=self.ceilings, allow_tf32=self.opts.policy.allow_tf32, judge=self.judge)

    # -- degenerate problems ------------------------------------------------------------------------------------
    def _degenerate_check(self, refs: dict[int, dict[str, Any]]) -> None:
        from kernelwright.verify.decoys import degenerate_decoys

        found = degenerate_decoys(self.problem.sha256, refs, self.shared, mode=self.opts.tolerance,
                                  factor=self.factor, seed=self.seed, allowed_unit_roundoff=self.allowed_roundoff,
                                  size_overrides=dict(self.opts.size_overrides or {}), device=self.judge_device)
        if found:
            self.judge.add("degenerate-problem",
                           f"a decoy ({', '.join(found)}) passes this problem's check: the problem cannot tell a "
                           "real kernel from a trivial one, so no pass on it is clean", Severity.WARNING,
                           decoys=found)

    # -- verdict ------------------------------------------------------------------------------------------------
    def _verdict(self, failure: tuple[Status, str] | None, run: ChildRun,
                 timing: dict[str, jobs.Measurement | None], roofline: Roofline | None, percent: float | None,
                 instructions: list[KernelSummary]) -> Verdict:
        findings = self.judge.findings
        errors = sorted((f for f in findings if f.severity is Severity.ERROR), key=headline_rank)
        integrity = [f for f in errors if f.code in INTEGRITY_CODES and not f.details.get("imprecision")]
        if failure is not None and failure[0] is Status.CRASHED and integrity:
            # A process that wrote into the harness's channel, hooked it or broke its box and then died: the
            # exploit is the verdict, not the crash it caused.
            status, message = Status.REJECTED, f"{integrity[0].code}: {integrity[0].message}"
        elif failure is not None:
            status, message = failure
        elif integrity:
            status, message = Status.REJECTED, f"{integrity[0].code}: {integrity[0].message}"
        elif errors:
            status, message = Status.INCORRECT, f"{errors[0].code}: {errors[0].message}"
        else:
            status, message = Status.PASSED, "correct on every trial"
        speedups: dict[str, float] = {}
        cand = timing.get("candidate")
        if cand:
            for name in ("eager", EAGER_DEFAULTS, "compile", "compile_max_autotune"):
                other = timing.get(name)
                if other and cand.median_ms > 0:
                    speedups[f"vs_{name}"] = other.median_ms / cand.median_ms
        if status is Status.PASSED and cand:
            message = f"correct on every trial; {cand.median_ms:.4f} ms"
            if "vs_eager" in speedups:
                message += f", {speedups['vs_eager']:.2f}x eager"
            if "vs_eager_defaults" in speedups:  # an fp32 problem's convolutions, as PyTorch's defaults run them
                message += f" ({speedups['vs_eager_defaults']:.2f}x at PyTorch's defaults: TF32 cuDNN)"
            best = speedups.get("vs_compile_max_autotune") or speedups.get("vs_compile")
            if best:
                message += f", {best:.2f}x torch.compile"
        elif status is Status.PASSED and self.device == "cpu":
            message = "correct on every trial (Triton interpreter on the CPU; timing not measured)"
        clean = status is Status.PASSED and not any(f.code in UNCLEAN_CODES for f in findings)
        # Trials that never ran (the job ended first) are recorded as such.
        outcomes = dict(self.judge.outcomes)
        for t in self.plan:
            outcomes.setdefault(t.index, TrialOutcome(index=t.index, kind=t.kind, seed=t.seed, status="not-run"))
        base = dict(self.base)
        base["device"] = self.device_facts
        return Verdict(
            status=status,
            message=message,
            clean=clean,
            trials=tuple(outcomes[i] for i in sorted(outcomes)),
            findings=tuple(sorted(findings, key=lambda f: ("error", "warning", "note").index(str(f.severity)))),
            timing=timing,
            speedups=speedups,
            roofline=roofline,
            percent_of_floor=percent,
            traits=self.traits,
            kernels=tuple(self.kernels),
            instructions=tuple(instructions),
            executed=self.executed,
            stderr_tail=run.stderr_tail if status is not Status.PASSED else "",
            phases=dict(self.phases),
            **base,
        )
