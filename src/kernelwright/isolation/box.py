"""The closed box around one job (integrity #33): every process the job starts ends with it and is reported.

``python -I -S box.py PLAN_JSON -- CMD...`` (standard library only, so it starts in milliseconds; the parent runs it
as a script, :func:`kernelwright.isolation.process.run_child`) becomes the *keeper* of one job:

- **namespace** (where the kernel lets us: as root, or through a user namespace): the keeper unshares a PID and a
  mount namespace and forks the box's *init* (PID 1 inside), which mounts a fresh ``/proc``, makes the plan's
  paths read-only or hidden (a tmpfs over them) with the job's own paths bound back writable, becomes
  undumpable, and forks the job. Inside the box the job cannot name (so cannot signal or trace) any process
  outside it, and ``/proc`` shows only the box. When the job's first process exits, init lists whatever is still
  alive in the box — a helper double-forked into its own session included, since orphans come to init — and
  exits; the kernel then kills every process left in the namespace. A job cannot kill its init (signals from inside
  a namespace reach its init only through handlers it installed: it installs none).
- **subreaper** (no namespace can be made): the keeper marks itself a child subreaper, so orphans of the job's
  processes come to it instead of escaping to PID 1; after the job's first process exits it lists them, kills
  them with their descendants, and reports them. The job shares the keeper's PID namespace here, so it could kill
  the keeper: the parent then gets no box report, which it treats as a broken box.

The job's first process drops every capability (bounding set, ambient, effective, permitted and inheritable) and
sets ``no_new_privs`` before it executes ``CMD``: running as root it still cannot trace, write the memory of, or
remount anything.

The keeper mirrors the job's exit (its code, or the same signal) and writes one JSON line to the plan's
``control_fd``, which no process of the job holds: ``{"box": MODE, "exit": STATUS, "leftovers": [...]}``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import select
import signal
import sys
from collections.abc import Callable
from typing import Any

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 36, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_SYS_CAPSET = 126  # x86_64 and aarch64 differ; looked up at run time (_capset)
_KEEPER_POLL_S = 0.5

NAMESPACE, USER_NAMESPACE, SUBREAPER, NONE = "namespace", "user-namespace", "subreaper", "none"

_libc: Any = None


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    _check(_c().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _prctl(option: int, arg: int = 0) -> int:
    return _c().prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def _unshare(flags: int) -> None:
    _check(_c().unshare(flags), "unshare")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _enter_namespaces() -> str:
    """Unshare a PID and a mount namespace (the next fork is the box's init); the mode made, or SUBREAPER."""
    try:
        _unshare(CLONE_NEWPID | CLONE_NEWNS)
        return NAMESPACE
    except OSError:
        pass
    uid, gid = os.getuid(), os.getgid()
    try:  # an ordinary user: a user namespace of our own grants what the mounts need, inside it only
        _unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS)
        with contextlib.suppress(OSError):
            _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
        return USER_NAMESPACE
    except OSError:
        return SUBREAPER


def _capset_zero() -> None:
    """Clear the effective, permitted and inheritable sets of this process."""
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    number = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine, _SYS_CAPSET)
    _c().syscall(ctypes.c_long(number), header, data)


def drop_privileges() -> None:
    """Every capability gone for good, and no exec can give any back (setuid bits, file capabilities)."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap) == -1 and ctypes.get_errno() == errno.EINVAL:
            break
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _capset_zero()


def _arrange_mounts(plan: dict[str, Any]) -> list[str]:
    """In the box's own mount namespace: nothing propagates out; a fresh /proc; ``readonly`` paths read-only,
    ``hide`` paths replaced by an empty tmpfs, ``keep`` paths (files or folders, often inside those) bound back
    as they were. What could not be arranged, as notes (the box still holds its processes)."""
    notes: list[str] = []
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        notes.append(f"no fresh /proc ({exc.strerror})")
    # Descriptors first: a path inside a hidden folder is reached through its descriptor once the tmpfs is on top.
    held: list[tuple[int, str, bool, bool]] = []  # (descriptor, path, is a folder, read-only)
    for path, readonly in [*((p, True) for p in plan.get("readonly", ())), *((p, False) for p in plan.get("keep", ()))]:
        with contextlib.suppress(OSError):
            held.append((os.open(path, os.O_PATH | os.O_CLOEXEC), path, os.path.isdir(path), readonly))
    inside = [p for p in plan.get("hide", ()) if any(_within(p, h[1]) for h in held)]  # hidden after the binds
    for path in [p for p in plan.get("hide", ()) if p not in inside]:
        _hide(path, notes)
    for fd, path, is_dir, readonly in held:  # read-only ones first, then the writable ones inside them
        try:
            if not os.path.lexists(path):  # inside a hidden folder: make the mount point in the tmpfs
                os.makedirs(path if is_dir else os.path.dirname(path), exist_ok=True)
                if not is_dir:
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            if readonly:
                _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
        except OSError as exc:
            notes.append(f"{path} not {'read-only' if readonly else 'kept'} ({exc.strerror})")
        finally:
            os.close(fd)
    for path in inside:
        _hide(path, notes)
    return notes


def _within(path: str, root: str) -> bool:
    return path != root and path.startswith(root.rstrip("/") + "/")


def _hide(path: str, notes: list[str]) -> None:
    try:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    except OSError as exc:
        notes.append(f"{path} not hidden ({exc.strerror})")


def _children() -> list[int]:
    """This process's children (procfs's own numbering: the box's, once /proc is the box's)."""
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError), open(f"/proc/self/task/{task}/children") as fh:
                pids += [int(p) for p in fh.read().split()]
    return pids


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{here}/task"):
                with contextlib.suppress(OSError, ValueError):
                    with open(f"/proc/{here}/task/{task}/children") as fh:
                        kids = [int(p) for p in fh.read().split()]
                    found += kids
                    todo += kids
    return found


def _describe(pid: int) -> dict[str, Any]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    return {"pid": pid, "cmdline": cmd[:200]}


def _status_of(wait_status: int) -> int:
    """As subprocess reports it: the exit code, or minus the signal."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else 1


def _wait_for(pid: int) -> int:
    """Reap children (orphans come to us) until ``pid`` ends; its status."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if done == pid:
            return _status_of(status)


def _survivors() -> list[dict[str, Any]]:
    """Every process still alive below this one (reaping the ones that already ended)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    alive = []
    for child in _children():
        for pid in (child, *_descendants(child)):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    alive.append(_describe(pid))
    return alive


def _exec_job(plan: dict[str, Any], cmd: list[str], close: list[int], start: Callable[[], None] | None) -> None:
    """The job's first process: our own descriptors closed, its limits set, every privilege dropped; then CMD
    (or ``start``, the job forked from a warm zygote: isolation/zygote.py)."""
    try:
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        limit = int(plan.get("memory_limit", 0))
        if limit > 0:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if plan.get("drop_privileges", True):
            drop_privileges()
        if start is not None:
            start()
        else:
            os.execvp(cmd[0], cmd)
    except BaseException as exc:  # noqa: BLE001 - nothing may return into the keeper's code
        with contextlib.suppress(Exception):
            os.write(2, f"kernelwright box: could not start the job: {exc}\n".encode())
    os._exit(127)


def _init(plan: dict[str, Any], cmd: list[str], to_keeper: int, close: list[int],
          start: Callable[[], None] | None) -> None:
    """PID 1 of the box: mounts, then the job; when the job's first process ends, who is still alive."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the keeper gone (killed at a timeout): the whole box goes
        notes = _arrange_mounts(plan) if plan.get("mounts", True) else []
        _prctl(PR_SET_DUMPABLE, 0)  # the job (without CAP_SYS_PTRACE) cannot open our descriptors or memory
        job = os.fork()
        if job == 0:
            _exec_job(plan, cmd, [to_keeper, *close], start)
        status = _wait_for(job)
        leftovers = _survivors()
        os.write(to_keeper, (json.dumps({"exit": status, "leftovers": leftovers, "notes": notes}) + "\n").encode())
    except BaseException as exc:  # noqa: BLE001
        with contextlib.suppress(Exception):
            os.write(to_keeper, (json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n").encode())
    os._exit(0)  # the kernel now kills every process left in the box


def _read_line(fd: int, parent: int) -> bytes:
    """One line from ``fd``; b"" if it closes first or our own parent goes (then the box is ended)."""
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], _KEEPER_POLL_S)
        if os.getppid() != parent:
            return b""
        if ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    return data


def _mirror(status: int) -> None:
    """End as the job's first process ended: its exit code, or its signal."""
    if status < 0:
        with contextlib.suppress(Exception):
            signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
        os._exit(128 - status)
    os._exit(status & 0xFF)


def keep(plan: dict[str, Any], cmd: list[str], *, start: Callable[[], None] | None = None) -> None:
    """The keeper's whole life (never returns). ``start``: run in the job's first process instead of ``cmd``."""
    control = int(plan["control_fd"])
    parent = os.getppid()
    mode = plan.get("mode", "auto")
    made = _enter_namespaces() if mode in ("auto", NAMESPACE) else SUBREAPER if mode == SUBREAPER else NONE
    report: dict[str, Any] = {"box": made}
    if made in (NAMESPACE, USER_NAMESPACE):
        read_fd, write_fd = os.pipe()
        init = os.fork()
        if init == 0:
            os.close(read_fd)
            _init(plan, cmd, write_fd, [control], start)
        os.close(write_fd)
        line = _read_line(read_fd, parent)
        if not line:  # our parent went, or init died: end the box (init's death kills everything in it)
            with contextlib.suppress(OSError):
                os.kill(init, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(init, 0)
        try:
            found = json.loads(line) if line else {"error": "the box's init ended without a word"}
        except ValueError:
            found = {"error": "the box's init wrote no report"}
        report.update(found)
        status = int(found.get("exit", 1)) if isinstance(found.get("exit"), int) else 1
    else:
        if made == SUBREAPER:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
        job = os.fork()
        if job == 0:
            _exec_job(plan, cmd, [control], start)
        status = _wait_for(job)
        leftovers = _survivors() if made == SUBREAPER else []
        for item in leftovers:
            with contextlib.suppress(OSError):
                os.kill(item["pid"], signal.SIGKILL)
        report.update({"exit": status, "leftovers": leftovers})
    with contextlib.suppress(OSError):
        os.write(control, (json.dumps(report) + "\n").encode())
        os.close(control)
    _mirror(status)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: box.py PLAN_JSON -- CMD...\n")
        os._exit(2)
    keep(json.loads(argv[0]), argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
