"""The candidate child's integrity monitor — protocol rule 8; integrity #4, #6, #15.

Installed before the candidate is imported, it

- remembers the identity of every timing, synchronisation, comparison and serialisation function the harness relies
  on, and reports any that is replaced (``timer-tampering``);
- remembers the threads and child processes that exist, and reports any the candidate leaves running after a call
  (``background-thread`` / ``background-process``);
- installs an audit hook (which cannot be removed) that reports, from candidate code, frame walking and heap
  scanning (``sys._getframe``, ``gc.get_objects`` …) and any attempt to open the problem file or the reference's
  private directory (``reference-access``).

Findings are sent to the parent the moment they are seen, so code that runs later cannot take them back.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# "module:attribute.path" of everything whose replacement would let a candidate lie about time or results.
WATCHED = (
    "torch.cuda:Event", "torch.cuda:Event.record", "torch.cuda:Event.elapsed_time", "torch.cuda:Event.synchronize",
    "torch.cuda:Event.query", "torch.cuda:synchronize", "torch.cuda:Stream.synchronize",
    "torch.cuda:current_stream", "torch.cuda:default_stream", "torch._C:_cuda_synchronize",
    "time:perf_counter", "time:perf_counter_ns", "time:time", "time:monotonic", "time:sleep",
    "torch:allclose", "torch:equal", "torch:isclose", "torch.testing:assert_close", "torch:save",
    "torch.Tensor:cpu", "torch.Tensor:to", "torch.Tensor:clone", "torch.Tensor:detach", "torch.Tensor:contiguous",
    "torch.Tensor:__eq__", "torch.Tensor:data_ptr", "torch.Tensor:copy_",
    "threading:enumerate", "os:write", "json:dumps", "hashlib:blake2b",
    "kernelwright.verify.child.timing:measure", "kernelwright.verify.child.timing:Clock.capture",
    "kernelwright.verify.tensors:save", "kernelwright.verify.tensors:digest",
    "kernelwright.verify.tensors:_device_digest", "kernelwright.verify.tensors:load",
    "kernelwright.verify.tensors:flatten_outputs", "kernelwright.verify.tensors:describe",
    "kernelwright.verify.tensors:overlaps", "kernelwright.verify.tensors:to_device",
    "kernelwright.isolation.child:Channel.send", "kernelwright.isolation.protocol:wire",
    "kernelwright.isolation.protocol:_encode",
    # what lists the candidate's kernels and fills free memory with poison
    "kernelwright.verify.child.launches:cpu_kernel_records",
    "kernelwright.verify.child.launches:classify_device_kernels",
    "kernelwright.verify.child.launches:profile_cuda_kernels", "kernelwright.verify.child.launches:AtenRecorder",
    "kernelwright.verify.child.launches:LaunchRecorder.own_calls",
    "kernelwright.verify.child.launches:LaunchRecorder.reset_counts",
    "kernelwright.verify.child.poison:poison", "kernelwright.verify.child.poison:fill_uninitialized",
    "kernelwright.verify.runtime:synchronize",
    # the timing summary (the parent recomputes it from the raw samples; a patch is still tampering)
    "statistics:median", "statistics:mean", "statistics:fmean", "statistics:quantiles", "numpy:median",
    "numpy:percentile", "numpy:quantile",
    # the harness's own checks, the channel's write path and the phases a pass depends on
    "kernelwright.verify.child.integrity:IntegrityMonitor.check_identities",
    "kernelwright.verify.child.integrity:IntegrityMonitor.check_background",
    "kernelwright.verify.child.integrity:IntegrityMonitor._audit", "kernelwright.isolation.child:Channel._write",
    "kernelwright.verify.child.candidate:_CandidateJob.run_trial",
    "kernelwright.verify.child.candidate:_CandidateJob.time",
    "kernelwright.verify.child.candidate:_emit_cubins", "kernelwright.jobs.records:Measurement.from_samples",
)  # fmt: skip

# Hooks that see everything the process does, the harness's work included (integrity #32): a candidate installs none.
_HOOK_EVENTS = {"sys.addaudithook", "sys.setprofile", "sys.settrace"}


def _hooks() -> dict[str, Any]:
    """The profile and trace hooks of this thread and of threads to come."""
    return {"sys.getprofile()": sys.getprofile(), "sys.gettrace()": sys.gettrace(),
            "threading profile hook": getattr(threading, "_profile_hook", None),
            "threading trace hook": getattr(threading, "_trace_hook", None)}

_FRAME_EVENTS = {"sys._getframe", "sys._getframemodulename", "gc.get_objects", "gc.get_referrers",
                 "gc.get_referents", "object.__getattr__"}


def _resolve(target: str) -> Any:
    """The object at "module:attr.path" — for class attributes the raw entry of the class's ``__dict__``, so a
    classmethod compares equal to itself across look-ups."""
    module_name, _, path = target.partition(":")
    attributes = path.split(".")
    while True:  # "torch.Tensor:cpu": torch.Tensor is a class, reached from the module torch
        try:
            obj: Any = importlib.import_module(module_name)
            break
        except ModuleNotFoundError:
            module_name, dot, last = module_name.rpartition(".")
            if not dot:
                raise
            attributes.insert(0, last)
    for part in attributes:
        if isinstance(obj, type) and part in vars(obj):
            obj = vars(obj)[part]
        else:
            obj = getattr(obj, part)
    return obj


def _child_pids() -> set[int]:
    pids: set[int] = set()
    task_dir = Path("/proc/self/task")
    if not task_dir.exists():
        return pids
    for task in task_dir.iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


class IntegrityMonitor:
    def __init__(self, report: Callable[..., None], *, candidate_path: str,
                 watch_paths: Iterable[str] = ()) -> None:
        self._report = report  # report(code=..., message=..., details=...)
        self._candidate = os.path.realpath(candidate_path)
        self._watch = [os.path.realpath(p) for p in watch_paths if p]
        self._identities = {name: _resolve(name) for name in WATCHED if self._resolvable(name)}
        self._threads_before = set(threading.enumerate())
        self._children_before = _child_pids()
        self._reported: set[tuple[str, str]] = set()
        self._in_hook = False
        self._files: dict[str, bool] = {}  # code filename -> is the candidate's file
        self._hooks_before = _hooks()
        self.active = True  # the audit hook records reference access only while True (off during timing)
        self.checks_run: list[str] = []  # the checks made since the last reset (each trial's report names them)

    @staticmethod
    def _resolvable(name: str) -> bool:
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            return False
        return True

    def _once(self, code: str, key: str, message: str, **details: Any) -> None:
        if (code, key) in self._reported:
            return
        self._reported.add((code, key))
        self._report(code=code, message=message, details=details)

    # -- replaced functions -------------------------------------------------------------------------------------
    def check_identities(self, when: str) -> list[str]:
        self.checks_run.append("identities")
        hooks = [name for name, hook in _hooks().items() if hook is not self._hooks_before.get(name)]
        if hooks:
            self._once("harness-hook", ",".join(hooks),
                       f"the candidate installed {', '.join(hooks)} ({when}): a hook that sees the harness's own work",
                       hooks=hooks, when=when)
        changed = []
        for name, original in self._identities.items():
            try:
                current = _resolve(name)
            except (ImportError, AttributeError):
                current = None
            if current is not original:
                changed.append(name.replace(":", "."))
        if changed:
            self._once("timer-tampering", ",".join(changed),
                       f"the candidate replaced {', '.join(changed)} ({when}); timing and checks depend on them",
                       replaced=changed, when=when)
        return changed

    # -- threads and processes ----------------------------------------------------------------------------------
    def check_background(self, when: str) -> None:
        self.checks_run.append("background")
        threads = [t for t in threading.enumerate() if t not in self._threads_before and t.is_alive()]
        if threads:
            names = sorted(t.name for t in threads)
            self._once("background-thread", ",".join(names),
                       f"{len(threads)} thread(s) started by the candidate still run after forward returned "
                       f"({', '.join(names)}); results must be complete when forward returns",
                       threads=names, when=when)
        children = [p for p in _child_pids() - self._children_before if _alive(p)]
        if children:
            self._once("background-process", ",".join(map(str, children)),
                       f"{len(children)} process(es) started by the candidate still run after forward returned",
                       pids=children, when=when)

    # -- audit hook ---------------------------------------------------------------------------------------------
    def install_audit_hook(self) -> None:
        sys.addaudithook(self._audit)

    def _hook_event(self, event: str) -> None:
        """An audit hook added after ours, or a profile or trace function set by candidate code."""
        self._in_hook = True
        try:
            adding = event == "sys.addaudithook"
            if adding or self._from_candidate(depth=3):
                self._once("harness-hook", event,
                           f"the candidate called {event}: a hook that sees the harness's own work (its file opens, "
                           "its calls) can end the job or change what it reports", event=event)
        except Exception:  # an audit hook must never break the code it watches
            pass
        finally:
            self._in_hook = False
        if event == "sys.addaudithook":
            raise RuntimeError("kernelwright: audit hooks are not allowed in a candidate's job")

    def _is_candidate_file(self, filename: str) -> bool:
        known = self._files.get(filename)
        if known is None:
            known = self._files[filename] = os.path.realpath(filename) == self._candidate
        return known

    def _from_candidate(self, depth: int = 2) -> bool:
        """The audited call was made by candidate code itself — directly, or through ``inspect`` (whose
        ``currentframe``/``stack`` wrap ``sys._getframe``). Library code called by the candidate that inspects
        its caller (``namedtuple``, ``Enum``, ``typing``) does not count."""
        frame = sys._getframe(depth)  # noqa: SLF001 - skip this method and the hook: the audited call's caller
        # Code compiled from a string (exec/compile/eval: "<string>", any made-up name) is charged to the file that
        # ran it.
        while frame is not None and frame.f_code.co_filename.startswith("<") and not \
                frame.f_code.co_filename.startswith("<frozen"):
            frame = frame.f_back
        if frame is None:
            return False
        if self._is_candidate_file(frame.f_code.co_filename):
            return True
        if frame.f_code.co_filename.endswith(os.sep + "inspect.py") and frame.f_back is not None:
            caller = frame.f_back
            if caller.f_code.co_filename.endswith(os.sep + "inspect.py") and caller.f_back is not None:
                caller = caller.f_back  # inspect.stack() -> inspect.currentframe()/getouterframes
            return self._is_candidate_file(caller.f_code.co_filename)
        return False

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in _HOOK_EVENTS and not self._in_hook:
            self._hook_event(event)  # timed calls too; another audit hook is refused (RuntimeError)
        if self._in_hook or not self.active:
            return
        self._in_hook = True
        try:
            if event in _FRAME_EVENTS and self._from_candidate():
                self._once("reference-access", event,
                           f"the candidate called {event}: walking frames or the heap is how answers are stolen "
                           "from a harness", event=event)
            elif event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)) and self._watch:
                path = os.path.realpath(os.fsdecode(args[0]))
                for watched in self._watch:
                    if path == watched or path.startswith(watched.rstrip("/") + "/"):
                        self._once("reference-access", path,
                                   f"the candidate opened {path}, which belongs to the reference", path=path)
        except Exception:  # an audit hook must never break the code it watches
            pass
        finally:
            self._in_hook = False
