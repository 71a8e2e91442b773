"""PTX rewrite passes (issue 30 item 2): each adds its qualifier only where the instruction has none of its kind,
the result assembles with ptxas for sm_90a and sm_80, and the SASS shows the change (inspect --rewrite/--diff)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from kernelwright.cli import main
from kernelwright.inspect.ptx_rewrite import PASSES, rewrite_all, rewrite_ptx

sys.path.insert(0, str(Path(__file__).parent))
import triton_kernels as K  # noqa: E402

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")

SNIPPET = """\
.version 8.0
.target sm_90a
// ld.global in a comment stays
\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
\tld.global.L1::evict_last.b32 %r5, [ %rd2 ];
\tld.global.nc.f32 %f1, [ %rd3 ];
\t@%p1 st.global.v4.b32 [ %rd4 + 0 ], { %r1, %r2, %r3, %r4 };
\tst.global.cg.b32 [ %rd5 ], %r5;
"""


def test_passes_add_only_missing_qualifiers() -> None:
    loads = rewrite_ptx(SNIPPET, "no-allocate-loads")
    assert loads.changed == 1
    assert "@%p1 ld.global.L1::no_allocate.v4.b32 { %r1" in loads.ptx
    assert "ld.global.L1::evict_last.b32" in loads.ptx and "ld.global.nc.f32" in loads.ptx  # kept as written
    assert "// ld.global in a comment stays" in loads.ptx
    stores = rewrite_ptx(SNIPPET, "streaming-stores")
    assert stores.changed == 1 and "@%p1 st.global.cs.v4.b32" in stores.ptx and "st.global.cg.b32" in stores.ptx
    both = rewrite_all(SNIPPET, ["no-allocate-loads", "evict-first-loads", "streaming-stores"])
    assert both.changed == 2 and "evict_first" not in both.ptx  # the first load qualifier wins
    with pytest.raises(ValueError, match="use one of no-allocate-loads"):
        rewrite_ptx(SNIPPET, "prefetch")


@needs_ptxas
@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_assembles_and_shows_in_the_sass(tmp_path: Path, name: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from kernelwright.inspect.triton_compile import compile_for_arch

    x, y = torch.empty(8192), torch.empty(8192)
    artifact = compile_for_arch(K.copy_kernel, (x, y, 8192), {"BLOCK": 1024}, "sm_90a")
    source = tmp_path / "copy.ptx"
    source.write_text(artifact.ptx)
    out = tmp_path / "rewritten.ptx"
    assert main(["inspect", str(source), "--rewrite", name, "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert f"{name}: 2 instruction(s) rewritten, written to {out}" in captured.err
    report = json.loads(captured.out)
    assert all(c["ok"] for r in (report["a"], report["b"]) for c in r["compile"])
    (kernel,) = [d for d in report["diff"] if "a" in d]
    assert kernel["a"] == kernel["b"] and kernel["opcodes"], "the rewrite changed no SASS opcode"
    before, after = set(report["a"]["kernels"][0]["histogram_by_opcode"]), set(
        report["b"]["kernels"][0]["histogram_by_opcode"])
    changed = after - before
    assert any(op.startswith("LDG" if "loads" in name else "STG") for op in changed), sorted(changed)


def test_rewrite_needs_a_ptx_file(tmp_path: Path) -> None:
    from kernelwright.errors import InputError

    source = tmp_path / "kernel.cu"
    source.write_text("")
    with pytest.raises(InputError, match="--rewrite takes a .ptx file"):
        from argparse import ArgumentParser

        from kernelwright.inspect.cli import add_arguments, run

        parser = ArgumentParser()
        add_arguments(parser)
        run(parser.parse_args([str(source), "--rewrite", "streaming-stores"]))
