"""compute-sanitizer on CUDA C++ candidates whose numbers pass: an out-of-bounds store, a shared-memory race, an
uninitialised read — each rejected with the tool's finding — and the honest kernel clean. Marked `gpu`: run on the
GPU machine through the device tool. (initcheck watches global memory; a shared-memory race is racecheck's.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.records import Status
from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

HERE = Path(__file__).parent
VECTOR_ADD = HERE / "problems" / "vector_add.py"
pytestmark = pytest.mark.gpu

CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
__global__ void {name}_kernel(const float* a, const float* b, const float* scratch, float* out, long n) {{
    __shared__ float tile[256];
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    {body}
}}

void {name}_launch(const float* a, const float* b, const float* scratch, float* out, long n) {{
    {name}_kernel<<<(unsigned)((n + 255) / 256), 256>>>(a, b, scratch, out, n);
}}
"""

CPP_SOURCE = r"""
void {name}_launch(const float* a, const float* b, const float* scratch, float* out, long n);

torch::Tensor {name}(torch::Tensor a, torch::Tensor b) {{
    auto out = torch::empty_like(a);
    auto scratch = torch::empty_like(a);  // never written: initcheck's case reads it
    {name}_launch(a.data_ptr<float>(), b.data_ptr<float>(), scratch.data_ptr<float>(), out.data_ptr<float>(),
                  a.numel());
    return out;
}}
"""

ext = load_inline("kw_{name}", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE, functions=["{name}"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.{name}(a.contiguous(), b.contiguous())
'''

BODIES = {
    # One store past the end: inside the caching allocator's slack, so every trial's numbers pass.
    "oob_store": "if (i < n) { out[i] = a[i] + b[i]; }\n    if (i == n - 1) { out[n] = 0.0f; }",
    # Each thread reads its neighbour's shared slot with no barrier between the write and the read (the value
    # never reaches the output).
    "smem_race": ("tile[threadIdx.x] = i < n ? a[i] : 0.0f;\n"
                  "    float x = tile[(threadIdx.x + 32) % 256];\n"
                  "    if (i < n) { out[i] = a[i] + b[i] + (x == 12345.678f ? 1.0f : 0.0f); }"),
    # Reads memory nothing wrote (a fresh torch.empty); compared, never used.
    "uninit_read": "if (i < n) { out[i] = a[i] + b[i] + (scratch[i] == 12345.678f ? 1.0f : 0.0f); }",
    "honest": "if (i < n) { out[i] = a[i] + b[i]; }",
}


@pytest.fixture
def broken(tmp_path: Path):
    def write(name: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(CANDIDATE.format(name=f"kw_{name}", body=BODIES[name]))
        return path

    return write


@pytest.mark.parametrize(("name", "tool", "code"), [
    ("oob_store", "memcheck", "out-of-bounds"),
    ("smem_race", "racecheck", "shared-memory-race"),
    ("uninit_read", "initcheck", "uninitialized-read"),
])
def test_a_kernel_whose_numbers_pass_is_rejected_by_the_tool(broken, name: str, tool: str, code: str) -> None:
    verdict = verify(VECTOR_ADD, broken(name), VerifyOptions(device="cuda", seed=5, timing=False, sanitize=(tool,)))
    assert verdict.status is Status.REJECTED, verdict.message
    finding = next(f for f in verdict.findings if f.code == code)
    assert f"kw_{name}_kernel" in finding.message
    assert all(t.status == "ok" for t in verdict.trials if t.status != "not-run")  # the numbers passed


def test_the_honest_kernel_is_clean_under_every_tool_by_default(broken) -> None:
    """A CUDA C++ candidate on a GPU gets all four tools without asking."""
    verdict = verify(VECTOR_ADD, broken("honest"), VerifyOptions(device="cuda", seed=5, timing=False))
    assert verdict.status is Status.PASSED, verdict.message
    clean = next(f for f in verdict.findings if f.code == "sanitizer-clean")
    assert all(tool in clean.message for tool in ("memcheck", "racecheck", "initcheck", "synccheck"))
    assert {"sanitize_memcheck", "sanitize_racecheck", "sanitize_initcheck", "sanitize_synccheck"} <= set(
        verdict.phases)
