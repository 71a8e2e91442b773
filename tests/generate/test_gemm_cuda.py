"""The CUDA C++ back end of the GEMM family: which groups get CUDA configurations on which arch, that the sources
compile with nvcc for sm_90a and sm_80 with the instructions they claim in the PTX, that the launcher, the parameter
order and the C++ epilogue compute what PyTorch does (the whole candidate run on the CPU with the device kernel
replaced by a host loop over the same parameters), and the build helper's handling of a failed or interrupted build.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from kernelwright.generate.cuda import on_backend
from kernelwright.generate.cuda.build import build_source, extension_name
from kernelwright.generate.cuda.gemm import gemm_source, params_fill
from kernelwright.generate.families.gemm import GemmFamily
from kernelwright.generate.families.gemm.cuda import cuda_supported
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan
from kernelwright.search.candidates import template_builder

from .conftest import write_problem

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

LINEAR_GELU = """
    class Model(nn.Module):
        def __init__(self, k, n):
            super().__init__()
            self.linear = nn.Linear(k, n, dtype=torch.bfloat16)

        def forward(self, x):
            return F.gelu(self.linear(x))

    def get_inputs():
        return [torch.randn(200, 72, dtype=torch.bfloat16)]

    def get_init_inputs():
        return [72, 136]
"""

# A @ B (B row-major: copied K-major by the launcher) scaled, plus a per-row scale (a column operand) and a tile.
MATMUL_MIX = """
    class Model(nn.Module):
        def forward(self, a, b, scale, residual):
            return torch.clamp(torch.matmul(a, b) * 0.5 * scale + residual, min=-1.0)

    def get_inputs():
        return [torch.randn(130, 50, dtype=torch.float16), torch.randn(50, 70, dtype=torch.float16),
                torch.randn(130, 1, dtype=torch.float16), torch.randn(130, 70, dtype=torch.float16)]

    def get_init_inputs():
        return []
"""


def _space(tmp_path: Path, name: str, body: str, arch: str) -> list[dict]:
    graph = capture(write_problem(tmp_path, name, body))
    the_plan = plan(graph, [GemmFamily()])
    return GemmFamily().space(graph, the_plan.groups[0], arch)


def _backends(space: list[dict]) -> list[str]:
    return [f"{c.get('backend', 'triton')}:{c.get('variant', 'pointer')}" for c in space]


def test_half_gemm_gets_cuda_configs_after_the_triton_ones_per_arch(tmp_path: Path) -> None:
    hopper = _backends(_space(tmp_path, "lg", LINEAR_GELU, "sm_90a"))
    assert hopper[-3:] == ["cuda:wgmma", "cuda:wgmma", "cuda:mma_sync"]
    assert all(b.startswith("triton:") for b in hopper[:-3]) and hopper[0].startswith("triton:")
    ampere = _backends(_space(tmp_path, "lg", LINEAR_GELU, "sm_80"))
    assert [b for b in ampere if b.startswith("cuda:")] == ["cuda:mma_sync"]  # no wgmma without sm_90a
    turing = _backends(_space(tmp_path, "lg", LINEAR_GELU, "sm_75"))
    assert not [b for b in turing if b.startswith("cuda:")]  # no cp.async, no bf16 mma


def test_groups_outside_the_cuda_kernels_say_why(tmp_path: Path) -> None:
    fp32 = write_problem(tmp_path, "fp32", LINEAR_GELU.replace(", dtype=torch.bfloat16", ""))
    bmm = write_problem(tmp_path, "bmm", """
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.bmm(a, b)

        def get_inputs():
            return [torch.randn(3, 64, 32, dtype=torch.float16), torch.randn(3, 32, 48, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """)
    reasons = {}
    for path in (fp32, bmm):
        graph = capture(path)
        group = plan(graph, [GemmFamily()]).groups[0]
        reasons[path.stem] = cuda_supported(graph, group)
        assert not [c for c in GemmFamily().space(graph, group, "sm_90a") if c.get("backend") == "cuda"]
    assert "bfloat16 or float16" in reasons["fp32"]
    assert "batched" in reasons["bmm"]


def test_backend_choice_keeps_the_problem_covered() -> None:
    triton = [{"BLOCK_M": 64}, {"BLOCK_M": 128}]
    cuda = [{"backend": "cuda", "variant": "wgmma"}]
    assert on_backend(triton + cuda, "all") == triton + cuda
    assert on_backend(triton + cuda, "triton") == triton
    assert on_backend(triton + cuda, "cuda") == cuda
    assert on_backend(triton, "cuda") == triton  # a family without CUDA kernels keeps its Triton ones
    with pytest.raises(ValueError, match="use one of triton, cuda, all"):
        on_backend(triton, "ptx")


def test_backend_setting_rejects_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.config import config
    from kernelwright.errors import ConfigError

    monkeypatch.setenv("KERNELWRIGHT_BACKEND", "ptx")
    with pytest.raises(ConfigError, match="KERNELWRIGHT_BACKEND"):
        _ = config.backend


def _candidate(tmp_path: Path, name: str, body: str, index: int) -> Path:
    problem = write_problem(tmp_path, name, body)
    _, builder = template_builder(problem, tmp_path / f"{name}-candidates", arch="sm_90a", backend="cuda")
    return builder.build((index,), f"cuda {index}").path


def _sources(candidate: Path) -> tuple[str, str, str]:
    text = candidate.read_text()
    cpp = re.search(r"_CPP = r'''\n(.*?)'''", text, re.S).group(1)
    cuda = re.search(r"_CUDA = r'''\n(.*?)'''", text, re.S).group(1)
    arch_list = re.search(r"_build\('kw_[0-9a-f]{16}', \w+, \w+, '([^']+)'\)", text).group(1)
    return cpp, cuda, arch_list


@needs_nvcc
@pytest.mark.parametrize(("index", "arch", "claims"), [
    (0, "sm_90a", ("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "cp.async.bulk.tensor.2d",
                   "mbarrier.try_wait.parity", "setmaxnreg.inc", "setmaxnreg.dec")),
    (1, "sm_90a", ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "mbarrier.arrive.expect_tx")),
    (2, "sm_80", ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "cp.async.cg.shared.global",
                  "ldmatrix.sync.aligned.m8n8.x4")),
    (2, "sm_90", ("mma.sync.aligned.m16n8k16",)),
])
def test_cuda_sources_compile_with_the_instructions_they_claim(tmp_path: Path, index: int, arch: str,
                                                               claims: tuple[str, ...]) -> None:
    from kernelwright.inspect.cuda_compile import compile_cuda

    _, cuda, arch_list = _sources(_candidate(tmp_path, "lg", LINEAR_GELU, index))
    assert arch_list == ("9.0a" if index < 2 else "8.0;9.0")
    flags = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__")
    result = compile_cuda(cuda, arch=arch, extra_flags=flags, torch_headers=False)
    assert result.ok, result.full_log[-2000:]
    for claim in claims:
        assert claim in result.ptx, claim
    assert "spill" not in result.full_log or " 0 bytes spill stores" in result.full_log


# A host stand-in for the device kernel: the same parameters (filled as the binding fills them), a plain fp32
# dot product, then the candidate's own epilogue, which is host code too.
_HOST_RUN = """
extern "C" void host_run(long long a, long long b, long long M, long long N, long long K, long long lda,
                         long long ldb, const long long* pointers, const long long* ints) {
  @ID@_Params p;
@FILL@
  p.M = M;
  p.N = N;
  const @ID@_elem* A = reinterpret_cast<const @ID@_elem*>(a);
  const @ID@_elem* B = reinterpret_cast<const @ID@_elem*>(b);
  for (long long m = 0; m < M; ++m)
    for (long long n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (long long k = 0; k < K; ++k) acc += @WIDEN@(A[m * lda + k]) * @WIDEN@(B[n * ldb + k]);
      @ID@_epilogue(p, m, n, acc);
    }
}
"""


@needs_nvcc
@pytest.mark.parametrize(("name", "body"), [("lg", LINEAR_GELU), pytest.param("mix", MATMUL_MIX, marks=pytest.mark.slow)])
def test_launcher_parameters_and_epilogue_match_pytorch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        name: str, body: str) -> None:
    """The candidate's launcher runs on the CPU (its K-major copy under the Triton interpreter) with the extension
    replaced by a host build of the same CUDA source whose kernel is a host loop: what reaches the kernel (pointers,
    strides, K padding, the parameter order) and what the C++ epilogue makes of it must agree with the problem's
    own forward."""
    candidate = _candidate(tmp_path, name, body, 2)
    cpp, cuda, _ = _sources(candidate)
    ident = re.search(r"struct (\w+)_Params", cuda).group(1)
    fields = re.search(r"struct \w+_Params \{\n(.*?)\n  long long M, N;", cuda, re.S).group(1)
    pointers = re.findall(r"void\* (\w+);", fields)
    ints = re.findall(r"long long (\w+);", fields)
    widen = "__bfloat162float" if "__nv_bfloat16 " + ident + "_elem" in cuda else "__half2float"
    harness = cuda + _HOST_RUN.replace("@ID@", ident).replace("@FILL@", params_fill(pointers, ints)).replace(
        "@WIDEN@", widen)
    (tmp_path / "host.cu").write_text(harness)
    library = tmp_path / "host.so"
    built = subprocess.run(["nvcc", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_80", "-o",
                            str(library), str(tmp_path / "host.cu")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    host = ctypes.CDLL(str(library))

    class Module:
        calls = 0

        def run(self, a, b, m, n, k, lda, ldb, ptrs, strides, sms, stream):
            Module.calls += 1
            assert k % 16 == 0 and lda % 16 == 0 and ldb % 16 == 0  # the kernels' 16-byte rows, K padded
            host.host_run(*(ctypes.c_longlong(v) for v in (a, b, m, n, k, lda, ldb)),
                          (ctypes.c_longlong * max(1, len(ptrs)))(*ptrs),
                          (ctypes.c_longlong * max(1, len(strides)))(*strides))

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the K-major copy is a Triton kernel: the interpreter runs it
    spec = importlib.util.spec_from_file_location(f"cand_{name}", candidate)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.__dict__[f"{ident}_build"] = lambda *args: Module()
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    problem = importlib.util.spec_from_file_location(f"prob_{name}", tmp_path / f"{name}.py")
    reference = importlib.util.module_from_spec(problem)
    problem.loader.exec_module(reference)
    torch.manual_seed(0)
    model = reference.Model(*reference.get_init_inputs())
    inputs = reference.get_inputs()
    new = module.ModelNew(*reference.get_init_inputs())
    new.load_state_dict(model.state_dict())
    got = new(*inputs)
    want = model.double()(*(t.double() for t in inputs))
    assert Module.calls == 1
    assert got.dtype == inputs[0].dtype and got.shape == want.shape
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2)


def _build_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load_inline) -> object:
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(cpp_extension, "load_inline", load_inline)
    namespace: dict = {}
    exec(build_source("g0"), namespace)  # noqa: S102 - the generated helper, as a candidate file holds it
    return namespace["g0_build"]


def test_build_error_is_one_line_with_the_compilers_first_error(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(name, **kwargs):
        raise RuntimeError("Error building extension 'kw_x': [1/3] nvcc ...\n"
                           "/tmp/kw_x/cuda.cu(41): error: identifier \"wgmma_bad\" is undefined\n"
                           "1 error detected in the compilation of \"cuda.cu\".")

    build = _build_function(tmp_path, monkeypatch, failing)
    with pytest.raises(RuntimeError) as caught:
        build("kw_0123456789abcdef", "cpp", "cuda", "9.0a")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("CUDA extension kw_0123456789abcdef does not build for 9.0a:")
    assert 'identifier "wgmma_bad" is undefined' in message


def test_build_clears_a_stale_lock_sets_the_archs_and_builds_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    def fake(name, *, build_directory, **kwargs):
        seen.append((name, build_directory, os.environ.get("TORCH_CUDA_ARCH_LIST"),
                     os.path.exists(os.path.join(build_directory, "lock"))))
        return types.SimpleNamespace(run=lambda *a: None)

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "7.0")
    build = _build_function(tmp_path, monkeypatch, fake)
    lock = tmp_path / "ext" / "kw_a" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))  # a build interrupted an hour ago
    first = build("kw_a", "cpp", "cuda", "9.0a")
    assert build("kw_a", "cpp", "cuda", "9.0a") is first  # once per process
    assert seen == [("kw_a", str(lock.parent), "9.0a", False)]
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "7.0"  # restored


def test_extension_name_follows_the_sources() -> None:
    a = extension_name("cpp", "cuda", "9.0a")
    assert re.fullmatch(r"kw_[0-9a-f]{16}", a)
    assert extension_name("cpp", "cuda", "9.0a") == a
    assert extension_name("cpp", "cuda2", "9.0a") != a
    assert extension_name("cpp", "cuda", "8.0;9.0") != a


def test_wgmma_source_rejects_what_it_cannot_build() -> None:
    with pytest.raises(ValueError, match="128 rows"):
        gemm_source("g", variant="wgmma", dtype=torch.bfloat16, tile=(64, 128, 4, 8), pointers=[], ints=[],
                    epilogue=[])
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        gemm_source("g", variant="mma_sync", dtype=torch.float32, tile=(128, 128, 4, 8), pointers=[], ints=[],
                    epilogue=[])
    with pytest.raises(ValueError, match="use one of mma_sync, wgmma"):
        gemm_source("g", variant="hmma", dtype=torch.bfloat16, tile=(128, 128, 4, 8), pointers=[], ints=[],
                    epilogue=[])


def test_on_a_cpu_the_verifier_compiles_a_cuda_candidate_for_inspection(tmp_path: Path) -> None:
    """Without a GPU a CUDA candidate cannot run: the verifier says so (unsupported), after compiling it for
    sm_90a and reading its instructions (wgmma, TMA)."""
    from kernelwright.verify.records import VerifyOptions
    from kernelwright.verify.verifier import verify

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    candidate = _candidate(tmp_path, "lg", LINEAR_GELU, 0)
    verdict = verify(tmp_path / "lg.py", candidate, VerifyOptions(device="cpu"))
    assert verdict.status.value == "unsupported", verdict.message
    assert "cannot run on a machine without a GPU" in verdict.message
    opcodes = {op for k in verdict.instructions for op in k.histogram_by_opcode}
    assert any(op.startswith("HGMMA") for op in opcodes), sorted(opcodes)[:40]
    assert any(op.startswith("UTMALDG") for op in opcodes), sorted(opcodes)[:40]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
