"""Finding NVIDIA's tools and choosing one that supports an arch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwright.errors import ToolchainError
from kernelwright.inspect import tools

FAKES = (
    tools.Tool(name="cuobjdump", path=Path("/opt/cuda-13.1/bin/cuobjdump"), version=(13, 1)),
    tools.Tool(name="cuobjdump", path=Path("/opt/cuda-12.8/bin/cuobjdump"), version=(12, 8)),
    tools.Tool(name="cuobjdump", path=Path("/opt/cuda-12.4/bin/cuobjdump"), version=(12, 4)),
)


def test_triton_wheel_tools_are_found() -> None:
    triton = pytest.importorskip("triton")
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for name in ("cuobjdump", "nvdisasm", "ptxas"):
        path = tools.find_tool(name)
        assert path.is_file() and os.access(path, os.X_OK)
        assert any(t.path.parent == bundled for t in tools.all_tools(name))
        assert all(t.version is not None for t in tools.all_tools(name))


def test_newest_supporting_tool_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "all_tools", lambda name: FAKES)
    assert tools.find_tool("cuobjdump", "sm_90a").name == "cuobjdump"
    assert tools.tools_for("cuobjdump", "sm_90a")[0].version == (13, 1)
    assert [t.version for t in tools.tools_for("cuobjdump", "sm_70")] == [(12, 8), (12, 4)]
    assert [t.version for t in tools.tools_for("cuobjdump", "sm_100a")] == [(13, 1), (12, 8)]
    assert [t.version for t in tools.tools_for("cuobjdump", "sm_103a")] == [(13, 1)]


def test_no_tool_for_the_arch_says_which_release_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "all_tools", lambda name: FAKES[:1])
    with pytest.raises(ToolchainError) as info:
        tools.tools_for("cuobjdump", "sm_70")
    message = str(info.value)
    assert "cuobjdump 13.1" in message and "CUDA 9.0 to 12.9" in message and "\n" not in message
    monkeypatch.setattr(tools, "all_tools", lambda name: FAKES[2:])
    with pytest.raises(ToolchainError, match=r"sm_100a needs CUDA 12\.8 or newer tools"):
        tools.tools_for("cuobjdump", "sm_100a")


def test_missing_tool_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "all_tools", lambda name: ())
    with pytest.raises(ToolchainError, match="pip install triton"):
        tools.find_tool("nvdisasm")


def test_refusal_detection() -> None:
    text = "\n\tcode for sm_70\nnvdisasm fatal   : CUDA architecture \"SM70\" is deprecated. Please use CUDA 13.0\n"
    assert tools.refusal(text).startswith("nvdisasm fatal")
    assert tools.refusal("\tcode for sm_90a\n\t\tFunction : k\n") is None
