"""The disassembly cache (inspect/sass.py): one kernel disassembled once, whatever verify folder its line info
names; kept, signed, in kernelwright's cache for the next process; an entry rewritten by someone else is not used."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.inspect import sass, tools
from kernelwright.inspect.cuda_compile import compile_ptx

PTX = """
.version 8.0
.target sm_90a
.address_size 64
.file 1 "/tmp/{folder}/candidate-src/kernel.py"
.visible .entry twice(.param .u64 x)
{{
  .reg .b64 %rd<3>;
  .reg .f32 %f<3>;
  .loc 1 3 0
  ld.param.u64 %rd1, [x];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.f32 %f1, [%rd2];
  .loc 1 4 0
  {op}.f32 %f2, %f1, %f1;
  st.global.f32 [%rd2], %f2;
  ret;
}}
"""

pytestmark = pytest.mark.skipif(not tools.tools_for("ptxas") or not tools.tools_for("cuobjdump"),
                                reason="needs ptxas and cuobjdump")


def _cubin(tmp_path: Path, folder: str, op: str = "add") -> Path:
    result = compile_ptx(PTX.format(folder=folder, op=op), "sm_90a")
    assert result.ok, result.log
    path = tmp_path / f"{folder}-{op}.cubin"
    path.write_bytes(result.cubin)
    return path


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """The `cuobjdump -sass` runs made, from an empty process cache and a cache folder of the test's own."""
    monkeypatch.setattr(sass, "_DISASSEMBLY_CACHE", {})
    made: list[str] = []
    real = tools.run_tool

    def counting(tool, args, *rest, **kwargs):
        if "-sass" in args:
            made.append(args[-1])
        return real(tool, args, *rest, **kwargs)

    monkeypatch.setattr(tools, "run_tool", counting)
    with config.scope(cache_dir=str(tmp_path / "cache")):
        yield made


def test_the_same_kernel_from_another_verify_folder_is_disassembled_once(tmp_path: Path, listings: list[str]) -> None:
    first = _cubin(tmp_path, "kernelwright-verify-abcd1234")
    second = _cubin(tmp_path, "kernelwright-verify-zz_91xq0")
    assert first.read_bytes() != second.read_bytes()  # the line info names the folder
    assert sass.content_key(first.read_bytes()) == sass.content_key(second.read_bytes())
    a, b = sass.disassemble(first, arch="sm_90a"), sass.disassemble(second, arch="sm_90a")
    assert a == b and [f.name for f in a.functions] == ["twice"] and len(listings) == 1
    other = _cubin(tmp_path, "kernelwright-verify-abcd1234", op="mul")  # different code: a different key
    assert sass.content_key(other.read_bytes()) != sass.content_key(first.read_bytes())
    assert "FMUL" in sass.disassemble(other, arch="sm_90a").functions[0].opcode_counts()
    assert len(listings) == 2


def test_a_signed_entry_serves_the_next_process_and_a_rewritten_one_is_not_used(tmp_path: Path,
                                                                               listings: list[str]) -> None:
    cubin = _cubin(tmp_path, "kernelwright-verify-q1w2e3r4")
    fresh = sass.disassemble(cubin, arch="sm_90a")
    sass._DISASSEMBLY_CACHE.clear()  # as a new process finds it
    assert sass.disassemble(cubin, arch="sm_90a") == fresh and len(listings) == 1
    # Someone rewrites the entry (a candidate's helper where no namespace hid the cache): its digest fails.
    entries = list((Path(sass._cache_path("x")).parent).glob("*.json"))
    assert len(entries) == 1
    entry = json.loads(entries[0].read_text())
    entry["body"]["functions"][0]["instructions"] = []
    entries[0].write_text(json.dumps(entry))
    sass._DISASSEMBLY_CACHE.clear()
    again = sass.disassemble(cubin, arch="sm_90a")
    assert again == fresh and len(listings) == 2


def test_the_cache_keeps_its_newest_entries(tmp_path: Path, listings: list[str], monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.setattr(sass, "_CACHE_ENTRIES", 1)
    first = _cubin(tmp_path, "kernelwright-verify-aaaaaaaa")
    second = _cubin(tmp_path, "kernelwright-verify-aaaaaaaa", op="mul")
    sass.disassemble(first, arch="sm_90a")
    sass.disassemble(second, arch="sm_90a")
    assert len(listings) == 2 and len(list(sass._cache_path("x").parent.glob("*.json"))) == 1
    sass._DISASSEMBLY_CACHE.clear()
    sass.disassemble(second, arch="sm_90a")  # kept: served from the cache
    assert len(listings) == 2
    sass.disassemble(first, arch="sm_90a")  # dropped: disassembled again
    assert len(listings) == 3
