"""A candidate that rewrites its kernels' PTX (generate/ptx_variant.py): the rewrite reaches the PTX Triton hands to
ptxas for the file's own kernels only, the compiled code differs from the plain file's, the file computes the same
thing (here under the interpreter), and a bad request is a clear error."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelwright.generate.ptx_variant import MARK, rewrite_passes, with_ptx_rewrite
from kernelwright.problem.files import read_candidate

from .conftest import SCRIPT_LOADER

EXAMPLE = Path(__file__).parents[2] / "examples" / "softmax_triton.py"
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _memory_lines(ptx: str) -> list[str]:
    return [line.strip() for line in ptx.splitlines() if "ld.global" in line or "st.global" in line]


@pytest.fixture
def variant(tmp_path: Path) -> Path:
    path = tmp_path / "softmax_rewritten.py"
    path.write_text(with_ptx_rewrite(EXAMPLE.read_text(), ["no-allocate-loads", "streaming-stores"]))
    return path


@needs_ptxas
def test_the_rewrite_reaches_the_compiled_kernel_and_only_its_own(variant: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.inspect.triton_compile import compile_for_arch

    cache = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))

    rewritten, plain = _load(variant, "kw_ptx_variant"), _load(EXAMPLE, "kw_ptx_plain")
    x, y = torch.empty(64, 1024), torch.empty(64, 1024)
    args, kwargs = (x, y, 1024, 1024, 1024), {"BLOCK": 1024}
    new = compile_for_arch(rewritten._softmax_one_pass_kernel, args, kwargs, "sm_90a")
    old = compile_for_arch(plain._softmax_one_pass_kernel, args, kwargs, "sm_90a")
    assert all(".L1::no_allocate" in line for line in _memory_lines(new.ptx) if "ld.global" in line)
    assert all("st.global.cs" in line for line in _memory_lines(new.ptx) if "st.global" in line)
    assert not any("no_allocate" in line or ".cs." in line for line in _memory_lines(old.ptx))  # no leak
    assert new.cubin != old.cubin
    # Compiled again after the rewritten one, the plain kernel is still plain (the hook is the launch's only).
    assert compile_for_arch(plain._softmax_one_pass_kernel, args, kwargs, "sm_90a").ptx == old.ptx
    # The rewrite's compiles go to a Triton cache of its own (Triton 3.6 keeps the hook out of its cache key, and
    # the two kernels share a source): the plain cache holds no rewritten PTX, the rewrite's no plain one.
    own = list((cache / "kernelwright-ptx").glob("*/*/*.ptx"))
    plain_ptx = [p for p in cache.glob("*/*.ptx")]
    assert own and plain_ptx
    assert all("no_allocate" in p.read_text() for p in own)
    assert not any("no_allocate" in p.read_text() for p in plain_ptx)


def test_the_rewritten_file_computes_the_same_and_says_what_it_does(variant: Path) -> None:
    # Under the interpreter (a process of its own: TRITON_INTERPRET is read when triton is imported).
    script = SCRIPT_LOADER + f"""
module = load({str(variant)!r}, "kw_ptx_variant_run")
x = torch.randn(8, 300)
torch.testing.assert_close(module.ModelNew()(x), torch.softmax(x, dim=-1))
print("same")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.stdout.strip() == "same", done.stderr[-2000:]
    source = variant.read_text()
    assert rewrite_passes(source) == ("no-allocate-loads", "streaming-stores") and rewrite_passes("x = 1") == ()
    assert read_candidate(variant).rewrites_ptx and not read_candidate(EXAMPLE).rewrites_ptx  # sanitizer default


def test_bad_requests_are_clear_errors(variant: Path) -> None:
    with pytest.raises(ValueError, match="no PTX rewrite prefetch: use one of no-allocate-loads"):
        with_ptx_rewrite(EXAMPLE.read_text(), ["prefetch"])
    with pytest.raises(ValueError, match="no PTX rewrite"):
        with_ptx_rewrite(EXAMPLE.read_text(), [])
    with pytest.raises(ValueError, match="already rewrites its PTX"):
        with_ptx_rewrite(variant.read_text(), ["evict-first-loads"])
    assert variant.read_text().count(MARK) == 1
