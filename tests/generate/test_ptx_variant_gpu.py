"""A PTX-rewriting candidate on a GPU (generate/ptx_variant.py): in one process, beside the plain file, each kernel
runs the code its own file asks for — the rewritten kernel's compiled PTX carries the qualifiers, the plain one's
does not, whichever compiles first (Triton 3.6 keeps the stages hook out of its cache key) — and both compute the
same bits."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelwright.generate.ptx_variant import with_ptx_rewrite

pytestmark = pytest.mark.gpu

EXAMPLE = Path(__file__).parents[2] / "examples" / "softmax_triton.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("rewritten_first", [True, False])
def test_each_file_runs_its_own_code_and_the_same_bits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      rewritten_first: bool) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))  # cold: the first compile writes the cache
    path = tmp_path / "softmax_rewritten.py"
    path.write_text(with_ptx_rewrite(EXAMPLE.read_text(), ["no-allocate-loads", "streaming-stores"]))
    tag = "a" if rewritten_first else "b"
    modules = [_load(path, f"kw_rw_{tag}"), _load(EXAMPLE, f"kw_plain_{tag}")]
    if not rewritten_first:
        modules.reverse()
    x = torch.randn(512, 3000, device="cuda")
    outputs = {}
    for module in modules:
        rewritten = hasattr(module, "_PTX_PASSES")
        outputs[rewritten] = module.ModelNew()(x)
        torch.cuda.synchronize()
        kernel = module._softmax_one_pass_kernel
        (compiled,) = [k for cache in kernel.device_caches.values() for k in cache[0].values()]
        loads = [line for line in compiled.asm["ptx"].splitlines() if "ld.global" in line]
        assert loads and all(("L1::no_allocate" in line) == rewritten for line in loads), (rewritten, loads[:2])
    assert torch.equal(outputs[True], outputs[False])
    torch.testing.assert_close(outputs[True], torch.softmax(x, dim=-1))
