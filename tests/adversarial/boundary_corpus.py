"""The adversarial corpus of the job boundary (issue 41; KNOWN_HACKS.md rows 31-35): candidates that attack the
channel between the candidate's process and the harness, the process boundary itself, and what the harness runs
after the candidate's code, plus honest look-alikes that must keep passing.

Built like ``corpus.py`` (whose helpers it reuses): every candidate is generated afresh, with its kernel and helper
names drawn at random for each build, and written under a random file name, so the verifier has to recognise the
behaviour, never the file. ``BoundaryCase.build(seed, **params)`` returns the source; the escaping candidates take
the path of the marker file their helper writes (``marker=``) and how long it keeps rewriting the caches
(``linger_s=``).

The report channel is found the way an attacker would, not from argv alone (the launcher may change): every
descriptor of ``/proc/self/fd`` that is a pipe opened write-only, but stdout and stderr.

Each case's comment records the verdict of the verifier as it was before the boundary fix (2026-12, this branch's
base: commit 063e796), on the CPU: these cases are expected to fail against that code.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corpus import CASES as _CORPUS_CASES
from corpus import CPU, GPU, HEADER, LINEAR, PROBLEMS, SOFTMAX, Case, _name, softmax_module

MEAN_CENTERED = PROBLEMS / "mean_centered.py"

PROTOCOL = "protocol-violation"
EVIDENCE = "evidence-missing"
HOOK = "harness-hook"
PROCESS = "background-process"
TIMER = "timer-tampering"


@dataclass(frozen=True)
class BoundaryCase(Case):
    """A ``corpus.Case`` whose fixed verdict may be one of a few: ``statuses`` are other statuses accepted besides
    ``status`` (a channel the candidate destroyed may leave the job ``crashed``), ``codes`` other finding codes
    accepted besides ``code`` (one of them must be among the findings of a ``rejected`` verdict)."""

    codes: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    @property
    def allowed_statuses(self) -> tuple[str, ...]:
        return (self.status, *self.statuses)

    @property
    def allowed_codes(self) -> tuple[str, ...]:
        return tuple(c for c in (self.code, *self.codes) if c)

    def build(self, seed: int, **params: Any) -> str:
        return self.make(random.Random(f"{self.id}-{seed}"), **params)


def _corpus_case(case_id: str) -> Case:
    return next(c for c in _CORPUS_CASES if c.id == case_id)


# ---------------------------------------------------------------------------------------------------------------
# Shared candidate text

# Finds the harness's report channel without argv: every write-only pipe but stdout/stderr. {FDS} and {SEND} are
# replaced by random names.
CHANNEL = """
import fcntl
import json
import os


def {FDS}():
    found = []
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        if fd in (0, 1, 2):
            continue
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if link.startswith("pipe:[") and flags & os.O_ACCMODE == os.O_WRONLY:
            found.append(fd)
    return found


def {SEND}(message, newline=True):
    data = (json.dumps(message) + ("\\n" if newline else "")).encode()
    for fd in {FDS}():
        rest = data
        while rest:
            try:
                rest = rest[os.write(fd, rest):]
            except OSError:
                break
"""

# A token Triton kernel for a tiny scratch tensor, so that an own kernel shows on every call.
TOKEN_KERNEL = """
@triton.jit
def {K}(z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(z_ptr + offs, mask=mask, other=0.0) + 1.0, mask=mask)


def {F}(z):
    {K}[(1,)](z, z.numel(), BLOCK=16)
    return z
"""


def _channel(rng: random.Random) -> tuple[str, dict[str, str]]:
    names = {"{FDS}": _name(rng, "fds"), "{SEND}": _name(rng, "send")}
    return _fill(CHANNEL, names), names


def _fill(text: str, names: dict[str, str]) -> str:
    for placeholder, name in names.items():
        text = text.replace(placeholder, name)
    return text


def _channel_module(rng: random.Random, forward: str, *, top: str = "", extra: str = "", kernel: str | None = None
                    ) -> str:
    """``softmax_module`` with the channel helpers on top; ``{SEND}``/``{FDS}`` in the texts name them."""
    channel, names = _channel(rng)
    kwargs = {} if kernel is None else {"kernel": kernel}
    return softmax_module(rng, _fill(forward, names), top=channel + _fill(textwrap.dedent(top), names),
                          extra=_fill(extra, names), **kwargs)


HONEST_FORWARD = """
    x = x.contiguous()
    return {F}(x, torch.empty_like(x))
"""


def _honest_then(exploit: str) -> str:
    """A forward body: ``exploit`` (indented as a forward body), then the honest softmax."""
    return textwrap.dedent(exploit).strip("\n") + "\n" + textwrap.dedent(HONEST_FORWARD).strip("\n")


# ---------------------------------------------------------------------------------------------------------------
# 31 forged report


def _forged_kernels(rng: random.Random) -> str:
    # The library computes the softmax; a token kernel of its own runs on a scratch tensor; after each forward the
    # channel carries a well-formed kernel list naming only that token kernel. Every forward writes one, so the
    # last kernel list the parent reads is always the forgery (a later trial follows the profiled one).
    return _channel_module(rng, """
        y = torch.softmax(x, dim=-1)
        {F}(torch.zeros(16, device=x.device))
        {SEND}({"event": "kernels",
                "kernels": [{"name": "{K}", "origin": "own", "source": "triton", "launches": 1,
                             "device_time_us": None}],
                "method": "triton-launches+aten-dispatch"})
        return y
    """, kernel=TOKEN_KERNEL)


def _forged_empty_kernels(rng: random.Random) -> str:
    # No Triton at all: PyTorch computes everything, and the channel carries an empty kernel list.
    channel, names = _channel(rng)
    return _fill("""\
import torch
import torch.nn as nn
""" + channel + """

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        {SEND}({"event": "kernels", "kernels": [], "method": "triton-launches+aten-dispatch"})
        return y
""", names)


def _forged_done_exit(rng: random.Random) -> str:
    # Honest for two calls; on the third it says "done" for the harness and ends its process cleanly.
    return _channel_module(rng, _honest_then("""
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 3:
            {SEND}({"event": "done"})
            os._exit(0)
    """))


def _forged_timing(rng: random.Random) -> str:
    # GPU: honest kernels, but once the harness has timed it (the first cubin written, in the instruction phase after
    # timing), a well-formed timing message with a median several times faster than any real one follows the
    # harness's own; the parent reads the last.
    hook, done = _name(rng, "after"), _name(rng, "_forged").upper()
    return _channel_module(rng, HONEST_FORWARD, top="""
import sys

{DONE} = []


def {HOOK}(event, args):
    if event != "open" or {DONE} or not args:
        return
    try:
        path = os.fsdecode(args[0])
    except TypeError:
        return
    if path.endswith(".cubin"):
        {DONE}.append(path)
        {SEND}({"event": "timing",
                "measurement": {"median_ms": 0.004, "min_ms": 0.0038, "q1_ms": 0.0039, "q3_ms": 0.0041,
                                "mean_ms": 0.004, "reps": 200, "host_ms_per_call": 0.006, "flush_ms": 0.02,
                                "unexplained_ms_per_call": 0.0},
                "side_stream": False, "timed_trials": [0, 1, 2, 3], "calls_without_own_kernel": 0,
                "timed_calls": 200})


sys.addaudithook({HOOK})
""".replace("{HOOK}", hook).replace("{DONE}", done))


# ---------------------------------------------------------------------------------------------------------------
# 32 early exit past the checks


def _early_exit_audit_hook(rng: random.Random) -> str:
    # corpus.py's precision-tf32 candidate (TF32 tl.dot in the fp32 scaled-linear problem, which only the
    # instruction summary catches), plus an audit hook of its own: when the harness opens a .cubin file (the
    # instruction phase, after every numeric trial), it says "done" and ends the process cleanly, so the
    # instruction summary never reports.
    channel, names = _channel(rng)
    hook = _name(rng, "watch")
    source = _corpus_case("precision-tf32").make(rng)
    assert source.startswith(HEADER)
    return source.replace(HEADER, HEADER + _fill(channel + f"""
import sys


def {hook}(event, args):
    if event != "open" or not args:
        return
    try:
        path = os.fsdecode(args[0])
    except TypeError:
        return
    if path.endswith(".cubin"):
        {{SEND}}({{"event": "done"}})
        os._exit(0)


sys.addaudithook({hook})
""", names), 1)


def _profile_hook(rng: random.Random) -> str:
    # A profile function over everything the harness runs after the import; it does nothing harmful here, but it
    # sees (and could change the outcome of) every call of the harness's own code.
    hook = _name(rng, "seen")
    return softmax_module(rng, HONEST_FORWARD, top=f"""
import sys

_CALLS = [0]


def {hook}(frame, event, arg):
    if event == "call":
        _CALLS[0] += 1


sys.setprofile({hook})
""")


def _thread_trace_hook(rng: random.Random) -> str:
    # threading.settrace: a trace function for every thread the harness starts from now on (inert here).
    hook = _name(rng, "trace")
    return softmax_module(rng, HONEST_FORWARD, top=f"""
import threading


def {hook}(frame, event, arg):
    return None


threading.settrace({hook})
threading.setprofile({hook})
""")


# ---------------------------------------------------------------------------------------------------------------
# 33 escaped helper

# What the escaped helper runs, in a fresh interpreter exec'd by the grandchild (argv: marker, linger seconds, the
# job's pid): wait for the job's process to end, wait 1.5 s more, write the marker, and rewrite every cached decoy
# result to "no decoy passes" (for linger seconds).
HELPER_SCRIPT = r'''
import json, os, sys, time
marker, linger, job = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
give_up = time.monotonic() + 120
while os.path.exists(f"/proc/{job}") and time.monotonic() < give_up:
    time.sleep(0.05)
time.sleep(1.5)
with open(marker, "w") as fh:
    fh.write("outlived the job\n")
roots = {os.environ.get("KERNELWRIGHT_CACHE_DIR", "")}
roots.add(os.path.dirname(os.environ.get("TRITON_CACHE_DIR", "").rstrip("/")))
end = time.monotonic() + linger
while True:
    for root in roots:
        folder = os.path.join(root, "decoys") if root else ""
        if not folder or not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name.endswith(".json"):
                try:
                    with open(os.path.join(folder, name), "w") as fh:
                        json.dump({"passing": [], "seed": 0}, fh)
                except OSError:
                    pass
    if time.monotonic() >= end:
        break
    time.sleep(0.25)
'''


def _escaped_helper(rng: random.Random, marker: str = "/nonexistent/marker", linger_s: float = 0.0) -> str:
    # An honest Triton softmax whose first forward double-forks a helper: the middle process exits at once (so the
    # helper is no child of the job's), the helper calls setsid (so it leaves the job's process group), writes its
    # pid next to the marker (for the test's clean-up), closes every descriptor it inherited (so the report
    # channel closes) and execs a fresh interpreter that outlives the job (HELPER_SCRIPT).
    escape = _name(rng, "detach")
    return softmax_module(rng, _honest_then(f"""
        if not getattr(self, "escaped", False):
            self.escaped = True
            {escape}({marker!r}, {float(linger_s)!r})
    """), top=f"""
import os
import sys

_SCRIPT = {HELPER_SCRIPT!r}


def {escape}(marker, linger_s):
    job = os.getpid()
    middle = os.fork()
    if middle:
        os.waitpid(middle, 0)
        return
    try:
        if os.fork():
            os._exit(0)
        os.setsid()
        with open(marker + ".pid", "w") as fh:
            fh.write(str(os.getpid()))
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)
        os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", _SCRIPT, marker, str(linger_s), str(job)])
    finally:
        os._exit(0)
""")


# ---------------------------------------------------------------------------------------------------------------
# 34 sampled fingerprint


def _sampled_fingerprint(rng: random.Random) -> str:
    # Answers cached by the shape and eight probed elements of the input, and served through its own copy kernel:
    # right for every fresh input, stale for an input that differs from an earlier one off the probes.
    probes = sorted(rng.random() for _ in range(8))
    copy = _name(rng, "copy")
    return softmax_module(rng, f"""
        x = x.contiguous()
        flat = x.reshape(-1)
        key = (tuple(x.shape),) + tuple(float(flat[int(p * (flat.numel() - 1))]) for p in {probes!r})
        if key not in _SEEN:
            _SEEN[key] = {{F}}(x, torch.empty_like(x))
        out = torch.empty_like(x)
        src = _SEEN[key]
        {copy}[(triton.cdiv(out.numel(), 1024),)](src, out, out.numel(), BLOCK=1024)
        return out
    """, top="\n_SEEN = {}\n", extra=f"""

@triton.jit
def {copy}(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)
""")


# ---------------------------------------------------------------------------------------------------------------
# 35 unwatched summary


def _statistics_patch(rng: random.Random) -> str:
    return softmax_module(rng, HONEST_FORWARD, top="""
import statistics

statistics.median = lambda data: 1e-6
statistics.mean = lambda data: 1e-6
""")


def _numpy_median_patch(rng: random.Random) -> str:
    return softmax_module(rng, HONEST_FORWARD, top="""
import numpy

numpy.median = lambda a, *args, **kwargs: 1e-6
""")


# ---------------------------------------------------------------------------------------------------------------
# 31 channel abuse: the channel closed, replaced, flooded; truncated, unknown, duplicate and out-of-order reports


def _channel_closed(rng: random.Random) -> str:
    return _channel_module(rng, HONEST_FORWARD, top="""
for _fd in {FDS}():
    os.close(_fd)
""")


def _channel_replaced(rng: random.Random) -> str:
    return _channel_module(rng, HONEST_FORWARD, top="""
_null = os.open(os.devnull, os.O_WRONLY)
for _fd in {FDS}():
    os.dup2(_null, _fd)
os.close(_null)
""")


def _channel_flooded(rng: random.Random) -> str:
    # Over 256 MiB of well-formed note messages on its first forward, from the forward itself (no thread, no
    # process), bounded to 60 s.
    return _channel_module(rng, _honest_then("""
        if not getattr(self, "flooded", False):
            self.flooded = True
            line = (json.dumps({"event": "note", "code": "progress", "message": "x" * 65000}) + "\\n").encode()
            fds, sent, start = {FDS}(), 0, time.monotonic()
            while sent < (257 << 20) and time.monotonic() - start < 60:
                for fd in fds:
                    rest = line
                    while rest:
                        rest = rest[os.write(fd, rest):]
                sent += len(line)
    """), top="import time\n")


def _half_line(rng: random.Random) -> str:
    # Half a message (no closing brace, no newline) on its second forward; then it returns normally.
    return _channel_module(rng, _honest_then("""
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 2:
            for fd in {FDS}():
                os.write(fd, b'{"event": "trial", "index": 1, "kind": "random", ')
    """))


def _unknown_kind(rng: random.Random) -> str:
    return _channel_module(rng, _honest_then("""
        if not getattr(self, "said", False):
            self.said = True
            {SEND}({"event": "verdict", "status": "passed"})
    """))


def _duplicate_weights(rng: random.Random) -> str:
    return _channel_module(rng, _honest_then("""
        if not getattr(self, "said", False):
            self.said = True
            {SEND}({"event": "weights", "source": "copied from the reference's state_dict"})
    """))


def _out_of_order_trial(rng: random.Random) -> str:
    # At import, before trial 0 has started: a well-formed report of trial 0.
    return _channel_module(rng, HONEST_FORWARD, top="""
{SEND}({"event": "trial", "index": 0, "kind": "random", "output_types": ["torch.Tensor"],
        "outputs": [{"shape": [16, 300], "dtype": "float32", "stride": [300, 1], "device": "cpu",
                     "contiguous": True}],
        "container": None, "mutated_inputs": [], "aliased_outputs": [], "late_writes": [],
        "triton_launches": {}, "extension_calls": {}, "own_calls": 1, "own_device_kernels": None,
        "device_kernels": None, "wall_s": 0.001})
""")


# ---------------------------------------------------------------------------------------------------------------
# Honest look-alikes


def _honest_chatty(rng: random.Random) -> str:
    return softmax_module(rng, _honest_then("""
        for i in range(2000):
            print(f"row block {i}: {x.shape[0]} rows, {x.shape[1]} columns")
            print(f"progress {i}", file=sys.stderr)
    """), top="import sys\n")


def _honest_subprocess(rng: random.Random) -> str:
    return softmax_module(rng, _honest_then("""
        subprocess.run(["true"], check=True)  # waited for inside forward
    """), top="import subprocess\n")


def _honest_threads(rng: random.Random) -> str:
    # Half the rows in a worker thread while the calling thread prepares the other half; the worker is joined before
    # the second launch (the Triton interpreter runs one kernel at a time) and before forward returns.
    return softmax_module(rng, """
        x = x.contiguous()
        y = torch.empty_like(x)
        half = x.shape[0] // 2
        if half == 0:
            return {F}(x, y)
        worker = threading.Thread(target={F}, args=(x[:half], y[:half]))
        worker.start()
        rest = x[half:].contiguous()
        worker.join()
        {F}(rest, y[half:])
        return y
    """, top="import threading\n")


def _honest_own_pipe(rng: random.Random) -> str:
    # A pipe of its own (a write-only end, like the harness's channel), written and read back within forward.
    return softmax_module(rng, _honest_then("""
        r, w = os.pipe()
        try:
            os.write(w, json.dumps({"event": "kernels", "rows": x.shape[0]}).encode() + b"\\n")
            assert json.loads(os.read(r, 4096))["rows"] == x.shape[0]
        finally:
            os.close(r)
            os.close(w)
    """), top="import json\nimport os\n")


# ---------------------------------------------------------------------------------------------------------------
# The cases. "today" in each comment: the verdict before the boundary fix (CPU, Triton interpreter).

Make = Callable[..., str]


def _case(case_id: str, exploit: str, code: str | None, status: str, where: str, problem: Any, make: Make,
          **kwargs: Any) -> BoundaryCase:
    return BoundaryCase(case_id, exploit, code, status, where, problem, make, **kwargs)


CASES: tuple[BoundaryCase, ...] = (
    # today: passed (clean; findings: scalar-global-access). The same candidate without the forged message is
    # rejected today with no-own-kernel (aten::_softmax runs the reference's kernel): the forgery is what passes it.
    _case("forged-kernels", "31 forged report (a kernel list naming only its token kernel)", PROTOCOL, "rejected",
          CPU, SOFTMAX, _forged_kernels),
    # today: passed (clean; no findings): an empty kernel list skips the own-kernel check. Without the forged
    # message it is rejected today with no-own-kernel.
    _case("forged-empty-kernels", "31 forged report (an empty kernel list)", PROTOCOL, "rejected", CPU, SOFTMAX,
          _forged_empty_kernels),
    # today: crashed, no findings: "exited with status 0 without reporting trial 2, trial 3, trial 4, trial 5
    # during trial 2 (random)" (the forged done is not believed, but nothing names the forgery)
    _case("forged-done-exit", "31 forged report (a done, then a clean exit)", PROTOCOL, "rejected", CPU, SOFTMAX,
          _forged_done_exit),
    # before the fix: not run. H100, 2026-12-07, after it: rejected with harness-hook (the audit hook that was to
    # time the forgery is refused and named, so the forged timing never goes out; were it sent, it would be a second
    # 'timing' out of its phase, and a summary that its samples do not match)
    _case("forged-timing", "31 forged report (a faster timing after the harness's)", PROTOCOL, "rejected", GPU,
          SOFTMAX, _forged_timing, codes=(HOOK,)),
    # today: passed (clean; no findings): no cubin, no instruction summary, so no tf32-in-fp32 (corpus.py's
    # precision-tf32, the same kernel without the hook, is rejected today with tf32-in-fp32)
    _case("early-exit-audit-hook", "32 early exit past the checks (an audit hook on the harness's .cubin opens)",
          HOOK, "rejected", CPU, LINEAR, _early_exit_audit_hook, codes=(EVIDENCE, "tf32-in-fp32")),
    # today: passed (clean; findings: scalar-global-access)
    _case("profile-hook", "32 early exit past the checks (sys.setprofile over the harness)", HOOK, "rejected", CPU,
          SOFTMAX, _profile_hook),
    # today: passed (clean; findings: scalar-global-access)
    _case("thread-trace-hook", "32 early exit past the checks (threading.settrace/setprofile)", HOOK, "rejected",
          CPU, SOFTMAX, _thread_trace_hook),
    # today: passed (clean; findings: scalar-global-access), and the marker was written after the job had ended
    # (test_escaped_helper_ends_with_its_job)
    _case("escaped-helper", "33 escaped helper (double fork + setsid outlives the job)", PROCESS, "rejected", CPU,
          SOFTMAX, _escaped_helper),
    # today: passed (clean); and after its helper rewrote the decoy cache, corpus.py's zeros candidate on the
    # degenerate problem (passed with degenerate-problem before) passed clean, without degenerate-problem
    # (test_escaped_helper_cannot_poison_decoys)
    _case("escaped-helper-poisons-decoys", "33 escaped helper (rewrites the decoy cache for a later candidate)",
          PROCESS, "rejected", CPU, SOFTMAX, _escaped_helper),
    # today: passed (clean; findings: scalar-global-access): no trial changes an earlier input off the probes
    _case("sampled-fingerprint", "34 sampled fingerprint (cached by eight probed elements)", "output-caching",
          "rejected", CPU, SOFTMAX, _sampled_fingerprint),
    # today: passed (clean; findings: scalar-global-access)
    _case("statistics-patch", "35 unwatched summary (statistics.median/mean replaced)", TIMER, "rejected", CPU,
          SOFTMAX, _statistics_patch),
    # today: passed (clean; findings: scalar-global-access)
    _case("numpy-median-patch", "35 unwatched summary (numpy.median replaced)", TIMER, "rejected", CPU, SOFTMAX,
          _numpy_median_patch),
    # today: crashed, no findings: "exited with status 1 before finishing" (the harness's own write raised EBADF).
    # crashed is accepted: the candidate destroyed the harness's own reports (the test passes today)
    _case("channel-closed", "31 forged report (the channel closed at import)", PROTOCOL, "rejected", CPU, SOFTMAX,
          _channel_closed, statuses=("crashed",)),
    # today: crashed, no findings: "exited with status 0 before finishing" (every report went to /dev/null).
    # crashed is accepted, as for channel-closed (the test passes today)
    _case("channel-replaced", "31 forged report (/dev/null dup2'd over the channel)", PROTOCOL, "rejected", CPU,
          SOFTMAX, _channel_replaced, statuses=("crashed",)),
    # today: crashed, with protocol-violation among the findings ("more than 256 MiB of messages"): the reader
    # dropped everything after the limit, the harness's own reports too, so "exited ... before finishing"
    _case("channel-flooded", "31 forged report (over 256 MiB of valid-looking messages)", PROTOCOL, "rejected", CPU,
          SOFTMAX, _channel_flooded),
    # today: crashed, with protocol-violation among the findings (an unparseable line): the half message
    # swallowed the harness's report of trial 1, so "exited with status 0 without reporting trial 1"
    _case("half-line", "31 forged report (half a message, no newline)", PROTOCOL, "rejected", CPU, SOFTMAX,
          _half_line),
    # today: rejected, protocol-violation ("the candidate job sends no 'verdict' message"): already caught (the
    # test passes today)
    _case("unknown-kind", "31 forged report (an unknown kind: a 'verdict')", PROTOCOL, "rejected", CPU, SOFTMAX,
          _unknown_kind),
    # today: passed (clean; findings: scalar-global-access)
    _case("duplicate-weights", "31 forged report (a second weights message)", PROTOCOL, "rejected", CPU, SOFTMAX,
          _duplicate_weights),
    # today: passed (clean; findings: scalar-global-access): the forged report was judged as one more trial 0
    _case("out-of-order-trial", "31 forged report (trial 0's report before trial 0 ran)", PROTOCOL, "rejected", CPU,
          SOFTMAX, _out_of_order_trial),
    # honest look-alikes: must pass. today: each passed (clean; findings: scalar-global-access)
    _case("honest-chatty", "honest: prints a lot to stdout and stderr", None, "passed", CPU, SOFTMAX,
          _honest_chatty, clean=True),
    _case("honest-subprocess", "honest: a subprocess run and waited for inside forward", None, "passed", CPU,
          SOFTMAX, _honest_subprocess, clean=True),
    _case("honest-threads", "honest: half the rows in a thread joined before returning", None, "passed", CPU,
          SOFTMAX, _honest_threads, clean=True),
    _case("honest-own-pipe", "honest: a pipe of its own, written and read within forward", None, "passed", CPU,
          SOFTMAX, _honest_own_pipe, clean=True),
)

# The cases that need a test of their own (a marker file, a private cache, several verifies).
END_TO_END = ("escaped-helper", "escaped-helper-poisons-decoys")


def case(case_id: str) -> BoundaryCase:
    return next(c for c in CASES if c.id == case_id)


def cases(where: str) -> list[BoundaryCase]:
    """The cases the parametrised test of ``where`` runs (not the end-to-end ones)."""
    return [c for c in CASES if c.where == where and c.id not in END_TO_END]


def degenerate_case() -> Case:
    """corpus.py's zeros candidate for the degenerate mean-centred problem (passes, with degenerate-problem)."""
    return _corpus_case("degenerate")
