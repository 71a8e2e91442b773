"""The child side of every isolated job: ``python -m kernelwright.jobs JOB SPEC.json FD`` (the entry point, which
registers the jobs, then calls :func:`main`), or ``--prestarted JOB SPEC.json FD`` for a process started ahead of
its job: its imports done, it waits for "go" on stdin, which comes once the spec is written
(:func:`kernelwright.isolation.process.prestart_child`).

The job gets its spec as the record its module registered (:func:`~kernelwright.isolation.protocol.spec_class`)
and runs the function that record names (``runs``). The child reports through :class:`Channel` — report records
as JSON lines on the inherited pipe ``FD`` — and writes tensors to files the parent loads with
``weights_only=True``. Any exception in a job becomes a :class:`~kernelwright.isolation.protocol.JobError` with a
``status`` the parent turns into a verdict; the process always ends with
:class:`~kernelwright.isolation.protocol.Done` when it gets that far.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from kernelwright.isolation.protocol import Done, JobError, JobSpec, LockWait, Report, jobs, spec_class, wire

ENTRY_MODULE = "kernelwright.jobs"  # python -m ENTRY_MODULE JOB SPEC.json FD: registers the jobs, then main()


class ChannelBroken(BaseException):  # noqa: N818 - a BaseException: a candidate's `except Exception` can't eat it
    """The report descriptor is no longer the pipe the parent gave (closed, or another file put in its place)."""


class Channel:
    """JSON-lines messages to the parent, one report record each; floats may be NaN/inf.

    The write path is bound when the channel is made, before any candidate code runs (``os.write``, ``os.fstat``
    and ``json.dumps`` as they were then), and before each write the descriptor is checked to still be that pipe:
    a candidate that closes it or puts another file in its place (``dup2``) ends the job without a word, which the
    parent reads as a broken protocol."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._os_write, self._fstat, self._dumps = os.write, os.fstat, json.dumps
        info = os.fstat(fd)
        self._identity = (info.st_dev, info.st_ino)

    def send(self, report: Report) -> None:
        self._write((self._dumps(wire(report), default=_json_default) + "\n").encode("utf-8"))

    def _write(self, data: bytes) -> None:
        try:
            info = self._fstat(self._fd)
        except OSError:
            raise ChannelBroken("the report descriptor was closed") from None
        if (info.st_dev, info.st_ino) != self._identity:
            raise ChannelBroken("another file was put in the report descriptor's place")
        while data:
            written = self._os_write(self._fd, data)
            data = data[written:]


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "to_json"):
        return value.to_json()
    return repr(value)


class JobFailure(Exception):
    """Raised inside a job to end it with a given verdict status and one-line message."""

    def __init__(self, status: str, code: str, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail


def short_traceback(exc: BaseException, *, limit_lines: int = 12) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(text[-limit_lines:])


def _resolve(job: str) -> Callable[[JobSpec, Channel], None]:
    """The function the job's spec names (imported here, in the child)."""
    module_name, _, attr = spec_class(job).runs.partition(":")
    module = __import__(module_name, fromlist=[attr])
    return getattr(module, attr)


def gpu_setting() -> bool:
    """Whether jobs of this environment run on a GPU: not Triton's interpreter, and a GPU not hidden."""
    from kernelwright.runtime.interpreter import interpret_requested

    return not interpret_requested() and os.environ.get("CUDA_VISIBLE_DEVICES", None) != ""


def _warm_up(job: str) -> None:
    """What every job of this kind needs before its spec arrives, done while the parent is busy elsewhere: torch
    (and Triton) imported, the job's own module imported, and where a GPU is visible its CUDA context opened."""
    import torch

    with contextlib.suppress(Exception):
        import triton  # noqa: F401 - the candidate's and the tuner's kernels compile with it
    _resolve(job)
    if gpu_setting():
        import importlib

        for name in spec_class(job).warm:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        with contextlib.suppress(Exception):
            if torch.cuda.is_available():
                torch.empty(1, device="cuda")  # the context: some 0.5-1 s of a job's start


def _await_spec(job: str) -> bool:
    """Warm up, then wait for the parent's word on stdin that the job's spec is written (False: it let us go)."""
    with contextlib.suppress(Exception):  # a warm-up that fails leaves the job to fail the same way, with a report
        _warm_up(job)
    line = sys.stdin.buffer.readline().strip()
    # Nothing more comes on stdin: what the job runs (a candidate) reads no message of the parent's from it.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return line == b"go"


def _end_with_parent(poll_s: float = 0.5) -> None:
    """A job never outlives its orchestrator. A bench worker the out-of-memory killer ends (SIGKILL: no handler runs)
    leaves its children in their own sessions; without this a reference job would go on filling /dev/shm, and a
    candidate would hold the shared GPU lock until the machine's end. When the parent is gone (we are re-parented)
    this process and whatever it started (its process group) are killed."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                if os.getpgrp() == os.getpid():  # our own group (the verifier starts each job in a new session)
                    with contextlib.suppress(OSError):
                        os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="kernelwright-parent-watch", daemon=True).start()


def _last_word(channel: Channel, report: Report) -> None:
    try:
        channel.send(report)
    except ChannelBroken:
        os._exit(3)


def main(argv: list[str]) -> int:
    _end_with_parent()
    if argv and argv[0] == "--prestarted":
        argv = argv[1:]
        if len(argv) == 3 and argv[0] in jobs() and not _await_spec(argv[0]):
            return 0
    if len(argv) != 3 or argv[0] not in jobs():
        print(f"usage: python -m {ENTRY_MODULE} [--prestarted] {{{'|'.join(sorted(jobs()))}}} SPEC.json FD "
              "(--prestarted: warm up, then wait for 'go' on stdin)", file=sys.stderr)
        return 2
    job, spec_path, fd = argv[0], argv[1], int(argv[2])
    channel = Channel(fd)
    with open(spec_path) as fh:
        spec = spec_class(job).from_json(json.load(fh))
    os.unlink(spec_path)  # the candidate must not read where the problem and the reference live
    on_gpu = getattr(spec, "device", None) == "cuda"
    if getattr(spec, "alone", False):
        # The re-run of a job that ran out of memory beside others (a parallel bench): no other job's work on the
        # device (or beside it on the host) while this one runs.
        from kernelwright.hardware import gpu_lock

        gpu_lock.hold_exclusive(label=job)
    elif on_gpu:
        # Jobs of other verifications may share this GPU (a parallel bench): this job's device work runs beside
        # theirs, but never during their measurements, nor theirs during its own (hardware/gpu_lock.py).
        from kernelwright.hardware import gpu_lock

        gpu_lock.hold_shared(label=job)
    from kernelwright.config import config

    profile_dir = config.profile_jobs or ""  # a diagnostic: where each job's time goes
    profiler = None
    if profile_dir:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        _resolve(job)(spec, channel)
    except ChannelBroken:
        os._exit(3)  # nothing can be said: the parent sees the job's messages stop (a broken protocol)
    except JobFailure as failure:
        _last_word(channel, JobError(status=failure.status, code=failure.code, message=failure.message,
                              detail=failure.detail))
    except SystemExit as exc:  # the candidate (or the problem) called sys.exit
        _last_word(channel, JobError(status="runtime_error", code="exit-called",
                              message=f"sys.exit({exc.code!r}) was called during the {job} job",
                              detail=short_traceback(exc)))
    except BaseException as exc:  # noqa: BLE001 - everything becomes data for the parent
        first = str(exc).splitlines()[0] if str(exc) else ""
        _last_word(channel, JobError(status="runtime_error", code="exception",
                              message=f"{type(exc).__name__}: {first}".rstrip(": "), detail=short_traceback(exc)))
    if profiler is not None:
        profiler.disable()
        with contextlib.suppress(OSError):
            profiler.dump_stats(os.path.join(profile_dir, f"{job}-{os.getpid()}.prof"))
    if on_gpu or getattr(spec, "alone", False):
        from kernelwright.hardware import gpu_lock

        if gpu_lock.waited_s() > 0:  # where a shared GPU made this job wait (a diagnostic, not evidence)
            _last_word(channel, LockWait(seconds=round(gpu_lock.waited_s(), 2)))
    _last_word(channel, Done())
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: threads or atexit handlers a candidate left behind must not keep us alive.
    os._exit(0)
