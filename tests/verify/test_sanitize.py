"""compute-sanitizer over a candidate (verify/sanitize.py): each tool's report read into findings that reject the
candidate, a missing sanitizer a one-line warning, no GPU a note — and the whole path (the wrapped child, its pipe
through the wrapper, the logs read back) run on the CPU with a stand-in for the tool. The real tools on broken CUDA
kernels are tests/verify/test_sanitize_gpu.py's."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from kernelwright.records import Severity
from kernelwright.verify import sanitize
from kernelwright.verify.findings import Judge

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"
CANDIDATE = HERE / "candidates" / "softmax_ok.py"

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at add_one(float *, int)+0x70 in /tmp/ext/main.cu:12
=========     by thread (31,0,0) in block (3,0,0)
=========     Address 0x7f5a4c000200 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f5a4c000000 of size 512 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2d5a3f] in libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at add_one(float *, int)+0x70 in /tmp/ext/main.cu:12
=========     by thread (30,0,0) in block (3,0,0)
=========
========= ERROR SUMMARY: 2 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at block_sum(const float *, float *, int)+0x1b0 in sum.cu:21
=========     and Read access at block_sum(const float *, float *, int)+0x2e0 in sum.cu:25 [248 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at 0x1c0 in /tmp/kw/softmax.py:31:softmax_kernel
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at tile_reduce(float *)+0x90 in reduce.cu:40
=========     by thread (5,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""


def test_each_tools_report_becomes_its_finding() -> None:
    (oob,) = sanitize.parse("memcheck", MEMCHECK)  # the two identical writes folded, counted
    assert (oob.code, oob.kernel, oob.location, oob.count) == ("out-of-bounds", "add_one", "main.cu:12", 2)
    assert oob.message == "Invalid __global__ write of size 4 bytes"
    assert sanitize.summary_count(MEMCHECK) == 2
    (race,) = sanitize.parse("racecheck", RACECHECK)
    assert race.code == "shared-memory-race" and race.kernel == "block_sum" and race.location == "sum.cu:21"
    assert sanitize.summary_count(RACECHECK) == 1
    (uninit,) = sanitize.parse("initcheck", INITCHECK)  # a Triton kernel: no symbol, the line names it
    assert uninit.code == "uninitialized-read" and uninit.location == "softmax.py:31"
    (barrier,) = sanitize.parse("synccheck", SYNCCHECK)
    assert barrier.code == "barrier-misuse" and barrier.kernel == "tile_reduce"
    clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitize.parse("memcheck", clean) == [] and sanitize.summary_count(clean) == 0
    assert sanitize.parse("memcheck", "no sanitizer lines at all\n") == []


def test_tools_flag() -> None:
    assert sanitize.parse_tools("all") == sanitize.TOOLS and sanitize.parse_tools("none") == ()
    assert sanitize.parse_tools("racecheck, memcheck") == ("racecheck", "memcheck")
    with pytest.raises(ValueError, match="memchek is no compute-sanitizer tool; choose from memcheck"):
        sanitize.parse_tools("memchek")


def test_no_gpu_is_a_note_and_no_sanitizer_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = Judge()
    sanitize.judge(judge, SOFTMAX, CANDIDATE, ("memcheck",), device="cpu", seed=1, size_overrides=None,
                   timeout_s=60)
    assert [(f.code, f.severity) for f in judge.findings] == [("sanitizer-skipped", Severity.NOTE)]
    monkeypatch.setattr(sanitize, "find_tool", lambda: None)
    judge = Judge()
    sanitize.judge(judge, SOFTMAX, CANDIDATE, sanitize.TOOLS, device="cuda", seed=1, size_overrides=None,
                   timeout_s=60)
    (missing,) = judge.findings
    assert missing.code == "sanitizer-missing" and missing.severity is Severity.WARNING
    assert "compute-sanitizer is not on this machine" in missing.message


FAKE_TAIL = 'sys.stderr.write("========= ERROR SUMMARY: 0 errors\\n")\nsys.exit(rc)'


FAKE_TOOL = '''#!{python}
"""A stand-in for compute-sanitizer: runs the command after its options (the job's pipe passed through, as the
real tool's launcher does), then prints the report written into this file (the job's box hides the test's
temporary folder, as it hides every other one)."""
import subprocess, sys

args = sys.argv[1:]
opts = {{}}
while args and args[0].startswith("--"):
    opts[args[0]] = args[1]
    args = args[2:]
rc = subprocess.call(args, pass_fds=(int(args[-1]),))
report = {report!r}
sys.stderr.write("========= COMPUTE-SANITIZER\\n")
if report:
    sys.stderr.write(report)
    sys.exit(int(opts["--error-exitcode"]))
{tail}
'''


def _fake_tool(tmp_path: Path, report: str = "", tail: str = FAKE_TAIL) -> str:
    path = tmp_path / f"compute-sanitizer-{len(list(tmp_path.iterdir()))}"
    path.write_text(FAKE_TOOL.format(python=sys.executable, report=report, tail=tail))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.slow
def test_the_wrapped_child_runs_the_forward_and_its_report_rejects(tmp_path: Path) -> None:
    """The whole path on the CPU: the sanitize job under a wrapper (its pipe through it), the forward at reduced
    sizes, the tool's log read back: clean, then a memcheck report that becomes an out-of-bounds error, then a tool
    that dies after the forward without its summary, which is not called clean."""
    judge = Judge()
    seconds = sanitize.judge(judge, SOFTMAX, CANDIDATE, ("racecheck",), device="cpu", seed=3,
                             size_overrides=None, timeout_s=120, tool_path=_fake_tool(tmp_path))
    assert [f.code for f in judge.findings] == ["sanitizer-clean"], judge.findings
    assert set(seconds) == {"sanitize_racecheck"}
    judge = Judge()
    sanitize.judge(judge, SOFTMAX, CANDIDATE, ("memcheck",), device="cpu", seed=3, size_overrides=None,
                   timeout_s=120, tool_path=_fake_tool(tmp_path, MEMCHECK.split("\n", 1)[1]))
    (oob,) = judge.findings
    assert oob.code == "out-of-bounds" and oob.severity is Severity.ERROR
    assert "add_one at main.cu:12" in oob.message and "[x2]" in oob.message
    assert os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") is None  # set for the child only
    judge = Judge()
    sanitize.judge(judge, SOFTMAX, CANDIDATE, ("memcheck",), device="cpu", seed=3, size_overrides=None,
                   timeout_s=120, tool_path=_fake_tool(tmp_path, tail="sys.exit(7)"))
    (skipped,) = judge.findings
    assert skipped.code == "sanitizer-skipped" and skipped.severity is Severity.WARNING, judge.findings
    assert "exit" in skipped.message and "summary" in skipped.message, skipped.message


def test_a_bad_tool_name_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelwright.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["verify", str(SOFTMAX), str(CANDIDATE), "--sanitize", "memcheck,leakcheck"])
    assert stop.value.code == 2
    assert "leakcheck is no compute-sanitizer tool; choose from memcheck" in capsys.readouterr().err
