"""Where a bench's problems run when more than one runs at a time: ``local`` — worker processes on this machine, a
lane of them per GPU; ``ray`` — Ray tasks over a Ray cluster, Ray's scheduler placing each on a GPU (its ``num_gpus``
resource). The rows are the same either way; each says which GPU it ran on.

Measurements never overlap on one GPU: every GPU has its own GPU lock (hardware/gpu_lock), which the workers on it
(and the verifier's children they start) share. A worker that dies — the out-of-memory killer, a crash in native
code — costs its own problem's row; the problems beside it run again once.

The task function (the bench's ``run_task``) is passed in, not imported: it pickles by reference for a worker, and
this module stays below the bench's runner.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.bench import rows
from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.errors import InputError

EXECUTORS = ("local", "ray")
RAY_HINT = "pip install 'kernelwright[ray]'"

RunTask = Callable[[Any], tuple[dict[str, Any], dict[str, Any]]]
Finish = Callable[[Any, dict[str, Any], dict[str, Any]], None]
Holds = dict[str, dict[str, float]]


@dataclass
class Side:
    """What a side-by-side run needs from the bench: how to run one task (in a worker), how to fit a task into the
    bench's remaining budget (in the parent), where a finished row goes, and the progress line."""

    run_task: RunTask
    clamp: Callable[[Any], Any]
    finish: Finish
    progress: Any  # BenchProgress: .running, .show()
    deadline: Deadline = NO_DEADLINE
    # Each finished task's long holds of the GPU lock, kept here as they come (an interrupted run keeps them too).
    holds: list[Holds] = field(default_factory=list)

    def crashed(self, task: Any, message: str) -> None:
        mode = "solutions" if task.settings.solutions else "optimize"
        self.finish(task, rows.failure_row(name=task.problem.name, path=str(task.problem.path), mode=mode,
                                           status="crashed", message=message[:300]), {})

    def open(self) -> bool:
        return not self.deadline.expired()


def visible_gpus() -> tuple[str, ...]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (its entries, or 0..n-1)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(e.strip() for e in listed.split(",") if e.strip())
    import torch

    return tuple(str(i) for i in range(torch.cuda.device_count())) if torch.cuda.is_available() else ()


def parse_gpus(text: str, visible: Sequence[str]) -> tuple[str, ...]:
    """``--gpus``: ``all`` or a comma-separated list of the visible GPUs (their CUDA_VISIBLE_DEVICES names)."""
    if text.strip() == "all":
        return tuple(visible)
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in visible]
    if unknown or not names:
        shown = ", ".join(visible) or "none"
        raise InputError(f"--gpus {text!r}: {'GPU ' + ', '.join(unknown) + ' is not' if unknown else 'nothing'} "
                         f"visible to this process (visible: {shown}); name some of those, or 'all'")
    return names


def _with_task_env(run_task: RunTask, task: Any, holds_log: str) -> tuple[dict[str, Any], dict[str, Any], Holds]:
    """run_task with the GPU lock's long holds logged to this task's own file, summed into its result."""
    from kernelwright.hardware import gpu_lock

    os.environ[gpu_lock.HOLDS_ENV] = holds_log
    try:
        row, baselines = run_task(task)
    finally:
        os.environ.pop(gpu_lock.HOLDS_ENV, None)
    holds = gpu_lock.read_holds(holds_log)
    with contextlib.suppress(OSError):
        os.unlink(holds_log)
    return row, baselines, holds


def _share_machine(jobs: int, *, override: bool = False) -> None:
    """A worker's share of the machine: of the cores (jobs times PyTorch's default of one thread a core
    oversubscribes it, and host-side work — inputs, references, judging — crawls; the verifier's children inherit
    the setting) and of the memory the reference caches may keep. A thread count the user set is kept, unless
    ``override`` (Ray sets one thread a task for its own reasons)."""
    threads = str(max(1, (os.cpu_count() or 1) // max(1, jobs)))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if override:
            os.environ[name] = threads
        else:
            os.environ.setdefault(name, threads)
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from kernelwright.verify import refcache

    refcache.CACHE.sharers = max(1, jobs)


# -- local: a pool of worker processes per GPU ------------------------------------------------------------------
def _worker_init(jobs: int, gpu: str | None, lock: str | None) -> None:
    # Ctrl-C reaches the workers too (one process group): they end their problem (optimize writes what it has) and
    # return; the parent collects the rows.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from kernelwright.hardware import gpu_lock

    if gpu is not None:  # before anything touches CUDA; the verifier's children inherit it
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    if lock is not None:
        os.environ[gpu_lock.ENV] = lock
    else:
        os.environ.pop(gpu_lock.ENV, None)
    _share_machine(jobs)


def _run_recorded(run_task: RunTask, task: Any, record_dir: str, token: int) -> tuple[Any, ...]:
    """run_task in a pool worker, which first notes which task it runs: if it dies, the parent knows whose row it
    is (a dead worker breaks its whole pool, and every task then in flight there fails alike)."""
    with contextlib.suppress(OSError):
        (Path(record_dir) / str(os.getpid())).write_text(str(token))
    return _with_task_env(run_task, task, str(Path(record_dir) / f"{token}.holds"))


def _dead_worker_causes(processes: Mapping[int, Any], record_dir: str) -> dict[int, str]:
    """{task token: how its worker died} for the workers of a broken pool that died on their own. The pool ends
    the others with SIGTERM when it breaks; those (and a worker whose task is unknown) are not named."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    causes: dict[int, str] = {}
    for pid, process in processes.items():
        with contextlib.suppress(Exception):
            process.join(timeout=5)
        code = getattr(process, "exitcode", None)
        if code is None or code == -signal.SIGTERM:
            continue
        try:
            token = int((Path(record_dir) / str(pid)).read_text())
        except (OSError, ValueError):
            continue
        if code == -signal.SIGKILL:
            causes[token] = (f"was killed (SIGKILL) — on Linux most often the out-of-memory killer (this machine has "
                             f"{physical / (1 << 30):.0f} GB): give fewer --jobs or shrink the problem "
                             "(--size NAME=VALUE)")
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            causes[token] = f"was killed by {name}"
        else:
            causes[token] = f"exited with status {code}"
    return causes


@dataclass
class _Lane:
    """The workers of one GPU (or of the CPU): a pool, how many problems it runs at once, what runs in it."""

    gpu: str | None
    lock: str | None
    capacity: int
    jobs: int  # all lanes' workers together: the machine's cores and memory are shared by all of them
    pool: ProcessPoolExecutor | None = None
    running: dict[Future, tuple[int, Any]] = field(default_factory=dict)

    def start(self) -> None:
        self.pool = ProcessPoolExecutor(max_workers=self.capacity, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_worker_init, initargs=(self.jobs, self.gpu, self.lock))

    def stop(self, wait: bool = True) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=wait, cancel_futures=True)


def lanes(settings: Any, lock_dir: str) -> list[_Lane]:
    """One lane per GPU the bench may use (at most --jobs of them), the jobs dealt out between them; on the CPU
    (nothing timed, no lock) one lane."""
    jobs = max(1, settings.jobs)
    if settings.device != "cuda":
        return [_Lane(None, None, jobs, jobs)]
    gpus = list(settings.gpus)[:jobs]
    if not gpus:  # no GPU named: CUDA_VISIBLE_DEVICES as the bench found it
        return [_Lane(None, str(Path(lock_dir) / "gpu.lock"), jobs, jobs)]
    return [_Lane(g, str(Path(lock_dir) / f"gpu{g}.lock"), jobs // len(gpus) + (i < jobs % len(gpus)), jobs)
            for i, g in enumerate(gpus)]


def run_local(pending: Sequence[Any], settings: Any, side: Side) -> Holds:
    """The problems side by side in worker processes, a pool per GPU; each problem goes to the least busy lane.
    A worker that dies breaks its lane's pool: its problem gets a ``crashed`` row saying how it died, the problems
    that were running beside it in that lane run again once in a fresh pool, and the bench goes on."""
    from concurrent.futures.process import BrokenProcessPool

    lock_dir = tempfile.mkdtemp(prefix="kernelwright-bench-")
    queue: list[tuple[int, Any]] = list(enumerate(pending))
    rerun: set[int] = set()  # tasks already run again after a pool broke under them
    holds = side.holds
    all_lanes = lanes(settings, lock_dir)
    for lane in all_lanes:
        lane.start()
    idle_breaks = 0  # pools that broke with nothing running in them
    seen: dict[int, dict[int, Any]] = {}  # each lane's workers since its pool started: pid -> process

    def running() -> list[tuple[int, Any]]:
        return [item for lane in all_lanes for item in lane.running.values()]

    def settle(lane: _Lane, workers: Mapping[int, Any]) -> None:
        """A lane's pool broke: name the dead worker's problem, queue the others once more, a fresh pool."""
        causes = _dead_worker_causes(workers, lock_dir)
        casualties = sorted(lane.running.values(), key=lambda item: item[0])
        lane.running.clear()
        lane.stop()
        for token, task in reversed(casualties):
            if token in causes:
                side.crashed(task, f"the bench worker running this problem {causes[token]}")
            elif token in rerun:  # twice under a broken pool: a row, not a third try
                side.crashed(task, "the bench worker pool broke while this problem ran (a worker died: out of "
                                   "memory or a crash in native code); give fewer --jobs")
            else:
                rerun.add(token)
                queue.insert(0, (token, task))  # it ran beside the one that died: once more
        lane.start()

    try:
        while queue or running():
            broken: set[int] = set()  # lanes found broken at submit
            while queue and side.open():
                free = [i for i, lane in enumerate(all_lanes) if len(lane.running) < lane.capacity and i not in broken]
                if not free:
                    break
                index = min(free, key=lambda i: len(all_lanes[i].running) / all_lanes[i].capacity)
                lane = all_lanes[index]
                token, task = queue[0]
                try:
                    assert lane.pool is not None
                    future = lane.pool.submit(_run_recorded, side.run_task, side.clamp(task), lock_dir, token)
                except BrokenProcessPool:  # a worker died since the last wait: its future says whose it was
                    broken.add(index)
                    continue
                queue.pop(0)
                lane.running[future] = (token, task)
                # The pool's workers as they are now: one that dies before the wait below may be gone from the
                # pool's own table by then (a broken pool clears it), and its problem would go unnamed.
                seen.setdefault(id(lane), {}).update(getattr(lane.pool, "_processes", None) or {})
            for index in broken:
                lane = all_lanes[index]
                if not lane.running and idle_breaks < 3:  # an idle worker died: nobody's row, a fresh pool
                    idle_breaks += 1
                    lane.stop()
                    lane.start()
                    seen.pop(id(lane), None)
            if not running():
                if broken and idle_breaks < 3:
                    continue
                break
            side.progress.running = [t.problem.name for _, t in running()]
            side.progress.show()
            for lane in all_lanes:
                seen.setdefault(id(lane), {}).update(getattr(lane.pool, "_processes", None) or {})
            futures = {f: lane for lane in all_lanes for f in lane.running}
            finished, _ = wait(list(futures), return_when=FIRST_COMPLETED)
            broken_lanes: list[_Lane] = []
            for future in finished:
                lane = futures[future]
                token, task = lane.running.pop(future)
                try:
                    row, baselines, task_holds = future.result()
                except BrokenProcessPool:
                    lane.running[future] = (token, task)  # settled below with the others in flight there
                    if lane not in broken_lanes:
                        broken_lanes.append(lane)
                    continue
                except Exception as exc:  # noqa: BLE001 - the worker could not send its row back
                    side.crashed(task, f"the bench worker failed: {exc!r}")
                    continue
                holds.append(task_holds)
                side.finish(task, _placed(row, lane.gpu, settings), baselines)
            for lane in broken_lanes:
                settle(lane, seen.pop(id(lane), {}))  # a fresh pool: its workers are new
            side.progress.running = [t.problem.name for _, t in running()]
            side.progress.show()
    except KeyboardInterrupt:
        # The workers got the Ctrl-C too: each ends its problem and returns what it has.
        for lane in all_lanes:
            for future, (_, task) in list(lane.running.items()):
                with contextlib.suppress(Exception):
                    row, baselines, task_holds = future.result(timeout=60)  # inside gpu_bench.sh's kill-after
                    holds.append(task_holds)
                    side.finish(task, _placed(row, lane.gpu, settings), baselines)
            lane.stop(wait=False)
        raise
    finally:
        for lane in all_lanes:
            lane.stop()
    from kernelwright.hardware import gpu_lock

    return gpu_lock.merge_summaries(*holds)


def _placed(row: dict[str, Any], gpu: str | None, settings: Any) -> dict[str, Any]:
    """The row with the GPU it ran on, where the bench had more than one."""
    if gpu is None or settings.device != "cuda" or len(settings.gpus) < 2:
        return row
    return {**row, "gpu": gpu}


# -- ray: tasks over a Ray cluster ------------------------------------------------------------------------------
def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(f"--executor ray needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


def connect_ray(address: str | None) -> Any:
    """Ray, connected: to one already connected in this process, to the cluster at ``address`` ("auto": the one
    started on this machine with `ray start --head`), or to a new single-machine cluster (every core and GPU here)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    try:
        ray.init(address=address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    except ConnectionError as exc:
        raise InputError(f"--ray-address {address}: no Ray cluster answered there ({exc}); start one with "
                         "`ray start --head` or leave --ray-address out for a cluster of this machine") from None
    return ray


@contextlib.contextmanager
def session(name: str, address: str | None = None) -> Iterator[None]:
    """The executor ``name`` for a whole bench: with Ray, one connection (a cluster started for it ends with it;
    one this process was already connected to is left as it was)."""
    if name != "ray":
        yield
        return
    ray = _ray()
    connected_before = ray.is_initialized()
    connect_ray(address)
    try:
        yield
    finally:
        if not connected_before:
            ray.shutdown()


def ray_gpus(ray: Any) -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def _ray_task(run_task: RunTask, task: Any, bench_id: str, jobs: int, timed: bool) -> tuple[Any, ...]:
    """One problem in a Ray worker: the GPU Ray gave it (CUDA_VISIBLE_DEVICES is Ray's), that GPU's lock on this
    node (shared with every task of this bench placed on it), a share of the machine."""
    import ray

    from kernelwright.hardware import gpu_lock

    gpu_ids = [str(i) for i in ray.get_gpu_ids()] if timed else []
    if gpu_ids:
        where = Path(tempfile.gettempdir()) / f"kernelwright-bench-{bench_id}"
        where.mkdir(exist_ok=True)
        os.environ[gpu_lock.ENV] = str(where / f"gpu{gpu_ids[0]}.lock")
    else:
        os.environ.pop(gpu_lock.ENV, None)
    _share_machine(jobs, override=True)
    holds_log = str(Path(tempfile.gettempdir()) / f"kernelwright-holds-{uuid.uuid4().hex}.jsonl")
    row, baselines, holds = _with_task_env(run_task, task, holds_log)
    if gpu_ids:
        node = ray.get_runtime_context().get_node_id()[:8]
        row = {**row, "gpu": gpu_ids[0], "node": node}
    return row, baselines, holds


def ray_options(settings: Any, gpus: int, jobs: int) -> dict[str, Any]:
    """A task's resources: on a GPU bench, a share of one GPU (a whole one while there are as many GPUs as jobs,
    else jobs split evenly over them), one CPU; no retries — a problem whose worker died is a row, not a rerun."""
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
    if settings.device == "cuda":
        options["num_gpus"] = 1 if jobs <= gpus else round(gpus / jobs, 4)
    return options


def run_ray(pending: Sequence[Any], settings: Any, side: Side) -> Holds:
    """The problems as Ray tasks, --jobs of them in flight (default: one per GPU of the cluster)."""
    ray = connect_ray(settings.ray_address)
    from ray import exceptions as rx

    from kernelwright.hardware import gpu_lock

    gpus = ray_gpus(ray)
    if settings.device == "cuda" and gpus == 0:
        raise InputError("--executor ray --device cuda: the Ray cluster has no GPU resource (its nodes were "
                         "started without GPUs); start them on GPU machines or bench with --device cpu")
    jobs = settings.jobs or max(1, gpus)
    remote = ray.remote(_ray_task).options(**ray_options(settings, gpus, jobs))
    bench_id = uuid.uuid4().hex[:12]
    queue = list(pending)
    running: dict[Any, Any] = {}
    holds = side.holds
    try:
        while queue or running:
            while queue and len(running) < jobs and side.open():
                task = queue.pop(0)
                ref = remote.remote(side.run_task, side.clamp(task), bench_id, jobs, settings.device == "cuda")
                running[ref] = task
            if not running:
                break
            side.progress.running = [t.problem.name for t in running.values()]
            side.progress.show()
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                task = running.pop(ref)
                try:
                    row, baselines, task_holds = ray.get(ref)
                except rx.OutOfMemoryError:
                    side.crashed(task, "the Ray worker running this problem was killed by Ray's memory monitor "
                                       "(its node ran low on memory): give fewer --jobs or shrink the problem "
                                       "(--size NAME=VALUE)")
                    continue
                except (rx.WorkerCrashedError, rx.NodeDiedError, rx.LocalRayletDiedError) as exc:
                    side.crashed(task, "the Ray worker running this problem died (out of memory or a crash in "
                                       f"native code: {type(exc).__name__}); give fewer --jobs")
                    continue
                except rx.RayTaskError as exc:
                    side.crashed(task, f"the bench task failed: {exc.cause!r}")
                    continue
                holds.append(task_holds)
                side.finish(task, row, baselines)
    except KeyboardInterrupt:
        for ref in running:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        for ref, task in running.items():
            with contextlib.suppress(Exception):
                row, baselines, task_holds = ray.get(ref, timeout=60)
                holds.append(task_holds)
                side.finish(task, row, baselines)
        raise
    return gpu_lock.merge_summaries(*holds)


def run(pending: Sequence[Any], settings: Any, side: Side) -> Holds:
    """The problems side by side with the bench's executor; returns the GPU locks' long holds, summed (also in
    ``side.holds`` as each task finishes, for a run cut by Ctrl-C)."""
    if settings.executor == "ray":
        return run_ray(pending, settings, side)
    return run_local(pending, settings, side)


def remote_machine(settings: Any, machine: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``machine()`` as a Ray task with the bench's resources sees it: the device and toolchain the rows belong to
    are the workers', not the driver's (which may have no GPU)."""
    ray = connect_ray(settings.ray_address)
    options = {**ray_options(settings, ray_gpus(ray), 1), "num_gpus": 1 if settings.device == "cuda" else 0}
    return ray.get(ray.remote(machine).options(**options).remote())
