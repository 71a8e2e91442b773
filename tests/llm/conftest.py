"""Fixtures for the LLM tests: ``fake_llm`` starts scripted OpenAI-compatible servers and stops them afterwards."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # `from fake_server import ...` in the tests

from fake_server import FakeLLMServer, Script  # noqa: E402 - needs the path above


@pytest.fixture
def fake_llm() -> Iterator[Callable[[Script], FakeLLMServer]]:
    """``start(script)`` -> a running :class:`FakeLLMServer`; every server started is stopped at teardown."""
    servers: list[FakeLLMServer] = []

    def start(script: Script) -> FakeLLMServer:
        server = FakeLLMServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
