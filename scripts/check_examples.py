"""Check the Triton example candidates under examples/ against their problems' references, on the CPU.

Runs every Triton candidate under the Triton interpreter (TRITON_INTERPRET=1, set here before triton is
imported) on CPU tensors: the problem's own get_inputs at the CPU-sized problems in examples/problems, and
small and odd shapes (1, 7, 127, 1000 columns, longer-than-one-block rows, non-contiguous operands) for each
candidate. Outputs are compared with the problem's Model through torch.testing.assert_close: torch's default
(tight) tolerance for fp32, atol = rtol = 1e-2 for fp16/bf16.

With --nvcc it also compiles the CUDA source of examples/vector_add_cuda.py to a cubin for sm_90a with the
torch wheel's headers (about 50 s), since a CPU torch cannot build the extension itself, and checks that its
SASS has 128-bit loads (LDG.E.128).

Usage: python scripts/check_examples.py [--nvcc] [--only NAME ...]
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton import, including the candidates'

import argparse  # noqa: E402
import ast  # noqa: E402
import importlib.util  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402

import torch  # noqa: E402

from kernelwright.verify.child import launches  # noqa: E402

# The same interpreter accommodations the verifier's child makes: autotuned kernels run one config per case
# (the interpreter cannot benchmark), and bf16 tl.dot operands are widened (the interpreter's bf16 dot is wrong).
_RECORDER = launches.LaunchRecorder()
launches.install_interpreter_autotune(_RECORDER)
launches.install_interpreter_bf16_dot_fix()

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PROBLEMS = ROOT / "problems"
SEED = 0
HALF_TOL = {"atol": 1e-2, "rtol": 1e-2}


@dataclass(frozen=True, kw_only=True)
class Case:
    """One comparison: the problem module, its init args and inputs, and tolerances (None = torch's default)."""

    label: str
    problem: Path
    make_inputs: Callable[[], list]
    init_inputs: tuple = ()
    atol: float | None = None
    rtol: float | None = None


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kw_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def from_problem(problem: Path, label: str, **tol) -> Case:
    module = load(problem)
    return Case(
        label=label,
        problem=problem,
        make_inputs=module.get_inputs,
        init_inputs=tuple(module.get_init_inputs()),
        **tol,
    )


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[], list]:
    return lambda: [torch.randn(*shape, dtype=dtype)]


def softmax_cases() -> list[Case]:
    p = PROBLEMS / "softmax.py"
    cases = [
        Case(label=f"{r}x{c}", problem=p, make_inputs=randn(r, c))
        for r, c in [(1, 1), (7, 7), (3, 127), (5, 1000), (2, 8192), (3, 20000)]
    ]

    def with_neg_inf() -> list:
        x = torch.randn(4, 300)
        x[0, ::2] = float("-inf")  # masked logits, as attention produces
        x[1, :150] = float("-inf")
        return [x]

    cases += [
        Case(label="2x3x1000 (3-D)", problem=p, make_inputs=randn(2, 3, 1000)),
        Case(label="4x300 with -inf", problem=p, make_inputs=with_neg_inf),
        Case(label="6x1000 fp16", problem=p, make_inputs=randn(6, 1000, dtype=torch.float16), **HALF_TOL),
        Case(label="3x20000 bf16", problem=p, make_inputs=randn(3, 20000, dtype=torch.bfloat16), **HALF_TOL),
        from_problem(EXAMPLES / "problems" / "softmax_small.py", "softmax_small (64x1000)"),
    ]
    return cases


def matmul_cases() -> list[Case]:
    p = PROBLEMS / "matmul.py"

    def mk(m: int, k: int, n: int, dtype=torch.float16, transpose_b: bool = False) -> Callable[[], list]:
        def make() -> list:
            a = torch.randn(m, k, dtype=dtype)
            b = torch.randn(n, k, dtype=dtype).t() if transpose_b else torch.randn(k, n, dtype=dtype)
            return [a, b]

        return make

    cases = [
        Case(label=f"{m}x{k}x{n} fp16", problem=p, make_inputs=mk(m, k, n), **HALF_TOL)
        for m, k, n in [(1, 1, 1), (7, 7, 7), (127, 127, 127), (33, 1000, 65), (64, 64, 64)]
    ]
    cases += [
        Case(
            label="100x70x90 fp16, b transposed",
            problem=p,
            make_inputs=mk(100, 70, 90, transpose_b=True),
            **HALF_TOL,
        ),
        Case(label="127x96x65 bf16", problem=p, make_inputs=mk(127, 96, 65, torch.bfloat16), **HALF_TOL),
        from_problem(EXAMPLES / "problems" / "matmul_small.py", "matmul_small (128x96 @ 96x80)", **HALF_TOL),
    ]
    return cases


def vector_add_cases() -> list[Case]:
    p = PROBLEMS / "vector_add.py"

    def two(*shape: int) -> Callable[[], list]:
        return lambda: [torch.randn(*shape), torch.randn(*shape)]

    return [
        Case(label="x".join(map(str, s)), problem=p, make_inputs=two(*s))
        for s in [(1,), (7,), (127,), (1000,), (4097,), (100_003,), (3, 5, 7)]
    ]


def layernorm_cases() -> list[Case]:
    p = PROBLEMS / "layernorm.py"

    def shifted(r: int, c: int) -> Callable[[], list]:
        return lambda: [torch.randn(r, c) * 3.0 + 1.0]

    return [
        Case(label=f"{r}x{c}", problem=p, make_inputs=shifted(r, c), init_inputs=(c,))
        for r, c in [(1, 1), (7, 7), (3, 127), (5, 1000), (2, 8192), (3, 20000)]
    ]


def gelu_mul_cases() -> list[Case]:
    p = PROBLEMS / "gelu_mul.py"

    def two(*shape: int, dtype=torch.float32) -> Callable[[], list]:
        return lambda: [torch.randn(*shape, dtype=dtype) * 3.0, torch.randn(*shape, dtype=dtype)]

    cases = [
        Case(label="x".join(map(str, s)), problem=p, make_inputs=two(*s))
        for s in [(1,), (7,), (127,), (1000,), (33, 1000), (4, 4096)]
    ]
    cases.append(
        Case(label="33x1000 fp16", problem=p, make_inputs=two(33, 1000, dtype=torch.float16), **HALF_TOL)
    )
    return cases


CANDIDATES: dict[str, Callable[[], list[Case]]] = {
    "softmax_triton.py": softmax_cases,
    "matmul_triton.py": matmul_cases,
    "vector_add_triton.py": vector_add_cases,
    "layernorm_triton.py": layernorm_cases,
    "gelu_mul_triton.py": gelu_mul_cases,
}


def run_case(candidate: ModuleType, case: Case) -> str | None:
    """None when the candidate matches the reference, else the mismatch message."""
    _RECORDER.trial_index += 1  # rotate autotune configs across cases
    problem = load(case.problem)
    torch.manual_seed(SEED)
    model = problem.Model(*case.init_inputs)
    torch.manual_seed(SEED)
    model_new = candidate.ModelNew(*case.init_inputs)
    ref_state, new_state = model.state_dict(), model_new.state_dict()
    if ref_state.keys() != new_state.keys() or any(
        not torch.equal(ref_state[k], new_state[k]) for k in ref_state
    ):
        return "ModelNew's parameters differ from Model's under the same seed"
    torch.manual_seed(SEED)
    inputs = case.make_inputs()
    before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        expected = model(*inputs)
        actual = model_new(*inputs)
    if any(isinstance(x, torch.Tensor) and not torch.equal(x, y) for x, y in zip(inputs, before)):
        return "candidate mutated an input"
    if type(actual) is not torch.Tensor:
        return f"candidate returned {type(actual).__name__}, not a plain torch.Tensor"
    try:
        torch.testing.assert_close(actual, expected, atol=case.atol, rtol=case.rtol, equal_nan=True)
    except AssertionError as error:
        return " ".join(str(error).split())[:300]
    return None


def compile_cuda_example(path: Path) -> str | None:
    """Compile the module's CUDA_SOURCE with nvcc for sm_90a; None on success, else the error text."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return "nvcc not found"
    tree = ast.parse(path.read_text())
    sources = {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    if "CUDA_SOURCE" not in sources:
        return "no CUDA_SOURCE string constant"
    torch_include = Path(torch.__file__).parent / "include"
    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        source.write_text(sources["CUDA_SOURCE"])
        # A CPU torch wheel lacks this one header that CUDA builds generate (c10/cuda/CUDAMacros.h includes
        # it); a CUDA wheel's copy holds just this define.
        macros = Path(tmp) / "stub" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        macros.parent.mkdir(parents=True)
        macros.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        cmd = [
            nvcc,
            "-std=c++17",
            "-O3",
            "-gencode=arch=compute_90a,code=sm_90a",
            "-cubin",
            "-I",
            str(Path(tmp) / "stub"),
            "-I",
            str(torch_include),
            "-I",
            str(torch_include / "torch" / "csrc" / "api" / "include"),
            "-I",
            sysconfig.get_paths()["include"],
            "-o",
            str(cubin),
            str(source),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            return (done.stderr or done.stdout).strip()[-2000:]
        # The float4 path must really be 128-bit: look for LDG.E.128 with Triton's bundled cuobjdump.
        cuobjdump = Path(importlib.util.find_spec("triton").origin).parent / "backends/nvidia/bin/cuobjdump"
        if cuobjdump.exists():
            sass = subprocess.run(
                [str(cuobjdump), "-sass", str(cubin)], capture_output=True, text=True
            ).stdout
            if "LDG.E.128" not in sass:
                return "compiled, but the SASS has no LDG.E.128 (the float4 loads were not vectorised)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nvcc", action="store_true", help="also compile examples/vector_add_cuda.py's kernel"
    )
    parser.add_argument("--only", nargs="*", default=[], help="candidate file names to check")
    args = parser.parse_args(argv)
    failures = total = 0
    for name, make_cases in CANDIDATES.items():
        if args.only and name not in args.only and Path(name).stem not in args.only:
            continue
        candidate = load(EXAMPLES / name)
        for case in make_cases():
            total += 1
            start = time.perf_counter()
            try:
                problem_text = run_case(candidate, case)
            except Exception as error:  # a crashing case is a failed row, not a crashed checker
                problem_text = f"{type(error).__name__}: {error}"
            failures += problem_text is not None
            status = "ok" if problem_text is None else f"FAIL: {problem_text}"
            print(f"{name:22} {case.label:34} {time.perf_counter() - start:6.2f}s  {status}", flush=True)
    if args.nvcc:
        total += 1
        start = time.perf_counter()
        error = compile_cuda_example(EXAMPLES / "vector_add_cuda.py")
        failures += error is not None
        status = "ok (cubin for sm_90a)" if error is None else f"FAIL: {error}"
        print(
            f"{'vector_add_cuda.py':22} {'nvcc -cubin sm_90a':34} {time.perf_counter() - start:6.2f}s  {status}"
        )
    print(f"\n{total - failures}/{total} checks pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
