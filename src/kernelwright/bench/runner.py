"""Running a bench: each problem optimized (or its solution verified), each row stored as it finishes, within the
budgets, resumable, several problems side by side on one GPU.

A row is stored in the run database under a key of everything that decides it — the problem's content, the
solution's, the device, torch, triton, kernelwright's version and the fingerprint of its source (a template or
verifier changed since makes a new row: the version number alone stays 0.1.0 across them), and the bench's
settings — so ``--resume`` skips a problem only when the same bench of the same code on the same machine already
finished. The baselines' timings (eager,
torch.compile, max-autotune) are stored under a key without the kernel's side and reused by any later bench of that
problem on that device and toolchain: on the GPU they are a third of a verify's time.

Workers: with ``jobs > 1`` each problem runs in a process of its own (capture and planning are not thread-safe),
and on a GPU the jobs share it through the GPU lock (hardware/gpu_lock.py): their work overlaps, their
measurements never do.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelwright.bench import executor, rows
from kernelwright.bench.collect import BenchProblem
from kernelwright.bench.scores import geomean
from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.records import DEFAULT_POLICY, Policy
from kernelwright.verify.baseline import COMPILE_MODES
from kernelwright.verify.records import finite_json


@dataclass(frozen=True)
class BenchSettings:
    out_dir: Path
    device: str  # "cpu" or "cuda", resolved
    generator: str = "templates"
    budget_per_problem_s: float = 180.0  # the search's (optimize) or the solution's verify's (solutions)
    # How long the winner's verify may run past the search's budget: a row is worth its baselines, and on a GPU
    # shared by --jobs problems a verify took 225-245 s (H200, 2026-12-02) where alone it took 90.
    verify_limit_s: float = 600.0
    budget_s: float | None = None  # the whole bench; None: no limit
    arch: str | None = None
    policy: Policy = DEFAULT_POLICY
    baselines: tuple[str, ...] = ("eager", "compile", "compile_max_autotune")
    # Problems in flight at once; with --executor ray, 0 is one per GPU of the cluster.
    jobs: int = 1
    executor: str = "local"  # bench/executor: "local" (worker processes, a lane per GPU) or "ray"
    gpus: tuple[str, ...] = ()  # the GPUs a local bench spreads over (CUDA_VISIBLE_DEVICES names); () the one
    ray_address: str | None = None  # --executor ray: the cluster (None: one started for the bench)
    resume: bool = False
    db_path: Path | None = None
    solutions: bool = False  # score outside ModelNew files (each problem's .solution) instead of optimizing
    llm: dict[str, Any] = field(default_factory=dict)  # the LLM generator's options (--generator llm|hybrid)
    sanitize: tuple[str, ...] | None = None  # compute-sanitizer tools (VerifyOptions.sanitize; None: its default)
    executed: bool = True  # a GPU pass's profiled call under Nsight Compute (--no-executed: not)
    backend: str | None = None  # template back ends (--backend; None: the backend setting)
    use_model: bool = True  # the cost model orders the search's configurations (--no-model: the templates' order)
    ptx_rewrites: bool = True  # the search times its leaders' PTX rewrites (--no-ptx-rewrites: not)

    def key_fields(self) -> dict[str, Any]:
        """What, besides the problem, the solution and the machine, decides a row."""
        llm = {k: v for k, v in self.llm.items() if k != "base_url"}  # where the model is served is not the result
        return {"generator": self.generator, "llm": llm, "budget_per_problem_s": self.budget_per_problem_s,
                "arch": self.arch, **self.policy.to_json(), "baselines": list(self.baselines),
                **({"sanitize": list(self.sanitize)} if self.sanitize is not None else {}),
                **({"backend": self.backend} if self.backend is not None else {}),
                **({"cost_model": False} if not self.use_model else {}),
                **({"ptx_rewrites": False} if not self.ptx_rewrites else {}),
                **({"executed": False} if not self.executed else {})}


@dataclass(frozen=True)
class Task:
    problem: BenchProblem
    settings: BenchSettings
    reuse_baselines: dict[str, Any] = field(default_factory=dict)
    # The compile baselines timed in a job of their own beside the search (time_baselines), not after the winner's
    # verify: max-autotune's cold compile took 180-216 s there and cost whole rows (issue 28).
    side_baselines: tuple[str, ...] = ()
    # A stored row whose pending baselines are all this task times (--resume of a row that has its verdict).
    fill: dict[str, Any] | None = None


def _sha(path: Path | None) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else ""


def machine() -> dict[str, Any]:
    """The device and toolchain a row's figures belong to."""
    import torch

    from kernelwright.version import __version__

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return {"device": device, "torch": torch.__version__, "triton": triton_version, "kernelwright": __version__,
            "source": source_fingerprint()}


@functools.lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """sha256 over kernelwright's sources and data (paths and contents, in path order: the Python, the hardware
    knowledge base's TOML that sizes the config spaces, the LLM prompts): what wrote and judged a row. A resumed
    bench reuses rows of this code only."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = [p for p in root.rglob("*") if p.suffix in (".py", ".toml", ".md", ".json") and "__pycache__" not in p.parts]
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:24]


def row_key(problem: BenchProblem, settings: BenchSettings, where: dict[str, Any]) -> str:
    return _hash({"problem": _sha(problem.path), "solution": _sha(problem.solution), "machine": where,
                  "settings": settings.key_fields(), "mode": "solutions" if settings.solutions else "optimize"})


def baseline_key(problem: BenchProblem, settings: BenchSettings, where: dict[str, Any]) -> str:
    from kernelwright.config import config

    # PyTorch's timings do not depend on our code (the timing protocol's settings are in the key): reused across
    # kernelwright versions, as they always were
    where = {k: v for k, v in where.items() if k != "source"}
    return _hash({"problem": _sha(problem.path), "machine": where, "allow_tf32": settings.policy.allow_tf32,
                  "timing": [config.timing_target_ms, config.timing_min_reps, config.timing_max_reps,
                             config.input_sets]})


# -- one problem (in a worker process, or here) ----------------------------------------------------------------
def run_task(task: Task) -> tuple[dict[str, Any], dict[str, Any]]:
    """(row, baseline timings measured for it). Never raises for the problem's sake: a bad problem is a row."""
    started = time.monotonic()
    if task.fill is not None:
        return _fill_pending(task, started)
    side = _SideBaselines(task, started) if task.side_baselines else None
    try:
        row, baselines = _run_problem(task, started)
    except KeyboardInterrupt:
        if side is not None:
            side.join(timeout=30.0)  # its children got the Ctrl-C too
        raise
    row = _pending_in_verify(row, task)
    if side is None:
        return row, baselines
    # Interrupted: the side job's children got the Ctrl-C too and end at once; else it ends by its deadline.
    return _with_side_baselines(row, baselines, task,
                                side.join(timeout=30.0 if row["status"] == rows.INTERRUPTED else None))


def _run_problem(task: Task, started: float) -> tuple[dict[str, Any], dict[str, Any]]:
    from kernelwright.errors import InputError, KernelwrightError, UnsupportedProblem

    problem = task.problem
    mode = "solutions" if task.settings.solutions else "optimize"
    base = {"name": problem.name, "path": str(problem.path), "mode": mode}
    try:
        if task.settings.solutions and problem.solution is None:
            return rows.failure_row(**base, status=rows.NO_SOLUTION, message="no file in the solutions folder "
                                    "matches this problem's name"), {}
        if task.settings.solutions:
            return _verify_solution(task, started)
        if task.settings.generator != "templates":
            return _optimize_with_llm(task, started)
        return _optimize(task, started)
    except UnsupportedProblem as exc:
        return rows.failure_row(**base, status="unsupported", message=str(exc),
                                wall_s=time.monotonic() - started), {}
    except InputError as exc:
        return rows.failure_row(**base, status=rows.INPUT_ERROR, message=str(exc),
                                wall_s=time.monotonic() - started), {}
    except KernelwrightError as exc:
        return rows.failure_row(**base, status=rows.INPUT_ERROR, message=str(exc),
                                wall_s=time.monotonic() - started), {}
    except KeyboardInterrupt:
        return rows.failure_row(**base, status=rows.INTERRUPTED, message="interrupted before a verdict",
                                wall_s=time.monotonic() - started), {}
    except Exception as exc:  # noqa: BLE001 - one problem's crash is its row, not the bench's end
        return rows.failure_row(**base, status="crashed", message=f"kernelwright failed on it: "
                                f"{type(exc).__name__}: {exc}"[:400], wall_s=time.monotonic() - started), {}


# -- baselines beside the search, and rows whose baselines come later --------------------------------------------
def _baseline_deadline(task: Task, started: float) -> Deadline:
    return Deadline(started + task.settings.budget_per_problem_s + task.settings.verify_limit_s)


class _SideBaselines:
    """``task.side_baselines`` timed in a thread of the problem's worker from its start (the jobs are the
    verifier's own children: the thread only waits on them), until the problem's search and verify allowance
    ends."""

    def __init__(self, task: Task, started: float) -> None:
        import threading

        self.task, self.started = task, started
        self.result: Any = None
        self.error = ""
        self._thread = threading.Thread(target=self._run, name=f"baselines-{task.problem.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kernelwright.verify.records import VerifyOptions
        from kernelwright.verify.verifier import time_baselines

        settings = self.task.settings
        try:
            self.result = time_baselines(self.task.problem.path, self.task.side_baselines, VerifyOptions(
                device=settings.device, policy=settings.policy, deadline=_baseline_deadline(self.task, self.started)))
        except Exception as exc:  # noqa: BLE001 - the row says the baselines are pending; the problem's row stands
            self.error = f"{type(exc).__name__}: {exc}"[:300]

    def join(self, timeout: float | None = None) -> Any:
        self._thread.join(timeout)
        return self.result


def _with_side_baselines(row: dict[str, Any], baselines: dict[str, Any], task: Task, side: Any
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row with what the side job measured filled in (or pending where it was cut or could not run), and those
    measurements added to the ones the baseline cache stores."""
    names = task.side_baselines
    measured = dict(side.measured) if side is not None else {}
    cut = set(side.cut) if side is not None else set(names)
    stored = {**baselines, **{n: m.to_json() for n, m in measured.items() if m is not None}}
    if not row.get("timed"):
        return row, stored
    row = {**row, "pending": sorted({*row.get("pending", ()), *names})}
    done = {n: (m.median_ms if m is not None else None) for n, m in measured.items() if n not in cut}
    return rows.fill_baselines(row, done), stored


def _fill_pending(task: Task, started: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored row's pending baselines timed now, the rest of the row as it was."""
    from kernelwright.verify.records import VerifyOptions
    from kernelwright.verify.verifier import time_baselines

    assert task.fill is not None
    row = {**task.fill, "resumed": True}
    settings = task.settings
    try:
        side = time_baselines(task.problem.path, tuple(row.get("pending") or ()), VerifyOptions(
            device=settings.device, policy=settings.policy, deadline=_baseline_deadline(task, started)))
    except KeyboardInterrupt:
        return row, {}
    except Exception:  # noqa: BLE001 - the row keeps its pending baselines for the next call
        return row, {}
    done = {n: (m.median_ms if m is not None else None) for n, m in side.measured.items() if n not in side.cut}
    return rows.fill_baselines(row, done), {n: m.to_json() for n, m in side.measured.items() if m is not None}


def _pending_in_verify(row: dict[str, Any], task: Task) -> dict[str, Any]:
    """A timed row whose verify the budget cut while it timed the baselines: those it did not reach are pending."""
    if not row.get("timed") or "baselines-cut" not in row.get("notes", ()):
        return row
    missing = [b for b in task.settings.baselines if b not in task.side_baselines and row["ms"].get(b) is None]
    return {**row, "pending": sorted({*row.get("pending", ()), *missing})}


def _verify_options(task: Task) -> dict[str, Any]:
    settings = task.settings
    modes = tuple(b for b in settings.baselines if b in COMPILE_MODES and b not in task.side_baselines)
    return {"compile_baseline": bool(modes), "compile_modes": modes, "reuse_baselines": task.reuse_baselines,
            # each step of a GPU verify as it starts and ends: a verify cut by the problem's budget says where it was
            "progress_file": str(settings.out_dir / task.problem.name / "verify-progress.jsonl"),
            "sanitize": settings.sanitize, "executed": None if settings.executed else False}


def _measured_baselines(verdict: Any, task: Task) -> dict[str, Any]:
    """The baselines this verify timed, as the JSON the baseline cache stores (reused ones are not stored again)."""
    return {name: m.to_json() for name, m in verdict.timing.items()
            if name != "candidate" and m and name not in task.reuse_baselines}


def _search_inputs(task: Task) -> tuple[Any, Path, Any]:
    """(the precision policy, the problem's folder, the GPU evaluator with the bench's verify options or None)."""
    from kernelwright.search.evaluate import GpuEvaluator

    settings = task.settings
    policy = settings.policy
    evaluator = None
    if settings.device == "cuda":
        evaluator = GpuEvaluator(task.problem.path, policy=policy, verify_options=_verify_options(task))
    return policy, settings.out_dir / task.problem.name, evaluator


def _optimize(task: Task, started: float) -> tuple[dict[str, Any], dict[str, Any]]:
    from kernelwright.generate.cuda import config_backend
    from kernelwright.hardware.local import target_arch
    from kernelwright.search.progress import Progress
    from kernelwright.search.request import SearchRequest
    from kernelwright.search.request import run as run_search

    problem, settings = task.problem, task.settings
    policy, out, evaluator = _search_inputs(task)
    result = run_search(SearchRequest(
        problem=problem.path, out_dir=out, deadline=Deadline(started + settings.budget_per_problem_s),
        device=settings.device, arch=target_arch(settings.device, settings.arch), policy=policy,
        evaluator=evaluator, progress=Progress(stream=io.StringIO()), db_path=settings.db_path,
        verify_allowance_s=settings.verify_limit_s, backend=settings.backend, use_model=settings.use_model,
        ptx_rewrites=settings.ptx_rewrites))
    families = [g.family for g in result.plan.groups]
    uncovered = result.plan.describe()[-1] if result.plan.uncovered else ""
    base = {"name": problem.name, "path": str(problem.path), "mode": "optimize"}
    wall = time.monotonic() - started
    best = result.best
    if result.interrupted and (best is None or best.verdict is None):
        return rows.failure_row(**base, status=rows.INTERRUPTED, message="interrupted before a verdict",
                                wall_s=wall, families=families, uncovered=uncovered), {}
    if best is None or best.verdict is None:
        why = next((f"{o.status}: {o.error}" for o in result.outcomes if o.error), "no candidate was verified")
        return rows.failure_row(**base, status=best.status if best else "failed", message=why[:400], wall_s=wall,
                                families=families, uncovered=uncovered), {}
    row = rows.row_from_verdict(best.verdict, **base, families=families, uncovered=uncovered, wall_s=wall,
                                best_py=str(out / "best.py"), report_md=str(out / "report.md"))
    row["backends"] = sorted({config_backend(c) for c in best.candidate.configs})  # the winner's: triton, cuda
    if best.candidate.ptx_passes:  # the winner's Triton kernels run with their PTX rewritten
        row["backends"] = [*row["backends"], "ptx " + "+".join(best.candidate.ptx_passes)]
    row["ptx_rewrites"] = [{"passes": list(t.passes), "speedup": t.ratio, "kept": t.kept} for t in result.rewrites]
    if result.interrupted:
        row["status"] = rows.INTERRUPTED
    return row, _measured_baselines(best.verdict, task)


def _optimize_with_llm(task: Task, started: float) -> tuple[dict[str, Any], dict[str, Any]]:
    from kernelwright.search.llm_search import optimize_with_llm

    problem, settings = task.problem, task.settings
    policy, out, evaluator = _search_inputs(task)
    result = optimize_with_llm(problem.path, out_dir=out, budget_s=settings.budget_per_problem_s,
                               generator=settings.generator, device=settings.device, arch=settings.arch,
                               policy=policy, db_path=settings.db_path, evaluator=evaluator,
                               progress_stream=io.StringIO(), verify_allowance_s=settings.verify_limit_s,
                               **settings.llm)
    base = {"name": problem.name, "path": str(problem.path), "mode": "optimize"}
    wall = time.monotonic() - started
    best = result.best
    if best is None or best.verdict is None:
        status = rows.INTERRUPTED if result.interrupted else "failed"
        return rows.failure_row(**base, status=status, message=f"no verified kernel ({result.stop_reason})",
                                wall_s=wall), {}
    row = rows.row_from_verdict(best.verdict, **base, families=[settings.generator], wall_s=wall,
                                best_py=str(out / "best.py"), report_md=str(out / "report.md"))
    if result.interrupted:
        row["status"] = rows.INTERRUPTED
    return row, _measured_baselines(best.verdict, task)


def _verify_solution(task: Task, started: float) -> tuple[dict[str, Any], dict[str, Any]]:
    from kernelwright.hardware.local import target_arch
    from kernelwright.verify.records import VerifyOptions, verdict_json
    from kernelwright.verify.report import render
    from kernelwright.verify.verifier import verify

    problem, settings = task.problem, task.settings
    assert problem.solution is not None
    out = settings.out_dir / problem.name
    options = VerifyOptions(device=settings.device, policy=settings.policy,
                            deadline=Deadline(started + settings.budget_per_problem_s),
                            inspect_archs=(target_arch(settings.device, settings.arch),)
                            if settings.device == "cpu" else None,
                            **_verify_options(task) if settings.device == "cuda" else {})
    verdict = verify(problem.path, problem.solution, options)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(verdict_json(verdict) + "\n")
    (out / "report.md").write_text(render(verdict))
    row = rows.row_from_verdict(verdict, name=problem.name, path=str(problem.path), mode="solutions",
                                wall_s=time.monotonic() - started, best_py=str(problem.solution),
                                report_md=str(out / "report.md"))
    return row, _measured_baselines(verdict, task)


# -- the whole bench ------------------------------------------------------------------------------------------
@dataclass
class BenchProgress:
    """``bench 5/36 | 4 passed | geomean 1.12x vs max-autotune | 1 exploit | 7m left | running a, b``"""

    total: int
    stream: Any = None
    done: int = 0
    passed: int = 0
    exploits: int = 0
    speedups: list[float] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    pending: int = 0  # rows whose baselines are not all timed
    deadline: Deadline = NO_DEADLINE
    timed: bool = True

    def line(self) -> str:
        parts = [f"bench {self.done}/{self.total}", f"{self.passed} passed"]
        if self.pending:
            parts.append(f"{self.pending} with baselines pending")
        if self.timed:
            g = geomean(self.speedups)
            parts.append(f"geomean {g:.2f}x vs max-autotune" if g else "geomean -")
        if self.exploits:
            parts.append(f"{self.exploits} exploit{'s' if self.exploits > 1 else ''}")
        if self.deadline.bounded:
            parts.append(f"{self.deadline.left() / 60:.1f} min left")
        if self.running:
            parts.append("running " + ", ".join(self.running[:4]) + ("…" if len(self.running) > 4 else ""))
        return " | ".join(parts)

    def add(self, row: dict[str, Any]) -> None:
        self.done += 1
        self.passed += row.get("status") == "passed"
        self.exploits += bool(row.get("exploit"))
        self.pending += bool(row.get("pending"))
        s = (row.get("speedup") or {}).get("compile_max_autotune")
        if row.get("status") == "passed" and s:
            self.speedups.append(s)

    def show(self) -> None:
        from kernelwright.search.progress import status_line

        status_line(self.stream or sys.stderr, self.line())


@dataclass
class BenchOutcome:
    rows: list[dict[str, Any]]
    machine: dict[str, Any]
    settings: BenchSettings
    interrupted: bool = False
    reused: int = 0  # rows taken from the database (--resume)
    elapsed_s: float = 0.0
    # A parallel bench on a GPU: the GPU lock's long holds by job and mode (hardware/gpu_lock.hold_summary)
    lock_holds: dict[str, dict[str, float]] = field(default_factory=dict)


def run_bench(problems: Sequence[BenchProblem], settings: BenchSettings, *, progress_stream: Any = None,
              on_row: Callable[[dict[str, Any]], None] | None = None) -> BenchOutcome:
    """Bench ``problems``; every finished row goes to the run database before the next is started. Ctrl-C ends the
    problems in flight (each writes what it has) and returns what is done; the rest are ``not-run``."""
    with executor.session(settings.executor, settings.ray_address):
        return _run_bench(problems, settings, progress_stream, on_row)


def _run_bench(problems: Sequence[BenchProblem], settings: BenchSettings, progress_stream: Any,
               on_row: Callable[[dict[str, Any]], None] | None) -> BenchOutcome:
    from kernelwright.search.db import RunDB

    started = time.monotonic()
    # The rows belong to the machine that runs them: a Ray cluster's GPU workers, not a driver without a GPU.
    where = executor.remote_machine(settings, machine) if settings.executor == "ray" and settings.device == "cuda" \
        else machine()
    # The bench's whole budget, in this process; a task carries seconds (it may run on another machine: Ray).
    deadline = Deadline.after(settings.budget_s or None)
    progress = BenchProgress(total=len(problems), stream=progress_stream, deadline=deadline,
                             timed=settings.device == "cuda")
    results: dict[str, dict[str, Any]] = {}
    reused = 0
    interrupted = False
    lock_holds: dict[str, dict[str, float]] = {}
    with RunDB(settings.db_path) as db:
        pending: list[Task] = []
        for problem in problems:
            stored = db.bench_result(row_key(problem, settings, where)) if settings.resume else None
            cached = db.baseline_timings(baseline_key(problem, settings, where))
            reuse = {k: v for k, v in (cached[0] if cached else {}).items() if k in settings.baselines}
            if stored is not None and stored.get("pending"):
                # A row with its verdict whose baselines were not all timed: the cache may hold them by now (a
                # later bench, or this problem's side job); else only they are timed, not the problem again.
                stored = rows.fill_baselines(stored, {b: _median(reuse[b]) for b in stored["pending"] if b in reuse})
                if stored.get("pending"):
                    pending.append(Task(problem, settings, reuse, fill=stored))
                    continue
                db.store_bench_result(stored["key"], _sha(problem.path), problem.name, stored)
            if stored is not None:
                results[problem.name] = {**stored, "resumed": True}
                progress.add(stored)
                reused += 1
                continue
            side = tuple(b for b in settings.baselines if b in COMPILE_MODES and b not in reuse) \
                if settings.device == "cuda" else ()
            pending.append(Task(problem, settings, reuse, side_baselines=side))
        progress.show()

        def finish(task: Task, row: dict[str, Any], baselines: dict[str, Any]) -> None:
            row = finite_json({**row, "key": row_key(task.problem, settings, where)})
            results[task.problem.name] = row
            # A row the budget cut short is not finished: --resume runs it again (its verify or its baselines
            # were cut, or it was interrupted or never started).
            if row["status"] not in (rows.INTERRUPTED, rows.NOT_RUN) and not _cut_short(row):
                db.store_bench_result(row["key"], _sha(task.problem.path), task.problem.name, row)
            if baselines and row["status"] != rows.INTERRUPTED:
                key = baseline_key(task.problem, settings, where)
                old = db.baseline_timings(key)
                db.store_baseline_timings(key, {**(old[0] if old else {}), **baselines})
            progress.add(row)
            if on_row is not None:
                on_row(row)

        side: executor.Side | None = None
        try:
            if settings.jobs == 1 and settings.executor == "local":
                for task in pending:
                    if deadline.expired():
                        break
                    progress.running = [task.problem.name]
                    progress.show()
                    clamped = _within_total(task, deadline)
                    row, baselines = run_task(clamped)
                    progress.running = []
                    finish(clamped, row, baselines)
                    progress.show()
                    if row["status"] == rows.INTERRUPTED:
                        raise KeyboardInterrupt
                    if clamped is not task and "budget-spent" in row.get("findings", ()):
                        # The whole bench's budget is what ran out: the rest are not started. A problem that
                        # spent its own budget is a timeout row, and the next one starts (a level-2 bench with
                        # `--budget 140m` stopped at its first timeout with 103 minutes left, 2026-12-02).
                        break
            else:
                side = executor.Side(run_task=run_task, clamp=functools.partial(_within_total, deadline=deadline),
                                     finish=finish, progress=progress, deadline=deadline)
                executor.run(pending, settings, side)
        except KeyboardInterrupt:
            interrupted = True
        if side is not None:  # an interrupted run's finished tasks keep their holds (run 58 lost them all)
            from kernelwright.hardware import gpu_lock

            lock_holds = gpu_lock.merge_summaries(*side.holds)
    for problem in problems:
        if problem.name not in results:
            results[problem.name] = rows.failure_row(
                name=problem.name, path=str(problem.path), mode="solutions" if settings.solutions else "optimize",
                status=rows.NOT_RUN, message="interrupted before it started" if interrupted else
                "the bench's --budget ran out before it started; run again with --resume")
    progress.running = []
    progress.show()
    if progress.stream is None and sys.stderr.isatty():
        sys.stderr.write("\n")
    ordered = [results[p.name] for p in problems]
    return BenchOutcome(rows=ordered, machine=where, settings=settings, interrupted=interrupted, reused=reused,
                        elapsed_s=time.monotonic() - started, lock_holds=lock_holds)


def _cut_short(row: Mapping[str, Any]) -> bool:
    """Whether a budget stopped the row's verify before its verdict. A verdict whose baselines were cut is a row
    (its missing baselines ``pending``: --resume times only them); one cut with no pending list (a row of an
    earlier version) is run again."""
    if "budget-spent" in row.get("findings", ()):
        return True
    return "baselines-cut" in row.get("notes", ()) and not row.get("pending")


def _median(measurement: Any) -> float | None:
    """The median of a baseline cache entry (a Measurement's JSON)."""
    from kernelwright.jobs import Measurement

    try:
        return Measurement.from_json(measurement).median_ms
    except Exception:  # noqa: BLE001 - an unreadable entry is no timing
        return None


def _within_total(task: Task, deadline: Deadline) -> Task:
    """A problem's budget never reaches past the bench's total."""
    if not deadline.bounded:
        return task
    left = max(1.0, deadline.left())
    budget = min(task.settings.budget_per_problem_s, left)
    verify_limit = min(task.settings.verify_limit_s, left - budget)
    if (budget, verify_limit) == (task.settings.budget_per_problem_s, task.settings.verify_limit_s):
        return task
    return replace(task, settings=replace(task.settings, budget_per_problem_s=budget, verify_limit_s=verify_limit))


def settings_json(settings: BenchSettings) -> dict[str, Any]:
    data = asdict(settings)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}
