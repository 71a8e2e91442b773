"""Fixtures for the inspect tests: synthetic kernel summaries and the directory of test inputs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from kernelwright.inspect.analysis import KernelSummary, summarize_function
from kernelwright.inspect.sass import Instruction, Resources, SassFunction

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # triton_kernels.py lives beside the tests
    sys.path.insert(0, str(HERE))


def make_summary(
    opcodes: Mapping[str, int],
    *,
    arch: str = "sm_90a",
    name: str = "k",
    ptx: str = "",
    ptxas_log: str = "",
    threads: int | None = 256,
    registers: int = 64,
    shared: int = 0,
    stack: int = 0,
) -> KernelSummary:
    """A KernelSummary for a kernel made of these opcode counts, built by the same code as real ones."""
    instructions = tuple(
        Instruction(offset=16 * i, opcode=op, operands="")
        for i, op in enumerate(op for op, n in opcodes.items() for _ in range(n))
    )
    function = SassFunction(name=name, arch=arch, instructions=instructions,
                            resources=Resources(registers=registers, shared_bytes=shared, stack_bytes=stack))
    return summarize_function(function, origin="test", tool="synthetic", ptx=ptx, ptxas_log=ptxas_log,
                              threads_per_block=threads)


@pytest.fixture
def summary() -> Callable[..., KernelSummary]:
    return make_summary


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return HERE / "data"
