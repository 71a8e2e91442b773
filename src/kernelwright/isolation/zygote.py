"""The warm parent under every job (issue 42): a process that has imported torch, Triton and the job modules once,
and forks each job from there instead of starting a fresh interpreter (about 4 s of imports on the CPU machine).

One zygote serves one interpreter setting: the job environment without its per-job paths (a CPU job's Triton
interpreter and hidden GPU make another zygote than a GPU job's). It holds no candidate or problem code, no
secret (it starts with the scrubbed environment), never opens CUDA (each job opens its own context) and is not
dumpable, so no job of the same user can trace it or read its memory. It holds every job's modules, so a job's
process holds more of kernelwright than its own (verify/child) needs: nothing a job could not import itself, and
nothing whose result the parent takes on trust. It is single-threaded: every fork copies one
thread and no lock some other thread held.

For each job the parent sends, over a ``SOCK_SEQPACKET`` socket, the job's command line (``kernelwright.jobs``'s
arguments), its environment, working directory and box plan, with the descriptors it needs (its report pipe, the
box's control pipe, stdin, stdout, stderr). The zygote forks; the fork does what ``subprocess`` and the box script
do for a fresh process: its own process group, then the box of :mod:`kernelwright.isolation.box` (namespaces, mounts,
limits, no privileges) with the job's first process running :func:`kernelwright.isolation.child.main` in place of
an ``exec``. A job is forked from the zygote, never from an earlier job, so nothing one job did (a global it set, a
descriptor it opened) is seen by the next. The zygote reaps each job's keeper and tells the parent its exit on a
second pipe; :class:`Forked` gives the parent the part of ``subprocess.Popen`` the job runner uses.

A zygote that dies (killed, or ended by a fault) is replaced by the next job's request; one that cannot start
leaves the job to a fresh interpreter (``job_zygote = false`` in the configuration does that always).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

log = logging.getLogger(__name__)

# Per-job variables, read where they are used (not at import): jobs that differ only in these share a zygote.
# PYTEST_CURRENT_TEST is pytest's name of the running test: with it in the key every test warmed its own zygote.
PER_JOB = frozenset({"TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR", "KERNELWRIGHT_CACHE_DIR",
                     "PYTEST_CURRENT_TEST"})
_MAX_ZYGOTES = 4  # interpreter settings kept warm at once (a CPU and a GPU one in practice); the oldest goes
_READY_TIMEOUT_S = 180.0  # imports on a loaded machine
_MAX_MESSAGE = 1 << 20
_FDS = ("channel", "control", "stdin", "stdout", "stderr")


class ZygoteUnavailable(RuntimeError):
    """No zygote could take the job (it could not start, or died while asked): the job starts afresh."""


# -- the zygote's side --------------------------------------------------------------------------------------------
# What the jobs import lazily, measured (the modules a CPU verify's reference and candidate jobs held at their end,
# against the zygote's): torch._dynamo alone is 3-4 s of every job that sizes a problem or runs a module.
_WARM = ("numpy", "torch", "torch._dynamo", "torch.utils.flop_counter", "torch.profiler", "torch.utils.cpp_extension",
         "triton", "triton.language", "triton.compiler", "kernelwright.jobs", "kernelwright.config",
         "kernelwright.problem.sizes", "kernelwright.problem.files", "kernelwright.inspect.triton_compile",
         "kernelwright.inspect.cuda_compile", "kernelwright.verify.compare", "kernelwright.verify.sparse",
         "kernelwright.verify.inputs",
         "kernelwright.hardware.gpu_lock", "kernelwright.runtime.interpreter")


@contextlib.contextmanager
def _without_cuda_init() -> Iterator[None]:
    # torch.cuda.is_available() asked during an import would initialise the driver (cuInit), which a fork cannot
    # carry; NVML answers the same question without it.
    before = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = before
    import torch

    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised while warming up: a forked job could not use it")


def _import(name: str, took: dict[str, float]) -> None:
    import importlib

    started = time.perf_counter()
    with contextlib.suppress(Exception):  # a module that fails to import fails its job the same way
        importlib.import_module(name)
    took[name] = round(time.perf_counter() - started, 2)


def _warm_up(took: dict[str, float]) -> None:
    """What every job needs, imported once: torch, Triton, NumPy, the job registry, every job's module and what
    they import on the way (:data:`_WARM`); never CUDA itself, nor any torch computation (whose thread pools a
    fork would not copy). ``took``: seconds per module, in the order imported."""
    with _without_cuda_init():
        for name in _WARM:
            _import(name, took)
        from kernelwright.isolation import child
        from kernelwright.isolation.protocol import jobs

        started = time.perf_counter()
        for job in jobs():
            with contextlib.suppress(Exception):
                child._resolve(job)
        took["the jobs' modules"] = round(time.perf_counter() - started, 2)


def _warm_later(name: str, took: dict[str, float]) -> None:
    with _without_cuda_init():
        _import(name, took)


def _own_fds() -> set[int]:
    with contextlib.suppress(OSError):
        return {int(fd) for fd in os.listdir("/proc/self/fd")}
    return set()


def _close_other_fds(keep: set[int]) -> None:
    for fd in _own_fds() - keep:
        with contextlib.suppress(OSError):
            os.close(fd)


def _run_job(request: dict[str, Any], fds: dict[str, int], library_fds: set[int], start_dir: str) -> NoReturn:
    """The fork's whole life: a process group of its own (in the zygote's session, which has no terminal), the
    box, and in the box the job (never returns)."""
    try:
        with contextlib.suppress(OSError):  # a group of its own (the zygote makes it too: no race with a kill)
            os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        # Only what the job was given, and what the imports opened themselves, stays open.
        _close_other_fds(library_fds | set(fds.values()))
        from kernelwright.isolation import box

        plan = {**request["plan"], "control_fd": fds["control"]}

        def start() -> NoReturn:
            os.dup2(fds["stdin"], 0)
            os.dup2(fds["stdout"], 1)
            os.dup2(fds["stderr"], 2)
            for name in ("stdin", "stdout", "stderr"):
                if fds[name] > 2:
                    os.close(fds[name])
            os.chdir(request["cwd"])
            if sys.path and sys.path[0] == start_dir:  # as `python -m` gives a fresh job: its own folder first
                sys.path[0] = request["cwd"]
            os.environ.clear()
            os.environ.update(request["env"])
            from kernelwright.isolation import child

            argv = [str(fds["channel"]) if a == "{channel}" else a for a in request["argv"]]
            sys.argv = [child.ENTRY_MODULE, *argv]
            _name_process(f"kw:{next((a for a in argv if not a.startswith('-')), 'job')}")
            os._exit(child.main(argv) or 0)

        box.keep(plan, [], start=start)
    except BaseException as exc:  # noqa: BLE001 - nothing may return into the zygote's loop
        with contextlib.suppress(Exception):
            os.write(fds.get("stderr", 2), f"kernelwright zygote: could not start the job: {exc}\n".encode())
    os._exit(127)


def _name_process(name: str) -> None:
    """What ``ps -o comm`` and ``top`` show for the job (its command line stays the zygote's): ``kw:candidate``."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # PR_SET_NAME


def _slowest(took: dict[str, float], n: int = 4) -> str:
    top = sorted(took.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{name} {seconds:.2f}" for name, seconds in top)


def _reap(running: dict[int, int], events: int) -> None:
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        job_id = running.pop(pid, None)
        if job_id is not None:
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            os.write(events, f"exit {job_id} {code}\n".encode())


def serve(request_fd: int, events_fd: int) -> NoReturn:
    """The zygote's loop: warm up, say ready, then fork a job for every request until the parent goes."""
    parent = os.getppid()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no job traces us or reads our memory
    sock = socket.socket(fileno=request_fd)
    start_dir = os.getcwd()  # an empty folder of our own (`python -m` puts it first on sys.path)
    took: dict[str, float] = {}
    try:
        _warm_up(took)
    except BaseException as exc:  # noqa: BLE001
        os.write(events_fd, f"failed {type(exc).__name__}: {exc}\n".replace("\n", " ").encode() + b"\n")
        os._exit(1)
    # Imported once the zygote serves, while no job is asked for: what only some jobs need, as their specs name it
    # (`warm`: Inductor for the torch.compile baselines, some 4 s). On the H100 (run 66) the zygote's imports took
    # 9.7-10.4 s with Inductor among them, and a CLI verify's reference job, the first asked for, waited for all of
    # it (its own work: 0.7 s). A job forked before these are in imports them itself.
    from kernelwright.isolation.child import gpu_setting
    from kernelwright.isolation.protocol import jobs

    later = sorted({name for spec in jobs().values() for name in spec.warm}) if gpu_setting() else []
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    library_fds = _own_fds() - {request_fd, events_fd, wake_r, wake_w}
    running: dict[int, int] = {}
    os.write(events_fd, f"ready {os.getpid()} {_slowest(took)}\n".encode())
    while True:
        # Nothing asked for: the next later import; else wait for a request (and look at the parent now and then).
        ready, _, _ = select.select([sock, wake_r], [], [], 0.0 if later else 0.5)
        if later and not ready:
            name = later.pop(0)
            with contextlib.suppress(BaseException):
                _warm_later(name, took)
            os.write(events_fd, f"warmed {name} {took.get(name, 0.0):.2f}\n".encode())
            library_fds = _own_fds() - {request_fd, events_fd, wake_r, wake_w}
            continue
        if os.getppid() != parent:
            os._exit(0)  # the parent is gone; its jobs' keepers see us go and end their boxes
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(wake_r, 4096)
        _reap(running, events_fd)
        if sock not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, len(_FDS))
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the parent closed its end
        try:
            request = json.loads(data)
            named = dict(zip(_FDS, fds, strict=True))
        except (ValueError, TypeError) as exc:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": f"bad request: {exc}"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            sock.close()
            for fd in (events_fd, wake_r, wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            _run_job(request, named, library_fds, start_dir)
        with contextlib.suppress(OSError):  # the job's keeper leads its group before the parent hears its pid
            os.setpgid(pid, pid)
        for fd in fds:
            os.close(fd)
        running[pid] = int(request["id"])
        sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())


# -- the parent's side --------------------------------------------------------------------------------------------
class Forked:
    """A job forked by a zygote, seen as much like ``subprocess.Popen`` as the job runner needs: ``pid`` (its keeper,
    leader of its own process group), ``wait``, ``poll``, ``returncode``, ``stdin`` (a pipe, or None)."""

    def __init__(self, zygote: Zygote, job_id: int, pid: int, stdin: IO[bytes] | None) -> None:
        self._zygote, self._id, self.pid, self.stdin = zygote, job_id, pid, stdin
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote._exit_of(self._id, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._zygote._exit_of(self._id, timeout=timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired("zygote job", timeout or 0)
        return self.returncode


class Zygote:
    """One warm parent and the parent's ends of its socket and event pipe."""

    COMMAND: tuple[str, ...] = (sys.executable, "-m", __name__)  # then the socket's and the event pipe's numbers

    def __init__(self, env: Mapping[str, str]) -> None:
        parent_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        events_r, events_w = os.pipe()
        self._home = tempfile.mkdtemp(prefix="kernelwright-zygote-")  # its cwd: nothing there to import
        log_fd, self._log_path = tempfile.mkstemp(prefix="kernelwright-zygote-", suffix=".log")
        try:
            self.proc = subprocess.Popen(
                [*self.COMMAND, str(zygote_end.fileno()), str(events_w)],
                env=dict(env), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                pass_fds=(zygote_end.fileno(), events_w), start_new_session=True, cwd=self._home)
        finally:
            zygote_end.close()
            os.close(events_w)
            os.close(log_fd)
        self._sock = parent_end
        self._events = os.fdopen(events_r, "rb", buffering=0)
        self._lock = threading.Lock()  # one request at a time on the socket
        self._exits: dict[int, int] = {}
        self._gone = False
        self._changed = threading.Condition()
        self._next_id = 0
        self._ready = threading.Event()
        self.error = ""
        self.started = time.monotonic()
        self.ready_s: float | None = None
        self.warmed: dict[str, float] = {}  # a module imported once it served -> when that import ended (s from start)
        threading.Thread(target=self._read_events, name="kernelwright-zygote-events", daemon=True).start()

    def _read_events(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._events.read(1 << 16)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                words = line.decode("utf-8", "replace").split(" ", 2)
                if words[0] == "ready":
                    self.ready_s = time.monotonic() - self.started
                    slowest = words[2] if len(words) == 3 else ""
                    log.info("the zygote (pid %s) serves: its imports took %.2f s%s", self.proc.pid, self.ready_s,
                             f" (slowest: {slowest})" if slowest else "")
                    self._ready.set()
                elif words[0] == "warmed" and len(words) == 3:
                    self.warmed[words[1]] = time.monotonic() - self.started
                    log.info("the zygote (pid %s) imported %s while idle (%s s)", self.proc.pid, words[1], words[2])
                elif words[0] == "failed":
                    self.error = line.decode("utf-8", "replace")
                elif words[0] == "exit" and len(words) == 3:
                    with self._changed:
                        self._exits[int(words[1])] = int(words[2])
                        self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()
        self._ready.set()

    def wait_ready(self, timeout_s: float = _READY_TIMEOUT_S) -> bool:
        """Wait until it serves (True), or has died or not warmed up within ``timeout_s`` (False)."""
        return self._ready.wait(timeout_s) and self.ready

    @property
    def ready(self) -> bool:
        """Warm and serving (a job forks at once)."""
        return self.ready_s is not None and self.alive

    @property
    def alive(self) -> bool:
        return not self._gone and self.proc.poll() is None

    def _exit_of(self, job_id: int, timeout: float | None) -> int | None:
        """The job's exit status once its keeper is reaped (None: not within ``timeout``). A zygote that died
        with the job still running leaves it to its box (its keeper ends with the zygote): -SIGKILL."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while job_id not in self._exits:
                if self._gone:
                    return -signal.SIGKILL
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._changed.wait(left)
            return self._exits.pop(job_id)

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, plan: Mapping[str, Any],
              channel_fd: int, control_fd: int, stdout: int, stderr: int, stdin_pipe: bool = False) -> Forked:
        """Fork one job (``argv``: ``kernelwright.jobs``'s arguments, ``"{channel}"`` where the report pipe's number
        goes). Its stdin is /dev/null, or with ``stdin_pipe`` a pipe the parent writes (``Forked.stdin``)."""
        if not self._ready.wait(_READY_TIMEOUT_S) or not self.alive:
            raise ZygoteUnavailable(self.error or "the zygote did not start")
        if stdin_pipe:
            stdin, writer = os.pipe()
            stdin_writer: IO[bytes] | None = os.fdopen(writer, "wb")
        else:
            stdin, stdin_writer = os.open(os.devnull, os.O_RDONLY), None
        try:
            with self._lock:
                self._next_id += 1
                job_id = self._next_id
                message = json.dumps({"id": job_id, "argv": list(argv), "env": dict(env), "cwd": str(cwd),
                                      "plan": dict(plan)}).encode()
                socket.send_fds(self._sock, [message], [channel_fd, control_fd, stdin, stdout, stderr])
                reply = json.loads(self._sock.recv(_MAX_MESSAGE) or b"{}")
            if "pid" not in reply:
                raise ZygoteUnavailable(str(reply.get("error") or "the zygote did not answer"))
        except (OSError, ValueError, ZygoteUnavailable) as exc:
            if stdin_writer is not None:
                stdin_writer.close()
            if isinstance(exc, ZygoteUnavailable):
                raise
            raise ZygoteUnavailable(f"the zygote could not take the job: {exc}") from exc
        finally:
            os.close(stdin)  # the job holds its own copy now
        return Forked(self, job_id, int(reply["pid"]), stdin_writer)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.unlink(self._log_path)
        with contextlib.suppress(OSError):
            os.rmdir(self._home)


_ZYGOTES: dict[tuple[str, ...], Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()
_FAILED: dict[tuple[str, ...], str] = {}  # settings whose zygote could not warm up, and why


def zygote_key(env: Mapping[str, str]) -> tuple[str, ...]:
    """The interpreter setting a job's environment asks for: everything but the per-job paths."""
    return (sys.executable, *sorted(f"{k}={v}" for k, v in env.items() if k not in PER_JOB))


def zygote_for(env: Mapping[str, str]) -> Zygote:
    """The warm zygote for jobs with environment ``env``, started (or replaced, if it died) here."""
    key = zygote_key(env)
    with _ZYGOTES_LOCK:
        if key in _FAILED:
            raise ZygoteUnavailable(_FAILED[key])
        found = _ZYGOTES.get(key)
        if found is not None and not found.alive:
            del _ZYGOTES[key]
            found.close()
            if found.ready_s is None:  # it never warmed up: this setting's jobs start afresh from now on
                _FAILED[key] = found.error or "the zygote died while warming up"
                log.warning("no zygote for these jobs (%s): each starts a fresh interpreter", _FAILED[key])
                raise ZygoteUnavailable(_FAILED[key])
            log.info("the zygote (pid %s) has died: starting a new one", found.proc.pid)
            found = None
        if found is None:
            while len(_ZYGOTES) >= _MAX_ZYGOTES:
                _ZYGOTES.pop(next(iter(_ZYGOTES))).close()
            found = _ZYGOTES[key] = Zygote({k: v for k, v in env.items()})
        else:  # most recently used last
            _ZYGOTES[key] = _ZYGOTES.pop(key)
        return found


def discard_zygotes() -> int:
    """End every zygote (at exit, and in tests); the number ended."""
    with _ZYGOTES_LOCK:
        found = list(_ZYGOTES.values())
        _ZYGOTES.clear()
        _FAILED.clear()
    for zygote in found:
        zygote.close()
    return len(found)


def _forget_after_fork() -> None:
    """A process forked from the parent (not by a zygote) has no event readers and shares the parent's sockets:
    its jobs get zygotes of their own."""
    global _ZYGOTES_LOCK
    _ZYGOTES_LOCK = threading.Lock()
    _ZYGOTES.clear()
    _FAILED.clear()


atexit.register(discard_zygotes)
os.register_at_fork(after_in_child=_forget_after_fork)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.stderr.write(f"usage: python -m {__name__} SOCKET_FD EVENTS_FD (started by the job runner)\n")
        os._exit(2)
    serve(int(argv[0]), int(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
