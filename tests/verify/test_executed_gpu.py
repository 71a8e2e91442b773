"""Executed-instruction evidence on a real GPU under Nsight Compute (issue 44): a kernel whose MMA sits on a branch
never taken gets ``dead-instruction-claim``; an honest bf16 GEMM shows its MMAs executed; a 3xTF32 fp32 GEMM shows
TF32 MMAs executed and no precision finding. Marked `gpu`: run through the device tool (docs/gpu-validation.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelwright.records import Status
from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

pytestmark = pytest.mark.gpu

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


M, N, K = 512, 512, 512


def get_inputs():
    return [torch.randn(M, K, dtype=torch.{dtype}), torch.randn(K, N, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""

CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, flag_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    use_dot = tl.load(flag_ptr)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if use_dot != 0:
            acc += tl.dot(a, b, input_precision=PRECISION)
        else:
            # Outer products, one k at a time: no reduction for Triton to turn into a dot (its combine pass rewrites
            # sum(a[:, :, None] * b[None, :, :], 1) into tl.dot, and run 65 then executed that MMA on both branches).
            for j in range(0, BLOCK_K):
                kj = k + j + tl.zeros_like(rm)
                a_col = tl.load(a_ptr + rm * K + kj, mask=(rm < M) & (kj < K), other=0.0)
                b_row = tl.load(b_ptr + kj * N + rn, mask=(rn < N) & (kj < K), other=0.0)
                acc += a_col.to(tl.float32)[:, None] * b_row.to(tl.float32)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        flag = torch.full((1,), {use_dot}, device=a.device, dtype=torch.int32)
        grid = (triton.cdiv(M, {block}), triton.cdiv(N, {block}))  # any shape: the verifier tries a second one
        matmul_kernel[grid](a, b, c, flag, M, N, K, BLOCK_M={block}, BLOCK_N={block}, BLOCK_K=16,
                            PRECISION="{precision}")
        return c
"""


def _verify(tmp_path: Path, *, dtype: str, use_dot: int, block: int, precision: str = "ieee"):
    problem = tmp_path / f"matmul_{dtype}.py"
    problem.write_text(textwrap.dedent(PROBLEM.format(dtype=dtype)))
    candidate = tmp_path / f"matmul_{dtype}_{use_dot}_{precision}.py"
    candidate.write_text(CANDIDATE.format(use_dot=use_dot, block=block, precision=precision))
    verdict = verify(problem, candidate, VerifyOptions(device="cuda", seed=5, compile_baseline=False))
    print(f"\nEXECUTED {candidate.name}: {verdict.status} {verdict.message} | phase "
          f"{verdict.phases.get('executed')} s | {verdict.executed.to_json() if verdict.executed else None} | "
          f"{[(f.code, f.message) for f in verdict.findings]}")
    return verdict


def test_an_mma_on_a_branch_never_taken_is_a_dead_instruction_claim(tmp_path: Path) -> None:
    verdict = _verify(tmp_path, dtype="bfloat16", use_dot=0, block=32)
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.executed is not None and verdict.executed.ran, verdict.executed
    assert verdict.has_finding("dead-instruction-claim"), verdict.findings
    assert verdict.executed.classes()["tensor_mma"]["executed"] == 0


def test_an_honest_bf16_gemm_shows_its_mmas_executed(tmp_path: Path) -> None:
    verdict = _verify(tmp_path, dtype="bfloat16", use_dot=1, block=64)
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.executed is not None and verdict.executed.ran, verdict.executed
    assert verdict.executed.classes()["tensor_mma"]["executed"] > 0
    own = [k for k in verdict.executed.kernels if k.own and k.launches]
    assert own and "bf16" in own[0].mma_types, own
    assert not verdict.has_finding("dead-instruction-claim")


def test_a_3xtf32_fp32_gemm_shows_tf32_mmas_executed_and_no_precision_finding(tmp_path: Path) -> None:
    verdict = _verify(tmp_path, dtype="float32", use_dot=1, block=64, precision="tf32x3")
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.executed is not None and verdict.executed.ran, verdict.executed
    own = [k for k in verdict.executed.kernels if k.own and k.launches]
    assert own and own[0].mma_types.get("tf32", 0) > 0, own
    assert not verdict.has_finding("executed-precision-below-problem")
    assert not verdict.has_finding("dead-instruction-claim")
