"""Findings from synthetic kernel summaries: one test per rule, including when it must stay silent."""

from __future__ import annotations

from collections.abc import Callable

from kernelwright.inspect.analysis import KernelSummary
from kernelwright.inspect.expectations import evaluate, normalize_dtype
from kernelwright.records import Policy, ProblemTraits, Severity

Summary = Callable[..., KernelSummary]

MATMUL_FP32 = ProblemTraits(dominant="matmul", compute_dtype="float32")
MATMUL_FP16 = ProblemTraits(dominant="matmul", compute_dtype="float16")
MEMORY_FP32 = ProblemTraits(dominant="memory", compute_dtype="float32")
TF32_PTX = ".visible .entry k(\n{\nmma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}, {%r1}, {%r2}, {%f1};\n}"
SPLIT_PTX = TF32_PTX + "\ncvt.rna.tf32.f32 %r1, %f2;\nsub.f32 %f3, %f2, %f4;\n"


def codes(findings: list) -> dict[str, Severity]:
    return {f.code: f.severity for f in findings}


def test_tf32_shortcut_in_fp32_problem_is_an_error_with_ptx(summary: Summary) -> None:
    k = summary({"HMMA.1688.F32.TF32": 32, "FFMA": 4}, arch="sm_80", ptx=TF32_PTX)
    findings = evaluate([k], MATMUL_FP32, "sm_80")
    assert codes(findings) == {"tf32-in-fp32": Severity.ERROR}
    assert findings[0].details["mma_opcodes"] == {"HMMA.1688.F32.TF32": 32}


def test_tf32_split_emulation_allowed_tf32_and_missing_ptx(summary: Summary) -> None:
    split = summary({"HGMMA.64x64x8.F32.TF32": 12}, ptx=SPLIT_PTX)
    assert codes(evaluate([split], MATMUL_FP32, "sm_90a")) == {"tf32-in-fp32": Severity.NOTE}
    plain = summary({"HGMMA.64x64x8.F32.TF32": 4}, ptx=TF32_PTX)
    allowed = ProblemTraits(dominant="matmul", compute_dtype="float32", policy=Policy(allow_tf32=True))
    assert codes(evaluate([plain], allowed, "sm_90a")) == {"tf32-in-fp32": Severity.NOTE}
    no_ptx = summary({"HGMMA.64x64x8.F32.TF32": 4})
    assert codes(evaluate([no_ptx], MATMUL_FP32, "sm_90a")) == {"tf32-in-fp32": Severity.WARNING}


def test_half_precision_mma_in_fp32_problem(summary: Summary) -> None:
    k = summary({"HGMMA.64x64x16.F32.BF16": 2})
    findings = evaluate([k], MATMUL_FP32, "sm_90a")
    assert codes(findings) == {"fp16-in-fp32": Severity.ERROR}
    assert "bf16" in findings[0].message
    relaxed = ProblemTraits(dominant="matmul", compute_dtype="float32",
                            policy=Policy(allow_reduced_precision=True))
    assert codes(evaluate([k], relaxed, "sm_90a")) == {"fp16-in-fp32": Severity.NOTE}


def test_matching_precision_is_silent(summary: Summary) -> None:
    assert evaluate([summary({"HGMMA.64x64x16.F32": 2})], MATMUL_FP16, "sm_90a") == []
    bf16 = ProblemTraits(dominant="matmul", compute_dtype="bfloat16")
    assert evaluate([summary({"HGMMA.64x64x16.F32.BF16": 2})], bf16, "sm_90a") == []



def test_a_precision_swap_is_named_either_way(summary: Summary) -> None:
    """KNOWN_HACKS #22: the MMA operand type must match the problem's precision claim."""
    bf16 = ProblemTraits(dominant="matmul", compute_dtype="bfloat16")
    fp8 = ProblemTraits(dominant="matmul", compute_dtype="float8_e4m3fn")
    # fp16 operands in a bf16 problem: correct, wider mantissa, narrower range — and not the claimed path
    assert codes(evaluate([summary({"HGMMA.64x64x16.F32": 2})], bf16, "sm_90a")) == {
        "mma-type-mismatch": Severity.WARNING}
    # an fp8 problem on bf16 MMAs: the fp8 tensor cores never ran
    found = evaluate([summary({"HGMMA.64x64x16.F32.BF16": 4})], fp8, "sm_90a")
    assert codes(found) == {"mma-type-mismatch": Severity.WARNING} and "fp8" in found[0].message
    assert evaluate([summary({"QGMMA.64x64x32.F32.E4M3.E4M3": 1})], fp8, "sm_90a") == []
    # bf16 operands in an fp16 problem: 7 bits of mantissa for 10 — a downcast
    assert codes(evaluate([summary({"HGMMA.64x64x16.F32.BF16": 2})], MATMUL_FP16, "sm_90a")) == {
        "low-precision-mma": Severity.ERROR}


def test_fp8_in_a_half_problem(summary: Summary) -> None:
    k = summary({"QGMMA.64x64x32.F32.E4M3.E4M3": 1})
    assert codes(evaluate([k], MATMUL_FP16, "sm_90a")) == {"low-precision-mma": Severity.ERROR}


def test_blackwell_kind_comes_from_ptx(summary: Summary) -> None:
    tf32 = summary({"UTCHMMA": 8}, arch="sm_100a", ptx=".visible .entry k(\n{\ntcgen05.mma.cta_group::1.kind::tf32 [%r1];")
    assert codes(evaluate([tf32], MATMUL_FP32, "sm_100a")) == {"tf32-in-fp32": Severity.ERROR}
    unknown = summary({"UTCHMMA": 8}, arch="sm_100a")
    assert codes(evaluate([unknown], MATMUL_FP32, "sm_100a")) == {"mma-type-unknown": Severity.WARNING}
    f16 = summary({"UTCHMMA": 8}, arch="sm_100a", ptx=".visible .entry k(\n{\ntcgen05.mma.cta_group::1.kind::f16 [%r];")
    assert evaluate([f16], MATMUL_FP16, "sm_100a") == []
    # kind::f16 is f16 or bf16: which one does not matter in an fp32 problem, both are 16-bit operands
    found = evaluate([f16], MATMUL_FP32, "sm_100a")
    assert codes(found) == {"fp16-in-fp32": Severity.ERROR}, found


def test_no_tensor_core_in_a_half_matmul(summary: Summary) -> None:
    k = summary({"FFMA": 512, "LDG.E.128": 8})
    findings = evaluate([k], MATMUL_FP16, "sm_90a")
    assert codes(findings) == {"no-tensor-core": Severity.WARNING}
    assert findings[0].details["fma_opcodes"] == {"k": {"FFMA": 512}}
    # strict fp32: SIMT FFMA is what an honest kernel uses; memory-bound problems need no tensor cores
    assert evaluate([k], MATMUL_FP32, "sm_90a") == []
    assert "no-tensor-core" not in codes(evaluate([k], MEMORY_FP32, "sm_90a"))
    # bf16 has no tensor-core path on Turing
    turing = ProblemTraits(dominant="matmul", compute_dtype="bfloat16")
    assert evaluate([summary({"FFMA": 8}, arch="sm_75")], turing, "sm_75") == []


def test_legacy_mma_on_hopper_and_blackwell(summary: Summary) -> None:
    hmma = summary({"HMMA.16816.F32": 16})
    assert codes(evaluate([hmma], MATMUL_FP16, "sm_90a")) == {"legacy-mma-on-hopper": Severity.WARNING}
    assert evaluate([summary({"HMMA.16816.F32": 16}, arch="sm_80")], MATMUL_FP16, "sm_80") == []
    on_blackwell = summary({"HGMMA.64x64x16.F32": 2}, arch="sm_100a")
    assert codes(evaluate([on_blackwell], MATMUL_FP16, "sm_100a")) == {"legacy-mma-on-blackwell": Severity.WARNING}


def test_spills_with_and_without_a_ptxas_log(summary: Summary) -> None:
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\nptxas info    : Function properties for k\n"
           "    64 bytes stack frame, 64 bytes spill stores, 64 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 0 barriers\n")
    spilled = summary({"STL": 16, "LDL": 16, "FFMA": 100}, ptxas_log=log, stack=64)
    findings = evaluate([spilled], MEMORY_FP32, "sm_90a")
    assert codes(findings)["spills"] is Severity.WARNING
    spill = next(f for f in findings if f.code == "spills")
    assert spill.details["spill_store_bytes"] == 64 and spill.details["local_opcodes"] == {"STL": 16, "LDL": 16}
    bare = summary({"STL": 16, "LDL": 16}, stack=256)
    assert codes(evaluate([bare], MEMORY_FP32, "sm_90a")).get("local-memory") is Severity.NOTE
    local_array = summary({"STL.128": 4, "LDL": 8}, stack=256, ptxas_log=log.replace("64 bytes spill", "0 bytes spill"))
    assert "spills" not in codes(evaluate([local_array], MEMORY_FP32, "sm_90a"))


def test_scalar_global_access_in_memory_bound_problem(summary: Summary) -> None:
    scalar = summary({"LDG.E": 8, "STG.E": 8, "FMUL": 8})
    findings = evaluate([scalar], MEMORY_FP32, "sm_90a")
    assert codes(findings) == {"scalar-global-access": Severity.WARNING}
    assert findings[0].details["global_load_bits"] == {"32": 8}
    assert evaluate([summary({"LDG.E.128": 2, "STG.E.128": 2})], MEMORY_FP32, "sm_90a") == []
    assert evaluate([summary({"LDGSTS.E.BYPASS.128": 2, "STG.E": 2})], MEMORY_FP32, "sm_90a") == []
    assert evaluate([summary({"UTMALDG.2D": 2, "STG.E": 2})], MEMORY_FP32, "sm_90a") == []
    assert "scalar-global-access" not in codes(evaluate([scalar], MATMUL_FP32, "sm_90a"))


def test_low_occupancy_and_cannot_launch(summary: Summary) -> None:
    # 64 threads x 255 registers: 2 warps per block, 8 warps of registers -> 4 blocks -> 8/64 warps
    low = summary({"FFMA": 4, "LDG.E.128": 1}, threads=64, registers=255)
    finding = next(f for f in evaluate([low], MEMORY_FP32, "sm_90a") if f.code == "low-occupancy")
    assert finding.severity is Severity.WARNING and finding.details["occupancy"]["limiting"] == "registers"
    assert "12%" in finding.message or "13%" in finding.message
    matmul = next(f for f in evaluate([low], MATMUL_FP32, "sm_90a") if f.code == "low-occupancy")
    assert matmul.severity is Severity.NOTE
    too_big = summary({"FFMA": 4}, threads=1024, registers=128)
    assert codes(evaluate([too_big], MEMORY_FP32, "sm_90a"))["cannot-launch"] is Severity.ERROR


def test_ptxas_wgmma_messages(summary: Summary) -> None:
    log = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
           "non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline "
           "stage in the function 'k'\n")
    k = summary({"HGMMA.64x64x16.F32": 4}, ptxas_log=log)
    findings = evaluate([k], MATMUL_FP16, "sm_90a")
    assert codes(findings) == {"wgmma-serialized": Severity.WARNING}
    assert "non wgmma instructions defining accumulator registers" in findings[0].message
    assert findings[0].details["warnings"][0]["code"] == "C7515"


def test_no_kernels_no_findings() -> None:
    assert evaluate([], MATMUL_FP16, "sm_90a") == []


def test_normalize_dtype() -> None:
    assert [normalize_dtype(d) for d in ("torch.float32", "bfloat16", "fp16", "float8_e4m3fn", None, "complex64")] == [
        "fp32", "bf16", "fp16", "fp8", None, None]


def test_summary_json_round_trip(summary: Summary) -> None:
    k = summary({"HGMMA.64x64x8.F32.TF32": 4, "LDG.E.128": 2}, ptx=SPLIT_PTX)
    assert KernelSummary.from_json(k.to_json()) == k
