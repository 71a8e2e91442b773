"""Capturing a problem's graph: on the meta device (sizes, not memory), with real tensors where meta cannot trace it,
and within a time bound."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelwright.errors import InputError
from kernelwright.generate.graph import capture

from .conftest import write_problem


def test_a_problem_too_big_for_memory_is_captured_on_the_meta_device(tmp_path: Path) -> None:
    # 2^34 float32 elements (64 GiB) as real tensors would not fit this machine; their shapes are all a graph needs.
    path = write_problem(tmp_path, "huge", """
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.relu(a) * b

        def get_inputs():
            return [torch.randn(131072, 131072), torch.randn(131072)]

        def get_init_inputs():
            return []
    """)
    started = time.monotonic()
    graph = capture(path)
    assert time.monotonic() - started < 60
    assert graph.values[graph.outputs[0]].shape == (131072, 131072)


def test_inputs_the_problem_puts_on_a_device_of_its_own_are_captured_for_real(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "pinned", """
        class Model(nn.Module):
            def forward(self, x):
                return x * 2

        def get_inputs():
            return [torch.randn(8, 16, device="cpu")]

        def get_init_inputs():
            return []
    """)
    graph = capture(path)
    assert graph.values[graph.outputs[0]].shape == (8, 16)


def test_a_capture_that_runs_past_its_bound_is_a_one_line_error(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "unrolled", """
        class Model(nn.Module):
            def forward(self, x):
                for _ in range(20000):
                    x = x * 1.0001 + 0.5
                return x

        def get_inputs():
            return [torch.randn(4, 4)]

        def get_init_inputs():
            return []
    """)
    started = time.monotonic()
    with pytest.raises(InputError, match=r"took more than 1 s .*--generator llm"):
        capture(path, timeout_s=1.0)
    assert time.monotonic() - started < 30
