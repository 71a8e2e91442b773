"""Running untrusted (and merely fallible) code in a child process — protocol rule 1.

Every job that runs code kernelwright did not write itself — the verifier's reference, candidate and baselines,
the tuning worker, the problem probe, the export probe — runs as ``python -m kernelwright.jobs JOB
SPEC.json FD`` in a fresh process, under one policy:

- a new session (process group), so a hang is ended by killing the whole group, grandchildren included;
- a scratch working directory and an environment without credentials (``*_API_KEY``, ``*_TOKEN``, ``*SECRET*``…);
- a time limit, and on a machine without a GPU an address-space limit (:func:`memory_limit`; it would break
  CUDA), and one set of variables for every job (:func:`job_environment`: kernelwright's caches, and the Triton
  interpreter with no GPU visible for a CPU job);
- stdout/stderr go to files, of which the last lines become part of the verdict;
- results come back as JSON lines on a dedicated pipe — the report records of :mod:`kernelwright.isolation.protocol`,
  each checked against its record before anyone reads it (:attr:`ChildRun.protocol_errors` says what was not one) —
  and tensors as files that the parent loads with ``torch.load(weights_only=True)`` — never an unpickle of untrusted
  data.

A crash, a hang, ``sys.exit``/``os._exit``, an illegal address or an OOM in the child becomes a :class:`ChildRun`
describing it; nothing the child does raises here.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.isolation import clock, protocol
from kernelwright.isolation.child import ENTRY_MODULE
from kernelwright.isolation.plan import box_plan

R = TypeVar("R", bound=protocol.Report)

log = logging.getLogger(__name__)

# Variable names that look like credentials. Matched case-insensitively against the whole name.
_CREDENTIAL = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|PRIVATE_KEY|_KEY$|^AWS_|AUTH)", re.I)
_MAX_CHANNEL_BYTES = 256 * 1024 * 1024
_TAIL_LINES = 30


_SECRET_NAMES: set[str] = set()  # variables known to hold a secret whatever their name (an LLM key's api_key_env)


def register_secret(name: str) -> None:
    """Keep the variable ``name`` out of every child's environment, even if it does not look like a credential
    (``api_key_env = "MY_LLM"`` in kernelwright.toml): generated code must never see an API key."""
    _SECRET_NAMES.add(name)


def scrubbed_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``os.environ`` without credential-like variables (and registered secrets), plus ``extra``."""
    secrets = {os.environ[n] for n in _SECRET_NAMES if os.environ.get(n)}
    env = {k: v for k, v in os.environ.items()
           if not _CREDENTIAL.search(k) and k not in _SECRET_NAMES and v not in secrets}
    # Make the child able to import this very copy of kernelwright, installed or not.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True, kw_only=True)
class ChildRun:
    """What happened to one child process. ``messages`` are the raw messages (those that parse into the job's
    report records: the rest are ``protocol_errors``); :meth:`reports` and :meth:`report` read them as records."""

    job: str
    returncode: int | None
    timed_out: bool
    wall_s: float
    messages: tuple[dict[str, Any], ...]
    stderr_tail: str
    stdout_tail: str
    protocol_errors: tuple[str, ...] = ()
    leftover_processes: bool = False  # something the child started was still running when it exited
    signal_name: str | None = field(default=None)
    budget_cut: bool = False  # timed out at the caller's deadline, before its own time limit
    box: str = ""  # how the job was closed in (isolation/box.py: namespace, user-namespace, subreaper, none)
    escaped: tuple[str, ...] = ()  # processes of the job still alive when its first process ended (then ended)
    box_notes: tuple[str, ...] = ()  # what the box could not arrange, or that its keeper said nothing
    first_message_s: float | None = None  # from the job's start (or hand-over, if prestarted) to its first message
    forked: bool = False  # forked from a warm zygote (isolation/zygote.py), not a fresh interpreter

    @property
    def finished(self) -> bool:
        """The job reached its end and said so."""
        return any(m.get("event") == "done" for m in self.messages)

    @property
    def lock_wait_s(self) -> float:
        """Seconds the job waited for other processes' measurements on a shared GPU, as the child itself reports
        (a parallel bench's diagnostic: whatever runs in the child can write it)."""
        waited = sum(r.seconds for r in self.reports(protocol.LockWait) if math.isfinite(r.seconds) and r.seconds > 0)
        return min(waited, self.wall_s)

    @cached_property
    def _reports(self) -> tuple[protocol.Report, ...]:
        parsed = []
        for message in self.messages:
            with contextlib.suppress(protocol.ProtocolError):  # run_child has already counted it
                parsed.append(protocol.read(self.job, message))
        return tuple(parsed)

    def reports(self, kind: type[R]) -> list[R]:
        """The job's reports of one kind, in the order they came."""
        return [r for r in self._reports if isinstance(r, kind)]

    def report(self, kind: type[R]) -> R | None:
        """The last report of one kind, or None."""
        found = self.reports(kind)
        return found[-1] if found else None

    def events(self, name: str) -> list[dict[str, Any]]:
        """The raw messages of one kind (prefer :meth:`reports`)."""
        return [m for m in self.messages if m.get("event") == name]

    def describe_exit(self) -> str:
        if self.timed_out:
            return f"did not finish within the time limit ({self.wall_s:.0f} s) and was killed"
        if self.signal_name:
            hint = {
                "SIGSEGV": "a segmentation fault",
                "SIGBUS": "a bus error",
                "SIGABRT": "an abort",
                "SIGILL": "an illegal instruction",
                "SIGFPE": "a floating-point exception",
                "SIGKILL": "killed (SIGKILL) — most often the out-of-memory killer",
            }.get(self.signal_name, self.signal_name)
            return f"died from {hint}"
        if not self.finished:
            whose = {"candidate": "the candidate", "reference": "the problem", "baseline": "the problem"}.get(
                self.job, "the code it ran")
            return f"exited with status {self.returncode} before finishing (sys.exit / os._exit in {whose}?)"
        return f"exited with status {self.returncode}"


def _tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _read_channel(fd: int, sink: list[dict[str, Any]], errors: list[str], arrivals: list[float]) -> None:
    """Read the job's messages into ``sink`` (what is not one into ``errors``); ``arrivals`` gets the clock's
    reading when the first one came (the job's start-up, as the parent sees it)."""
    total = 0
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        buffer = b""
        while True:
            chunk = pipe.read(1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > _MAX_CHANNEL_BYTES:
                errors.append("the child wrote more than 256 MiB of messages; the rest was ignored")
                while pipe.read(1 << 16):
                    pass
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
                    errors.append(f"unparseable message from the child: {line[:120]!r}")
                    continue
                if isinstance(message, dict) and isinstance(message.get("event"), str):
                    if not arrivals:
                        arrivals.append(time.monotonic())
                    sink.append(message)
                else:
                    errors.append(f"malformed message from the child: {line[:120]!r}")
        if buffer.strip():
            errors.append(f"truncated message from the child: {buffer[:120]!r}")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# Process groups of children running now, from any thread: a verify running in a worker thread (the search's
# evaluator) never sees the main thread's KeyboardInterrupt, so whoever stops the process ends them here.
_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()


_STOPPING = threading.Event()  # set when the process is being stopped: no new child starts


def kill_running_children(*, stopping: bool = False) -> int:
    """End every child process group still running (Ctrl-C, SIGTERM, exit); the number ended. With ``stopping``,
    children asked for from now on are refused (a worker thread's verify must not start its next step)."""
    if stopping:
        _STOPPING.set()
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
        _LIVE_GROUPS.clear()
    for pgid in groups:
        _kill_group(pgid)
    return len(groups)


atexit.register(kill_running_children)


_DUMPABLE_LOCK = threading.Lock()
_UNDUMPABLE_USERS = 0
_DUMPABLE_BEFORE = -1


@contextlib.contextmanager
def _not_inspectable() -> Iterator[None]:
    """While untrusted code runs, this process is not dumpable: another process of the same (non-root) user can
    then neither read its ``/proc/PID/environ`` — which still holds every variable the parent started with,
    API keys included, whatever was removed from ``os.environ`` since — nor its memory, nor attach to it. (As
    root this gives no protection; a separate user or container does.)"""
    libc = None
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
    if libc is None:
        yield
        return
    pr_get_dumpable, pr_set_dumpable = 3, 4
    global _UNDUMPABLE_USERS, _DUMPABLE_BEFORE
    with _DUMPABLE_LOCK:  # process-wide: the first child in sets it, the last one out restores it
        if _UNDUMPABLE_USERS == 0:
            _DUMPABLE_BEFORE = libc.prctl(pr_get_dumpable, 0, 0, 0, 0)
            if _DUMPABLE_BEFORE > 0:
                libc.prctl(pr_set_dumpable, 0, 0, 0, 0)
        _UNDUMPABLE_USERS += 1
    try:
        yield
    finally:
        with _DUMPABLE_LOCK:
            _UNDUMPABLE_USERS -= 1
            if _UNDUMPABLE_USERS == 0 and _DUMPABLE_BEFORE > 0:
                libc.prctl(pr_set_dumpable, _DUMPABLE_BEFORE, 0, 0, 0)


def memory_limit(device: str | None) -> int:
    """Bytes of address space a child may take: on the CPU, a candidate that allocates without end gets an
    out-of-memory verdict instead of taking the machine (and the parent) down with it; none where CUDA may run (an
    address-space limit breaks it)."""
    from kernelwright.config import config

    if device != "cpu" or config.child_memory_gb < 0:
        return 0
    if config.child_memory_gb > 0:
        return int(config.child_memory_gb * (1 << 30))
    try:
        return int(0.75 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def job_environment(device: str | None, *, own_cache: Path | None = None) -> dict[str, str]:
    """The variables every job on ``device`` gets (on top of the scrubbed environment): kernelwright's caches, so
    compiled kernels are shared between trusted jobs (``own_cache``: an untrusted job's caches of its own, which
    no other job reads); on the CPU the Triton interpreter, with no GPU visible."""
    from kernelwright.config import config

    cache = own_cache if own_cache is not None else Path(config.cache_dir)
    env = {
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        # Inductor's (the torch.compile baselines', a candidate's own torch.compile): named here, or each job
        # inherits whatever the parent's torch last set in its own environment (it writes the variable when it
        # first asks for the folder), /tmp/torchinductor_<user>, shared by every job — and the zygote's setting
        # changed under it (a second zygote warmed while the reference waited, 2026-12-07).
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "KERNELWRIGHT_CACHE_DIR": str(cache),
    }
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _job_env(device: str | None, env_extra: Mapping[str, str] | None, own_cache: Path | None = None) -> dict[str, str]:
    """A job's whole environment: the scrubbed one, the device's job variables (:func:`job_environment`), then
    ``env_extra``."""
    if device is not None:
        env_extra = {**job_environment(device, own_cache=own_cache), **(env_extra or {})}
    return scrubbed_environment(env_extra)


@dataclass
class _Prestarted:
    """A child process started ahead of its job: Python, torch and the job's module imported (and on a GPU the
    CUDA context opened) while the verifier does something else; it waits for its spec's path on stdin."""

    proc: Any  # subprocess.Popen, or a job forked by a zygote (isolation/zygote.Forked)
    key: tuple[Any, ...]
    read_fd: int
    control_fd: int
    stdout_path: Path
    stderr_path: Path
    started: float


_PRESTARTED: dict[tuple[Any, ...], _Prestarted] = {}


def _child_setup(job: str, workdir: Path, device: str | None, env_extra: Mapping[str, str] | None,
                 memory_limit_bytes: int | None, keep: Sequence[str] = ()
                 ) -> tuple[tuple[Any, ...], dict[str, str], dict[str, Any], Path]:
    """(the key a prestarted child is found by, its environment, its box's plan, its scratch directory)."""
    import kernelwright.jobs  # noqa: F401 - registers every job (a caller may name one it never imported)
    if memory_limit_bytes is None:
        memory_limit_bytes = memory_limit(device)
    untrusted = job in protocol.jobs() and protocol.spec_class(job).untrusted
    own_cache = workdir / f"{job}-cache" if untrusted else None
    env = _job_env(device, env_extra, own_cache)
    scratch = workdir / f"{job}-cwd"
    plan = box_plan(workdir, memory_limit_bytes, untrusted=untrusted, keep=keep)
    key = (job, str(workdir.resolve()), device, tuple(sorted(env.items())), json.dumps(plan, sort_keys=True))
    return key, env, plan, scratch


_BOX_SCRIPT = str(Path(__file__).with_name("box.py"))


def _popen(argv: list[str], *, wrapper: Sequence[str] = (), scratch: Path, env: dict[str, str], write_fd: int,
           plan: dict[str, Any], stdin: Any, stdout_path: Path, stderr_path: Path) -> tuple[Any, int]:
    """Start the job ``python -m kernelwright.jobs ARGV`` (``"{channel}"`` in ``argv``: its report pipe's number) in
    its box (isolation/box.py): forked from the warm zygote of its interpreter setting (isolation/zygote.py), or
    where there is none (``job_zygote = false``, a ``wrapper`` such as compute-sanitizer that must start the
    interpreter itself, a zygote that cannot start) as a fresh process. The process (the box's keeper: a
    ``subprocess.Popen`` or a :class:`~kernelwright.isolation.zygote.Forked`) and the read end of its control
    pipe, on which the keeper alone writes its one report."""
    from kernelwright.config import config

    control_read, control_write = os.pipe()
    try:
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            proc: Any = None
            if not wrapper and config.job_zygote:
                proc = _fork_from_zygote(argv, scratch=scratch, env=env, write_fd=write_fd, plan=plan,
                                         control_write=control_write, stdin=stdin, out=out, err=err)
            if proc is None:
                cmd = [*wrapper, sys.executable, "-m", ENTRY_MODULE, *(str(write_fd) if a == "{channel}" else a
                                                                      for a in argv)]
                boxed = [sys.executable, "-I", "-S", _BOX_SCRIPT, json.dumps({**plan, "control_fd": control_write}),
                         "--", *cmd]
                proc = subprocess.Popen(boxed, cwd=scratch, env=env, stdin=stdin, stdout=out, stderr=err,
                                        pass_fds=(write_fd, control_write), start_new_session=True)
    except BaseException:
        os.close(control_read)
        raise
    finally:
        os.close(write_fd)
        os.close(control_write)
    with _LIVE_LOCK:
        _LIVE_GROUPS.add(proc.pid)
    return proc, control_read


def _fork_from_zygote(argv: list[str], *, scratch: Path, env: dict[str, str], write_fd: int, plan: dict[str, Any],
                      control_write: int, stdin: Any, out: Any, err: Any) -> Any:
    """The job forked by its zygote, or None where no zygote can take it (the job then starts afresh)."""
    from kernelwright.isolation import zygote

    try:
        return zygote.zygote_for(env).spawn(argv, env=env, cwd=scratch, plan=plan, channel_fd=write_fd,
                                            control_fd=control_write, stdout=out.fileno(), stderr=err.fileno(),
                                            stdin_pipe=stdin == subprocess.PIPE)
    except (zygote.ZygoteUnavailable, OSError) as exc:
        log.info("no zygote for this job (%s): starting a fresh interpreter", exc)
        return None


def _box_report(control_fd: int) -> dict[str, Any]:
    """The keeper's report (it wrote it before it exited), or what stands in for a missing one."""
    data = b""
    with contextlib.suppress(OSError):
        os.set_blocking(control_fd, False)
        while True:
            try:
                chunk = os.read(control_fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
    with contextlib.suppress(OSError):
        os.close(control_fd)
    try:
        report = json.loads(data.splitlines()[0]) if data.strip() else None
    except (ValueError, IndexError):
        report = None
    if not isinstance(report, dict):
        return {"box": "", "notes": ["the job's keeper ended without its report (killed?)"]}
    return report


def warm_zygote(device: str | None, env_extra: Mapping[str, str] | None = None, *, wait: bool = False) -> bool:
    """Start the zygote for ``device``'s jobs now (it imports for some 4 s while the caller does its own work), so
    the first job forks at once (``wait``: return once it serves); False where none is used (``job_zygote =
    false``) or none can start."""
    from kernelwright.config import config

    if not config.job_zygote or _STOPPING.is_set():
        return False
    from kernelwright.isolation import zygote

    env = _job_env(device, env_extra)
    try:
        warm = zygote.zygote_for(env)
    except (zygote.ZygoteUnavailable, OSError) as exc:
        log.info("no zygote for %s jobs: %s", device, exc)
        return False
    return warm.wait_ready() if wait else True


def _zygote_ready(env: Mapping[str, str]) -> bool:
    """Whether a prestart would start at once: no zygote is used, or this setting's has finished its imports (one
    still importing would hold the caller for seconds; the job then forks when it comes, a fraction of a second)."""
    from kernelwright.config import config

    if not config.job_zygote:
        return True
    from kernelwright.isolation import zygote

    try:
        return zygote.zygote_for(env).ready
    except (zygote.ZygoteUnavailable, OSError):
        return True  # the prestart starts a fresh interpreter, as without a zygote


def prestart_child(job: str, *, workdir: Path, device: str | None = None,
                   env_extra: Mapping[str, str] | None = None, memory_limit_bytes: int | None = None,
                   keep: Sequence[str] = ()) -> bool:
    """Start the process for a later :func:`run_child` with the same arguments now, so that its imports and CUDA
    context are ready when the spec comes (a torch import takes 5-9 s on the H200 machine). The process runs only
    kernelwright's own code until then; it still serves exactly one job. False if one is already waiting or none
    can start (``run_child`` then starts its own, as without this)."""
    import kernelwright.jobs  # noqa: F401 - registers every job

    if job not in protocol.jobs() or _STOPPING.is_set():
        return False
    workdir.mkdir(parents=True, exist_ok=True)
    key, env, plan, scratch = _child_setup(job, workdir, device, env_extra, memory_limit_bytes, keep)
    if key in _PRESTARTED or not _zygote_ready(env):
        return False
    scratch.mkdir(exist_ok=True)
    stdout_path, stderr_path = workdir / f"{job}-stdout.log", workdir / f"{job}-stderr.log"
    read_fd, write_fd = os.pipe()
    spec_path = workdir / f"{job}-spec.json"  # written by run_child before it says "go"
    argv = ["--prestarted", job, str(spec_path), "{channel}"]
    try:
        proc, control_fd = _popen(argv, scratch=scratch, env=env, write_fd=write_fd, plan=plan,
                                  stdin=subprocess.PIPE, stdout_path=stdout_path, stderr_path=stderr_path)
    except OSError as exc:
        os.close(read_fd)
        log.info("could not prestart the %s child: %s", job, exc)
        return False
    _PRESTARTED[key] = _Prestarted(proc, key, read_fd, control_fd, stdout_path, stderr_path, time.monotonic())
    return True


def _end_prestarted(waiting: _Prestarted) -> None:
    _kill_group(waiting.proc.pid)
    with contextlib.suppress(Exception):
        waiting.proc.wait(timeout=10)
    with contextlib.suppress(OSError, ValueError):
        if waiting.proc.stdin:
            waiting.proc.stdin.close()
    for fd in (waiting.read_fd, waiting.control_fd):
        with contextlib.suppress(OSError):
            os.close(fd)
    with _LIVE_LOCK:
        _LIVE_GROUPS.discard(waiting.proc.pid)


def discard_prestarted(workdir: Path | None = None) -> int:
    """End the prestarted children (of ``workdir``, or all) that no job took; the number ended."""
    root = str(workdir.resolve()) if workdir is not None else None
    keys = [k for k in list(_PRESTARTED) if root is None or k[1] == root]
    for key in keys:
        waiting = _PRESTARTED.pop(key, None)
        if waiting is not None:
            _end_prestarted(waiting)
    return len(keys)


atexit.register(discard_prestarted)


def _take_prestarted(key: tuple[Any, ...]) -> _Prestarted | None:
    """The waiting child for ``key``, handed its spec, or None (none waits, or the one that did has died: a
    fresh process then runs the job, so a prestart can never cost a job)."""
    waiting = _PRESTARTED.pop(key, None)
    if waiting is None:
        return None
    try:
        if waiting.proc.poll() is not None or waiting.proc.stdin is None:
            raise BrokenPipeError("the prestarted child has exited")
        waiting.proc.stdin.write(b"go\n")
        waiting.proc.stdin.close()
    except (OSError, ValueError) as exc:
        log.info("the prestarted %s child could not take its job (%s): starting a fresh one", key[0], exc)
        _end_prestarted(waiting)
        return None
    return waiting


def run_child(
    job: str,
    spec: protocol.JobSpec | Mapping[str, Any],
    *,
    workdir: Path,
    timeout_s: float,
    device: str | None = None,
    env_extra: Mapping[str, str] | None = None,
    memory_limit_bytes: int | None = None,
    wrapper: Sequence[str] = (),
    deadline: Deadline = NO_DEADLINE,
    keep: Sequence[str] = (),
) -> ChildRun:
    """Run ``python -m kernelwright.jobs JOB`` with ``spec`` (the job's record, or its JSON) in a fresh process and
    collect what it reports.

    ``device`` ("cpu" or "cuda") applies the policy's environment and memory limit (:func:`job_environment`,
    :func:`memory_limit`); ``env_extra`` and ``memory_limit_bytes`` override them. ``wrapper``: a command the
    child runs under (compute-sanitizer and its options; the job's pipe passes through it). A process that
    :func:`prestart_child` started with the same arguments takes the job, if one waits (never for a wrapped one);
    the time limit counts from the hand-over. ``deadline`` (the caller's budget) cuts ``timeout_s`` to the time left;
    a child it kills is ``budget_cut``. Every job runs in its box (:func:`~kernelwright.isolation.plan.box_plan`); ``keep``: the files outside
    ``workdir`` an untrusted job must read."""
    by_budget = deadline.limits(timeout_s)
    timeout_s = deadline.cap(timeout_s, at_least_s=1.0)
    if _STOPPING.is_set():
        raise KeyboardInterrupt("kernelwright is stopping: no new child process")
    workdir.mkdir(parents=True, exist_ok=True)
    key, env, plan, scratch = _child_setup(job, workdir, device, env_extra, memory_limit_bytes, keep)
    scratch.mkdir(exist_ok=True)
    spec_path = workdir / f"{job}-spec.json"
    spec_path.write_text(json.dumps(protocol.spec_class(job).from_json(spec).to_json(), indent=1, default=str))

    messages: list[dict[str, Any]] = []
    errors: list[str] = []
    start = time.monotonic()
    with _not_inspectable():
        waiting = _take_prestarted(key) if not wrapper else None
        if waiting is not None:
            proc, read_fd, control_fd = waiting.proc, waiting.read_fd, waiting.control_fd
            stdout_path, stderr_path = waiting.stdout_path, waiting.stderr_path
        else:
            stdout_path, stderr_path = workdir / f"{job}-stdout.log", workdir / f"{job}-stderr.log"
            read_fd, write_fd = os.pipe()
            proc, control_fd = _popen([job, str(spec_path), "{channel}"], wrapper=wrapper, scratch=scratch, env=env, write_fd=write_fd, plan=plan,
                                      stdin=subprocess.DEVNULL, stdout_path=stdout_path, stderr_path=stderr_path)
        arrivals: list[float] = []
        reader = threading.Thread(target=_read_channel, args=(read_fd, messages, errors, arrivals), daemon=True)
        reader.start()
        try:
            timed_out = clock.current().wait(proc, job=job, limit_s=timeout_s, messages=messages)
            if timed_out:
                _kill_group(proc.pid)
                proc.wait()
        except BaseException:
            # Ctrl-C, SIGTERM (the CLI turns it into KeyboardInterrupt) or any error here: the child's group must
            # not outlive the parent (it runs in its own session, so the terminal's signal never reached it).
            _kill_group(proc.pid)
            proc.wait()
            with _LIVE_LOCK:
                _LIVE_GROUPS.discard(proc.pid)
            with contextlib.suppress(OSError):
                os.close(control_fd)
            raise
        wall = time.monotonic() - start
        # Anything the child started and left behind keeps the pipe open and the group alive: end it.
        leftover = _group_alive(proc.pid)
        if leftover:
            _kill_group(proc.pid)
        with _LIVE_LOCK:
            _LIVE_GROUPS.discard(proc.pid)
        reader.join(timeout=10)
        box = _box_report(control_fd)

    messages, malformed = protocol.screen(job, messages)
    escaped = tuple(f"pid {p.get('pid')}: {p.get('cmdline') or '?'}" for p in box.get("leftovers") or ()
                    if isinstance(p, dict))
    box_notes = [str(n) for n in box.get("notes") or ()]
    if box.get("error"):
        box_notes.append(f"the box failed: {box['error']}")
    rc = proc.returncode
    signal_name = None
    if rc is not None and rc < 0 and not timed_out:
        try:
            signal_name = signal.Signals(-rc).name
        except ValueError:
            signal_name = f"signal {-rc}"
    run = ChildRun(
        job=job,
        returncode=rc,
        timed_out=timed_out,
        wall_s=wall,
        messages=tuple(messages),
        stderr_tail=_tail(stderr_path),
        stdout_tail=_tail(stdout_path),
        protocol_errors=tuple(errors + malformed),
        leftover_processes=(leftover or bool(escaped)) and not timed_out,
        signal_name=signal_name,
        budget_cut=timed_out and by_budget,
        box=str(box.get("box") or ""),
        first_message_s=round(arrivals[0] - start, 4) if arrivals else None,
        forked=not isinstance(proc, subprocess.Popen),
        escaped=escaped,
        box_notes=tuple(box_notes),
    )
    log.info("child %s: rc=%s timed_out=%s wall=%.1fs messages=%d forked=%s", job, rc, timed_out, wall,
             len(messages), run.forked)
    return run
