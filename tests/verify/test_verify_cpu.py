"""End to end on the CPU: real Triton kernels under the interpreter, each candidate in an isolated child."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.isolation import clock
from kernelwright.records import Policy, Status
from kernelwright.verify.records import VerifyOptions, verdict_json
from kernelwright.verify.verifier import verify

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"


@pytest.fixture
def run(candidate):
    def verify_on_cpu(name: str, problem: Path = SOFTMAX, **options):
        return verify(problem, candidate(name), VerifyOptions(device="cpu", seed=7, **options))

    return verify_on_cpu


def codes(verdict) -> set[str]:
    return {f.code for f in verdict.findings}


def test_honest_triton_softmax_passes_every_trial(run, tmp_path: Path) -> None:
    from kernelwright.verify import refcache

    progress = tmp_path / "progress" / "verify.jsonl"
    cached = (len(refcache.CACHE), refcache.CACHE.hits)
    verdict = run("softmax_ok.py", progress_file=str(progress))
    assert verdict.status is Status.PASSED, verdict.message
    assert (len(refcache.CACHE), refcache.CACHE.hits) == cached  # no reuse_reference: nothing kept, nothing reused
    assert verdict.clean
    kinds = [t.kind for t in verdict.trials]
    assert kinds.count("random") >= 5 and "rewrite" in kinds and "repoison" in kinds
    assert {"scaled", "heavy_tailed", "shape", "sparse_in_place", "sparse_copy"} <= set(kinds)
    assert all(t.status == "ok" for t in verdict.trials), [(t.kind, t.status, t.note) for t in verdict.trials]
    assert [k.name for k in verdict.kernels if k.origin == "own"] == ["softmax_kernel"]
    assert verdict.timing == {}  # nothing is invented on the CPU
    assert "timing not measured" in verdict.message
    data = json.loads(verdict_json(verdict))
    assert data["status"] == "passed" and data["seed"] == 7
    # The progress file names each step as it starts and ends, in order, with the verdict's own durations.
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [(x["phase"], x["event"]) for x in lines[:5]] == [("verify", "start"), ("reference", "start"),
                                                            ("reference", "end"), ("candidate", "start"),
                                                            ("candidate", "end")]
    assert lines[0]["candidate"].endswith("softmax_ok.py")
    ends: dict[str, float] = {}
    for x in lines:
        if x["event"] == "end":
            ends[x["phase"]] = ends.get(x["phase"], 0.0) + x["s"]
    assert all(ends[name] == pytest.approx(s, abs=0.05) for name, s in verdict.phases.items() if name in ends)
    assert [x["at_s"] for x in lines] == sorted(x["at_s"] for x in lines)


@pytest.mark.slow
def test_the_seed_is_recorded_and_replays_the_same_trials(run) -> None:
    first = run("softmax_wrong.py")
    second = run("softmax_wrong.py")
    assert first.seed == second.seed == 7
    assert [t.seed for t in first.trials] == [t.seed for t in second.trials]
    assert first.trials[0].comparisons == second.trials[0].comparisons


def test_weights_reach_the_candidate_and_a_fused_linear_passes(run) -> None:
    verdict = run("scaled_linear_ok.py", problem=HERE / "problems" / "scaled_linear.py")
    assert verdict.status is Status.PASSED, verdict.message
    shape_trial = next(t for t in verdict.trials if t.kind == "shape")
    assert shape_trial.status == "ok" and "batch 24->" in shape_trial.note


@pytest.mark.instructions
@pytest.mark.slow
def test_a_kernel_the_target_arch_cannot_compile_is_a_warning_on_a_cpu_pass(tmp_path: Path) -> None:
    # The interpreter runs a kernel as Python (a plain helper function works); Triton's compiler for sm_90a refuses
    # it, so on that GPU the candidate would fail: the CPU verdict passes on correctness and says so as a warning.
    # The candidate: the honest fused linear with its scaling done by a plain Python function.
    from kernelwright.records import Severity

    honest = (HERE / "candidates" / "scaled_linear_ok.py").read_text()
    edited = honest.replace("    y = (acc + b[None, :]) * s\n", "    y = halve((acc + b[None, :]) * s * 2.0)\n")
    edited = edited.replace("\n\n@triton.jit", "\n\ndef halve(v):\n    return v * 0.5\n\n\n@triton.jit", 1)
    assert edited.count("halve(") == 2
    candidate = tmp_path / "scaled_linear_python_helper.py"
    candidate.write_text(edited)
    verdict = verify(HERE / "problems" / "scaled_linear.py", candidate,
                     VerifyOptions(device="cpu", seed=7, distribution_trials=False))
    assert verdict.status is Status.PASSED, verdict.message
    [failed] = [f for f in verdict.findings if f.code == "cross-compile-failed"]
    assert failed.severity is Severity.WARNING and "sm_90a" in failed.message and "halve" in failed.message


def test_wrong_answer_is_incorrect_with_where_and_how_much(run) -> None:
    verdict = run("softmax_wrong.py")
    assert verdict.status is Status.INCORRECT
    mismatch = next(f for f in verdict.findings if f.code == "mismatch")
    assert "max abs error" in mismatch.message and "worst at [" in mismatch.message
    assert "of elements wrong" in mismatch.message and "seed 7" in mismatch.message
    first = verdict.trials[0].comparisons[0]
    assert first["wrong_fraction"] > 0.9 and first["worst_index"] is not None


def test_fp16_math_in_an_fp32_problem_is_rejected_as_a_precision_shortcut(run) -> None:
    verdict = run("softmax_fp16_shortcut.py")
    assert verdict.status is Status.REJECTED
    assert verdict.message.startswith("precision:") and "TF32 or fp16" in verdict.message
    # KernelBench's tolerance (1e-4) on KernelBench's inputs alone lets the same kernel through.
    loose = run("softmax_fp16_shortcut.py", tolerance="kernelbench", distribution_trials=False)
    assert loose.status is Status.PASSED, loose.message


# The default run keeps one case of each kind of failure (a crash, a forged report, a mutated input, stale memory, a
# wrong structure, no ModelNew, a syntax error); the other ways to crash, raise or pass are marked slow.
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("name", "status", "code", "text"),
    [
        ("softmax_segfault.py", Status.CRASHED, None, "segmentation fault"),
        pytest.param("softmax_os_exit.py", Status.CRASHED, None, "before finishing", marks=SLOW),
        ("softmax_forged_report.py", Status.REJECTED, "protocol-violation", "out of the harness's sequence"),
        pytest.param("softmax_sys_exit.py", Status.RUNTIME_ERROR, "exit-called", "sys.exit(3)", marks=SLOW),
        pytest.param("softmax_raises.py", Status.RUNTIME_ERROR, "exception", "kernel not ready for this shape", marks=SLOW),
        pytest.param("softmax_ctor_raises.py", Status.RUNTIME_ERROR, "exception", "ModelNew(*get_init_inputs())", marks=SLOW),
        pytest.param("softmax_import_raises.py", Status.RUNTIME_ERROR, "exception", "importing the candidate", marks=SLOW),
        ("softmax_in_place.py", Status.REJECTED, "input-mutation", "in place"),
        ("softmax_partial.py", Status.REJECTED, "stale-memory", "NaN poison"),
        ("softmax_two_outputs.py", Status.INCORRECT, "output-structure", "2 output(s)"),
        ("softmax_no_modelnew.py", Status.COMPILE_ERROR, "missing-modelnew", "class ModelNew"),
        ("softmax_syntax.py", Status.COMPILE_ERROR, "syntax-error", "syntax error"),
        pytest.param("softmax_kernel_typo.py", Status.COMPILE_ERROR, "kernel-error", "exxp", marks=SLOW),
        pytest.param("softmax_inline_asm.py", Status.UNSUPPORTED, "interpreter-unsupported", "interpreter", marks=SLOW),
        pytest.param("softmax_alias.py", Status.PASSED, None, "correct on every trial", marks=SLOW),
        pytest.param("softmax_in_a_list.py", Status.INCORRECT, "output-structure", "returns a list where the problem returns a tensor", marks=SLOW),
    ],
)
def test_failing_candidates_get_the_right_verdict(run, name: str, status: Status, code: str | None,
                                                  text: str) -> None:
    verdict = run(name)
    assert verdict.status is status, verdict.message
    if code:
        assert code in codes(verdict)
    assert text in verdict.message
    assert "\n" not in verdict.message


@pytest.mark.slow
def test_reports_the_candidate_writes_into_the_channel_are_a_protocol_violation_not_a_crash(run) -> None:
    # A trial report without its index used to raise KeyError in the parent, a trial never planned KeyError, and a
    # timing report on the CPU went into the verdict as the candidate's time.
    verdict = run("softmax_malformed_reports.py")
    assert verdict.status is Status.REJECTED, verdict.message
    assert verdict.message.startswith("protocol-violation: malformed 'trial' message from the child: index: missing")
    violation = next(f for f in verdict.findings if f.code == "protocol-violation")
    said = " | ".join([violation.message, *violation.details.get("more", [])])
    assert "malformed 'timing' message from the child: measurement" in said
    assert "malformed 'done' message from the child: status: not a field of Done" in said
    assert "a report of trial 999, which was never planned" in said
    assert all(t.status == "ok" for t in verdict.trials), [(t.index, t.status, t.note) for t in verdict.trials]
    assert verdict.timing == {}


def test_a_hang_is_a_timeout_and_the_parent_carries_on(run) -> None:
    # The job's clock stands still until the candidate has started trial 0 (where it hangs), then runs out: the
    # same verdict on a loaded machine as on an idle one (a wall-clock limit either times out honest work or waits).
    # The real clock's kill is tested in tests/isolation/test_clock.py.
    with clock.holding(clock.HeldClock(clock.at_message("candidate", "trial_start", index=0))) as held:
        verdict = run("softmax_hang.py")
    assert held.ran_out == ["candidate"]
    assert verdict.status is Status.TIMEOUT
    assert "trial 0" in verdict.message
    # The same process verifies the next candidate normally.
    assert run("softmax_ok.py").status is Status.PASSED


@pytest.mark.slow
def test_running_out_of_time_on_the_shape_trial_is_a_timeout_not_an_accusation(run) -> None:
    # The job's one time limit covers every trial; a slow honest kernel (a big GEMM under the interpreter) used to be
    # reported `shape-specialised` for running out of it on the last trial, the second shape.
    # Time runs out once the last trial, the second shape, has started: every trial before it had all it needed.
    with clock.holding(clock.HeldClock(clock.at_message("candidate", "trial_start", kind="shape"))):
        verdict = run("softmax_hang_on_new_shape.py")
    assert verdict.status is Status.TIMEOUT, verdict.message
    assert "(shape)" in verdict.message
    assert "shape-specialised" not in codes(verdict)


def test_exhausting_memory_is_a_runtime_error(run) -> None:
    with config.scope(child_memory_gb=6):
        verdict = run("softmax_oom.py")
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert "out-of-memory" in codes(verdict)


def test_credentials_never_reach_the_candidate(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("HF_TOKEN", "hf-test-not-real")
    monkeypatch.setenv("MY_SECRET_THING", "x")
    verdict = run("softmax_reads_secrets.py")
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_allowing_reduced_precision_relaxes_the_tolerance_explicitly(run) -> None:
    verdict = run("softmax_fp16_shortcut.py", policy=Policy(allow_reduced_precision=True))
    assert verdict.status is Status.PASSED, verdict.message
    assert "precision" not in codes(verdict)
    bound = verdict.trials[0].comparisons[0]["bound"]
    assert bound >= 8 * 2**-8  # K times bf16's unit roundoff


@pytest.mark.slow
def test_cuda_cpp_without_a_gpu_is_compiled_inspected_and_unsupported(repo_root: Path) -> None:
    verdict = verify(HERE / "problems" / "vector_add.py", repo_root / "examples" / "vector_add_cuda.py",
                     VerifyOptions(device="cpu", seed=7))
    assert verdict.status is Status.UNSUPPORTED, verdict.message
    assert "cannot run on a machine without a GPU" in verdict.message
    build = next(f for f in verdict.findings if f.code == "cuda-build")
    assert build.details["ok"] is True and "sm_90a" in build.message
    # The kernels nvcc produced are in the instruction summary: the float4 path really loads 128 bits.
    opcodes = {op for k in verdict.instructions for op in k.histogram_by_opcode}
    assert "LDG.E.128" in opcodes or "LDG.E.128.CONSTANT" in opcodes, sorted(opcodes)


@pytest.mark.slow
def test_cuda_cpp_that_does_not_compile_is_a_compile_error_with_nvccs_line(tmp_path: Path) -> None:
    source = (HERE / "candidates" / "vector_add_cuda_plain.py")
    broken = tmp_path / "broken.py"
    broken.write_text(source.read_text().replace("out[i] = a[i] + b[i];", "out[i] = a[i] + undefined_symbol;"))
    verdict = verify(HERE / "problems" / "vector_add.py", broken, VerifyOptions(device="cpu", seed=7))
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    assert "undefined_symbol" in verdict.message and "\n" not in verdict.message


def _descendants(root: int) -> dict[int, str]:
    """Every process below ``root`` (pid: its name, as ``ps -o comm`` shows it)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            parents[int(entry.name)] = (int(rest[1]), name)
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        here = todo.pop()
        for pid, (ppid, name) in parents.items():
            if ppid == here and pid not in found:
                found[pid] = name
                todo.append(pid)
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").exists(), reason="reads /proc")
def test_stopping_verify_stops_the_candidates_process_too(candidate, tmp_path: Path) -> None:
    """The candidate runs in its own process group (so it cannot signal the parent's group): a terminal's Ctrl-C or
    a SIGTERM to `kernelwright verify` never reaches it, so the parent must end it before exiting."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the verifier's working folder
    proc = subprocess.Popen([sys.executable, "-m", "kernelwright", "verify", str(HERE / "problems" / "softmax.py"),
                             str(candidate("softmax_hang.py")), "--timeout", "300"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    # The candidate job: "kw:candidate" where it was forked from the warm zygote, its command line otherwise.
    while not any(name == "kw:candidate" or "candidate" in _cmdline(pid) for pid, name in _descendants(proc.pid).items()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-500:]
        time.sleep(0.5)
    time.sleep(2)  # inside forward by now, or about to be
    below = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    assert "interrupted" in proc.stderr.read().decode()
    time.sleep(1)
    alive = {pid: name for pid, name in below.items() if _running(pid)}
    assert alive == {}, alive
    assert not any(tmp_path.glob("kernelwright-verify-*")), "the scratch folder was left behind"


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow
def test_a_problem_too_big_for_the_interpreter_is_checked_at_reduced_sizes(repo_root: Path) -> None:
    # problems/softmax.py is 4096 x 8192: minutes per trial under the interpreter at the sizes as written.
    verdict = verify(repo_root / "problems" / "softmax.py", repo_root / "examples" / "softmax_triton.py",
                     VerifyOptions(device="cpu", seed=3))
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.size_overrides and all(v < 8192 for v in verdict.size_overrides.values())


@pytest.mark.slow
def test_kernelbench_tolerance_calls_imprecision_at_other_magnitudes_incorrect_not_a_cheat(run) -> None:
    # 0.1% off passes KernelBench's atol=1e-4 on randn inputs (outputs ~1/300) but not on inputs scaled x64 (outputs
    # near 1): that is imprecision the fixed tolerance lets through, not evidence of a shortcut.
    verdict = run("softmax_off_by_a_little.py", tolerance="kernelbench")
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "distribution-shortcut" in codes(verdict)
    assert "not necessarily a shortcut" in verdict.message


@pytest.mark.parametrize(("broken", "status"), [(True, Status.COMPILE_ERROR), (False, Status.UNSUPPORTED)])
def test_a_cuda_extension_built_in_init_gets_the_same_verdicts(tmp_path: Path, broken: bool, status: Status) -> None:
    source = (HERE / "candidates" / "vector_add_cuda_plain.py").read_text()
    source = source.replace('ext = load_inline("kw_add_plain"', 'build = lambda: load_inline("kw_add_plain"')
    source = source.replace("    def forward(self, a, b):\n        return ext.add_plain(",
                            "    def __init__(self):\n        super().__init__()\n        self.ext = build()\n\n"
                            "    def forward(self, a, b):\n        return self.ext.add_plain(")
    if broken:
        source = source.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + undefined_symbol;")
    lazy = tmp_path / "lazy.py"
    lazy.write_text(source)
    verdict = verify(HERE / "problems" / "vector_add.py", lazy, VerifyOptions(device="cpu", seed=7))
    assert verdict.status is status, verdict.message
