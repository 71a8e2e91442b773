"""Prompts and verifier feedback for the LLM generator, built from real verdict shapes."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from stubs import measured

from kernelwright.generate.families.base import Policy
from kernelwright.hardware import lookup
from kernelwright.inspect.analysis import KernelSummary
from kernelwright.jobs import KernelRecord
from kernelwright.llm.parse import extract_modelnew
from kernelwright.llm.prompting import (
    Attempt,
    PromptTemplateError,
    build_crossover_messages,
    build_messages,
    build_mutation_messages,
    build_problem_messages,
    choose_stage,
    feedback,
    hardware_facts,
    placeholders,
    render,
)
from kernelwright.llm.templates import _hint
from kernelwright.records import Finding, ProblemTraits, Severity, Status
from kernelwright.verify.records import TrialOutcome, Verdict
from kernelwright.verify.roofline import Roofline
from kernelwright.verify.trials import plan_trials

CANDIDATE = "/tmp/kw-run/c0007.py"

PROBLEM = '''"""Square GEMM: out = a @ b (fp16)."""

import torch
import torch.nn as nn

M = K = N = 4096


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
'''

SOURCE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        _mm[(1,)](a, b, c, a.shape[0], b.shape[1], a.shape[1], BM=64, BN=64)
        return c
'''

MATMUL = ProblemTraits(dominant="matmul", compute_dtype="float16", dtypes=("float16",), flops=1.37e11,
                       matmul_flops=1.37e11, bytes=1.0e8)
SOFTMAX = ProblemTraits(dominant="memory", compute_dtype="float32", dtypes=("float32",), flops=6.4e4, bytes=5.12e5)

COMPILE_TRACEBACK = f'''Traceback (most recent call last):
  File "/work/main/src/kernelwright/verify/child/candidate.py", line 172, in call
    return model(*inputs)
           ^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "{CANDIDATE}", line 15, in forward
    _mm[(1,)](a, b, c, a.shape[0], b.shape[1], a.shape[1], BM=64, BN=64)
  File "/usr/local/lib/python3.12/site-packages/triton/runtime/jit.py", line 419, in run
    kernel = self.compile(src, target=target, options=options.__dict__)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/site-packages/triton/compiler/compiler.py", line 100, in make_ir
    return ast_to_ttir(self.fn, self, context=context, options=options, codegen_fns=codegen_fns,
triton.compiler.errors.CompilationError: at 3:24:
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    acc = tl.zeros((BM, BN), tl.float32) + undefined_scale
                                           ^
NameError("Cannot access global variable undefined_scale from within @jit'ed function")'''


def make_verdict(status: Status, message: str, **fields) -> Verdict:
    base = dict(status=status, message=message, clean=status is Status.PASSED, problem="/tmp/kw-run/problem.py",
                candidate=CANDIDATE, problem_sha256="0" * 64, candidate_sha256="1" * 64, seed=7,
                device={"type": "cuda", "name": "NVIDIA H200"}, tolerance={"mode": "reference", "factor": 8.0})
    return Verdict(**(base | fields))


def compile_error() -> Verdict:
    message = "forward (trial 0, random) raised CompilationError: at 3:24:"
    return make_verdict(Status.COMPILE_ERROR, message, findings=(
        Finding(code="build-failed", message=message, details={"details": COMPILE_TRACEBACK}),),
        stderr_tail="/usr/local/lib/python3.12/site-packages/triton/knobs.py:504: UserWarning: TRITON_DEFAULT unset\n"
                    "  warn_once(FP_FUSION_DEFAULT_WARNING)\n")


def comparison(**overrides) -> dict:
    data = {"ok": False, "reason": "", "mode": "reference", "numel": 64000, "wrong_count": 64000,
            "wrong_fraction": 1.0, "nonfinite_mismatches": 0, "max_abs_error": 52.47, "max_rel_error": 1803.0,
            "rel_l2_error": 1659.0, "native_rel_l2_error": 7.2e-08, "native_max_error": 1.585e-07,
            "bound": 7.63e-06, "worst_index": [36, 95], "worst_got": 52.5002, "worst_expected": 0.0292478,
            "rel_error_rms": 1654.9, "rel_error_mean": 1653.4}
    return data | overrides


def incorrect() -> Verdict:
    data = make_verdict(Status.INCORRECT, "mismatch: trial 0 (seed 1): output 0: max abs error 52.5 [+4 more]",
                        traits=SOFTMAX).to_json()
    data["trials"] = [TrialOutcome(index=i, kind="random", seed=i + 1, status="wrong",
                                   comparisons=(comparison(),)).to_json() for i in range(5)]
    data["trials"].append(TrialOutcome(index=5, kind="rewrite", seed=6, status="ok",
                                       comparisons=(comparison(ok=True),)).to_json())
    data["findings"] = [Finding(code="mismatch", message="trial 0 (seed 1): output 0: max abs error 52.5").to_json()]
    return Verdict.from_json(data)


def rejected(code: str, message: str) -> Verdict:
    trials = tuple(TrialOutcome(index=i, kind="random", seed=i + 1, status="ok") for i in range(5)) + (
        TrialOutcome(index=5, kind="rewrite", seed=6, status="wrong", comparisons=(comparison(),)),)
    return make_verdict(Status.REJECTED, f"{code}: {message}", trials=trials,
                        findings=(Finding(code=code, message=message),))


def matmul_pass_without_tensor_cores() -> Verdict:
    timing = {"candidate": measured(2.1, min_ms=2.0, q1_ms=2.05, q3_ms=2.15, reps=300),
              "eager": measured(0.205, min_ms=0.2, q1_ms=0.2, q3_ms=0.21, reps=1200),
              "compile_max_autotune": measured(0.207, min_ms=0.2, q1_ms=0.2, q3_ms=0.21, reps=1200)}
    return make_verdict(
        Status.PASSED, "correct on every trial; 2.1000 ms, 0.10x eager, 0.10x torch.compile", traits=MATMUL,
        timing=timing, speedups={"vs_eager": 0.098, "vs_compile_max_autotune": 0.099},
        roofline=Roofline(bytes=1.0e8, flops=1.37e11, matmul_flops=1.37e11, achievable_floor_ms=0.191,
                          physical_floor_ms=0.139, bound="compute"),
        percent_of_floor=9.1,
        kernels=(KernelRecord(name="_mm", origin="own", source="triton", launches=1, device_time_us=2100.0,
                              streams=(7,)),),
        instructions=(KernelSummary.from_json({
            "name": "_mm", "arch": "sm_90a", "registers": 128, "shared_bytes": 0,
            "histogram_by_class": {"fp32": 9000, "fp16": 4000, "global_load": 64},
            "global_load_bits": {"32": 64}, "occupancy": {"warps_per_sm": 16, "max_warps_per_sm": 64}}),),
        findings=(Finding(code="no-tensor-core", severity=Severity.WARNING,
                          message="matmul-dominant fp16 problem, but no tensor-core instruction in 1 kernel(s) for "
                                  "sm_90a: the math runs on the SIMT units",
                          details={"arch": "sm_90a", "kernels": ["_mm"], "fma_opcodes": {"_mm": {"HFMA2": 4000}}}),),
    )


def attempt(verdict: Verdict | None, *, source: str | None = SOURCE, failure: str | None = None,
            label: str = "") -> Attempt:
    return Attempt(source=source, verdict=verdict, failure=failure, label=label)


def messages(**overrides) -> list[dict]:
    kwargs = dict(problem_source=PROBLEM, problem_name="matmul.py", arch="sm_90a", gpu=lookup("H200"),
                  policy=Policy(), stage="correctness")
    return build_messages(**(kwargs | overrides))


def flat(text: str) -> str:
    """Prose with its line wrapping undone (templates wrap lines; tests look for phrases)."""
    return " ".join(text.split())


# ----------------------------------------------------------------------------------------------------- feedback


def test_compile_error_keeps_the_error_and_candidate_frame_drops_framework_frames():
    text = feedback(attempt(compile_error()))
    assert "CompilationError: at 3:24" in text
    assert "undefined_scale" in text and "NameError" in text
    assert 'File "candidate.py", line 15, in forward' in text
    assert "_mm[(1,)](a, b, c" in text
    assert "site-packages" not in text and "module.py" not in text and "jit.py" not in text
    assert "verify/child/candidate.py" not in text and "Traceback" not in text
    assert "UserWarning" not in text  # stderr noise
    assert len(text.splitlines()) <= 40


NVCC_FAILURE = f"""Traceback (most recent call last):
  File "{CANDIDATE}", line 40, in <module>
    ext = load_inline(name="kw_add", cpp_sources=cpp, cuda_sources=cu, functions=["add"])
  File "/usr/local/lib/python3.12/site-packages/torch/utils/cpp_extension.py", line 2500, in _run_ninja_build
    raise RuntimeError(message) from e
RuntimeError: Error building extension 'kw_add': [1/3] /usr/local/cuda/bin/nvcc {"-isystem /x/include " * 20} -c /root/.cache/torch_extensions/kw_add/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc {"-isystem /x/include " * 20} -c /root/.cache/torch_extensions/kw_add/cuda.cu -o cuda.cuda.o
/root/.cache/torch_extensions/kw_add/cuda.cu(12): error: identifier "blockIdy" is undefined
      int row = blockIdy.x * blockDim.y + threadIdx.y;
                ^

1 error detected in the compilation of "/root/.cache/torch_extensions/kw_add/cuda.cu".
ninja: build stopped: subcommand failed."""


def test_cuda_build_failure_keeps_the_compiler_error_and_drops_commands():
    verdict = make_verdict(Status.COMPILE_ERROR, "importing the candidate raised RuntimeError: Error building "
                           "extension 'kw_add'", findings=(Finding(code="build-failed", message="build failed",
                                                                   details={"details": NVCC_FAILURE}),))
    text = feedback(attempt(verdict))
    assert 'cuda.cu(12): error: identifier "blockIdy" is undefined' in text
    assert "int row = blockIdy.x" in text and 'File "candidate.py", line 40' in text
    assert "-isystem" not in text and "ninja" not in text and "/root/.cache" not in text


def test_crash_keeps_the_cuda_error_from_stderr():
    stderr = ("terminate called after throwing an instance of 'c10::Error'\n"
              "  what():  CUDA error: an illegal memory access was encountered\n"
              "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)\n")
    verdict = make_verdict(Status.CRASHED, "the candidate's process was killed by SIGABRT during trial 2 (random)",
                           stderr_tail=stderr)
    text = feedback(attempt(verdict))
    assert "illegal memory access" in text and "frame #0" not in text


def test_feedback_respects_max_lines():
    text = feedback(attempt(compile_error()), max_lines=6)
    assert len(text.splitlines()) <= 6
    assert text.splitlines()[0].startswith("Verdict: compile_error")


def test_incorrect_shows_error_statistics():
    text = feedback(attempt(incorrect()))
    assert "max abs error 52.47" in text
    assert "worst at [36, 95]" in text and "got 52.5" in text and "expected 0.02925" in text
    assert "64000 of 64000 elements wrong" in text
    assert "random x5" in text and "right: rewrite" in text
    assert "lean one way" in text  # a systematic error, named as such


@pytest.mark.parametrize(("code", "message"), [
    ("output-caching", "wrong after new values were written into trial 0's input buffers in place: results are "
                       "cached by address or shape"),
    ("side-stream", "work the timed stream did not see: 0.120 ms per call beyond the measured 0.010 ms"),
])
def test_rejected_verdict_names_the_exploit(code, message):
    text = feedback(attempt(rejected(code, message)))
    assert f"`{code}`" in text and message in text
    assert "rejected" in text
    assert "→" in text  # what counts as cheating, said plainly


def test_every_trial_kind_of_the_plan_has_a_hint():
    assert all(_hint("trials", t.kind) for t in plan_trials(0))


def test_a_wrong_sparse_trial_is_explained_as_a_cache_by_sampled_elements():
    trials = tuple(TrialOutcome(index=i, kind="random", seed=i + 1, status="ok") for i in range(5)) + (
        TrialOutcome(index=8, kind="sparse_copy", seed=9, status="wrong", comparisons=(comparison(),)),)
    message = ("wrong on a fresh copy of trial 3's inputs with a few elements changed: the answer is stale for inputs "
               "that differ from an earlier trial's in only a few elements, cached by a few probed elements")
    verdict = make_verdict(Status.REJECTED, f"output-caching: {message}", trials=trials,
                           findings=(Finding(code="output-caching", message=message),))
    text = flat(feedback(attempt(verdict)))
    assert message in text and "The sparse_copy trial: an earlier trial's inputs with a few elements changed" in text
    assert "a few sampled elements" in text


def test_parse_failure_verbatim():
    text = feedback(attempt(None, source=None, failure="no python code block defining class ModelNew in the response"))
    assert "no python code block defining class ModelNew in the response" in text


def test_pass_reports_timing_roofline_kernels_and_instructions():
    text = feedback(attempt(matmul_pass_without_tensor_cores()))
    assert "candidate 2.1000 ms" in text and "eager 0.2050 ms (0.10x)" in text
    assert "9% of the floor" in text
    assert "own _mm x1, 100% of device time" in text
    assert "no tensor-core instructions" in text
    assert "`no-tensor-core`" in text and "HFMA2=4000" in text


# ----------------------------------------------------------------------------------------------------- stages


def test_stages():
    assert choose_stage(None) == "correctness"
    assert choose_stage(attempt(incorrect())) == "correctness"
    assert choose_stage(attempt(matmul_pass_without_tensor_cores())) == "instructions"
    memory_pass = make_verdict(Status.PASSED, "correct", traits=SOFTMAX, percent_of_floor=60.0)
    assert choose_stage(attempt(memory_pass)) == "memory"
    cpu_pass = make_verdict(Status.PASSED, "correct", traits=SOFTMAX)
    assert choose_stage(attempt(cpu_pass)) == "memory"


def test_instruction_stage_asks_for_tensor_cores_and_wgmma_on_sm90a():
    best = attempt(matmul_pass_without_tensor_cores(), label="c003")
    stage = choose_stage(best)
    user = flat(messages(stage=stage, best=best)[1]["content"])
    assert "What to do now: instructions" in user
    assert "wgmma" in user and "HGMMA" in user and "tensor core" in user.lower()
    assert "no-tensor-core" in user
    assert "9% of its achievable roofline floor" in user
    assert "Best verified kernel so far (c003)" in user


def test_memory_stage_mentions_bytes_and_sms():
    best = attempt(make_verdict(Status.PASSED, "correct", traits=SOFTMAX, percent_of_floor=60.0))
    user = flat(messages(stage="memory", best=best)[1]["content"])
    assert "500 KiB" in user and "132 SMs" in user and "128-bit" in user


# ----------------------------------------------------------------------------------------------------- messages


def test_build_messages_contents():
    last = attempt(incorrect(), label="c004")
    system, user = (m["content"] for m in messages(last=last))
    assert PROBLEM.strip() in user and SOURCE.strip() in user
    system, user = flat(system), flat(user)
    assert "class ModelNew(nn.Module)" in system and "`output-caching`" in system and "`side-stream`" in system
    assert "no-own-kernel" in system and "self-contained" in system
    assert "132 SMs" in user and "sm_90a" in user and "227 KiB" in user and "4800 GB/s" in user
    assert "Your last attempt (c004)" in user
    assert "worst at [36, 95]" in user
    assert user.rstrip().endswith("the block is saved and run exactly as written.")


def test_precision_policy_follows_the_policy():
    strict = flat(messages()[0]["content"])
    assert 'input_precision="ieee"' in strict and "TF32 is not allowed" in strict
    tf32 = flat(messages(policy=Policy(allow_tf32=True))[0]["content"])
    assert "TF32 is allowed" in tf32 and "TF32 is not allowed" not in tf32
    reduced = flat(messages(policy=Policy(allow_reduced_precision=True))[0]["content"])
    assert "fp16/bf16 operands are allowed" in reduced
    both = flat(messages(policy=Policy(allow_tf32=True, allow_reduced_precision=True))[0]["content"])
    assert "TF32, fp16 and bf16 operands are all allowed" in both


def test_cuda_language_rules():
    system = flat(messages(language="cuda")[0]["content"])
    assert "load_inline" in system and "-gencode=arch=compute_90a,code=sm_90a" in system
    with pytest.raises(ValueError):
        messages(language="ptx")


def test_reasoning_never_reaches_the_prompt():
    response = "<think>SECRET-REASONING-7 about tiles</think>\nHere it is:\n```python\n" + SOURCE + "```\n"
    last = attempt(incorrect(), source=extract_modelnew(response))
    for m in messages(last=last, best=attempt(matmul_pass_without_tensor_cores())):
        assert "SECRET-REASONING-7" not in m["content"]


def test_last_equal_to_best_shown_once():
    best = attempt(matmul_pass_without_tensor_cores())
    user = messages(best=best, last=best, stage="instructions")[1]["content"]
    assert "Your last attempt" not in user and user.count("class ModelNew(nn.Module):") == 1


def test_last_without_source_shows_the_failure():
    last = attempt(None, source=None, failure="the python code block defining class ModelNew has a syntax error at line 3: invalid syntax")
    user = messages(last=last)[1]["content"]
    assert "No file could be taken from that response." in user
    assert "has a syntax error at line 3: invalid syntax" in user


def test_evolution_messages():
    a = attempt(matmul_pass_without_tensor_cores(), label="A1")
    b = attempt(make_verdict(Status.PASSED, "correct", traits=MATMUL), source=SOURCE.replace("BM=64", "BM=128"),
                label="B2")
    common = dict(problem_source=PROBLEM, problem_name="matmul.py", arch="sm_90a", gpu="H200", policy=Policy(),
                  stage="instructions")
    crossed = flat(build_crossover_messages(a, b, **common)[1]["content"])
    assert "Parent A (A1)" in crossed and "Parent B (B2)" in crossed and "BM=128" in crossed
    mutated = flat(build_mutation_messages(a, **common)[1]["content"])
    assert "The parent kernel (A1)" in mutated and "one substantive change" in mutated


def test_problem_messages():
    system, user = (flat(m["content"]) for m in build_problem_messages("fused RMSNorm + residual add for 8192x4096 bf16"))
    assert "get_init_inputs" in system and "class Model(nn.Module)" in system and "dtype" in system
    assert "fused RMSNorm + residual add for 8192x4096 bf16" in user


def test_hardware_facts_with_ceilings():
    text = hardware_facts("sm_90a", lookup("H200"), {"copy_gbs": 4250.0, "matmul_tflops": {"bf16": 678.0}})
    assert "132 SMs" in text and "60 MiB" in text and "bf16 989.4" in text
    assert "copy 4250 GB/s" in text and "bf16 678" in text
    assert "wgmma" in text and "setmaxnreg" in text and "tma" in text
    ampere = hardware_facts("sm_80")
    assert "cp.async" in ampere and "wgmma" not in ampere


# ----------------------------------------------------------------------------------------------------- templates


def _template_names() -> list[str]:
    folder = resources.files("kernelwright.llm").joinpath("prompts")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".md"))


def test_no_unfilled_placeholders_in_any_prompt():
    best = attempt(matmul_pass_without_tensor_cores(), label="b")
    memory_best = attempt(make_verdict(Status.PASSED, "correct", traits=SOFTMAX, percent_of_floor=90.0))
    built = [
        *messages(), *messages(best=best, last=attempt(compile_error()), stage="instructions", language="cuda"),
        *messages(best=memory_best, stage="memory"), *messages(best=memory_best, stage="instructions"),
        *build_mutation_messages(best, problem_source=PROBLEM, problem_name="p", arch="sm_100a", policy=Policy(),
                                 stage="instructions"),
        *build_crossover_messages(best, memory_best, problem_source=PROBLEM, problem_name="p", arch="sm_80",
                                  policy=Policy(allow_tf32=True), stage="memory"),
        *build_problem_messages("a bf16 softmax"),
    ]
    for message in built:
        assert not re.search(r"\$\{?[A-Za-z_]", message["content"]), message["content"]


def test_every_template_renders_and_missing_values_are_named():
    assert "system.md" in _template_names() and "hints.md" in _template_names()
    for name in _template_names():
        needed = placeholders(name)
        render(name, **{k: "x" for k in needed})
        if needed:
            key = sorted(needed)[0]
            with pytest.raises(PromptTemplateError, match=rf"{name}.*\${key}"):
                render(name, **{k: "x" for k in needed if k != key})
    with pytest.raises(PromptTemplateError, match="missing"):
        render("no_such_template.md")
