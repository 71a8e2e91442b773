"""A scripted OpenAI-compatible chat server on 127.0.0.1, so the real ``openai`` client is tested over real HTTP.

    with FakeLLMServer([Reply(status=429, retry_after=3), Reply("def kernel(): ...", reasoning="...")]) as server:
        settings = LLMSettings(base_url=server.base_url, ...)
        ...
        server.requests      # the JSON bodies received, in order
        server.max_concurrent

The script is a list of replies used in order (one more request than replies gets an HTTP 500 saying the script ran
out), or a function ``(request_json, index) -> Reply``. A reply may hang first, to provoke client timeouts; stopping
the server wakes hanging handlers, which then close the connection without answering.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Token counts default to about one per four characters of text."""

    content: str = ""
    reasoning: str | None = None
    status: int = 200
    hang_s: float = 0.0
    retry_after: float | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    body: dict[str, Any] | None = None  # sent as is instead of the generated JSON, for malformed answers


Script = list[Reply] | Callable[[dict[str, Any], int], Reply]


def _rough_tokens(text: str) -> int:
    return len(text) // 4 + 1


class FakeLLMServer:
    """Serves ``POST /v1/chat/completions`` (and ``/chat/completions``) from ``script`` in a daemon thread."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[
            dict[str, str]
        ] = []  # per request, names lower-cased: "authorization" in headers[0]
        self.max_concurrent = 0
        self._serving = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake LLM server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeLLMServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True  # a handler still hanging at shutdown does not hold the process
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stop.set()  # wakes handlers that are hanging
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- called by the handler --------------------------------------------------------------------------------------

    def _admit(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        """Record a request; its index in the script."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self._serving += 1
            self.max_concurrent = max(self.max_concurrent, self._serving)
            return len(self.requests) - 1

    def _done(self) -> None:
        with self._lock:
            self._serving -= 1

    def _reply_for(self, body: dict[str, Any], index: int) -> Reply:
        if callable(self.script):
            return self.script(body, index)
        if index < len(self.script):
            return self.script[index]
        return Reply(
            content=f"fake server script ran out: request {index + 1}, {len(self.script)} replies", status=500
        )

    def _hang(self, seconds: float) -> bool:
        """Wait; False if the server is stopping meanwhile."""
        return not self._stop.wait(seconds) if seconds > 0 else True


class _Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("fake LLM server: " + format, *args)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        fake: FakeLLMServer = self.server.fake  # type: ignore[attr-defined]
        if self.path.rstrip("/") not in CHAT_PATHS:
            self._send_json(404, _error_body(f"no route {self.path}", "not_found"))
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        except (ValueError, json.JSONDecodeError):
            self._send_json(400, _error_body("request body is not JSON", "invalid_request_error"))
            return
        index = fake._admit(body, {name.lower(): value for name, value in self.headers.items()})
        # The request stops counting as "in flight" before its answer is written: once the client has the answer it
        # may send its next request, which must not find this one still counted (that raced: 4 seen for 3 allowed).
        served = False
        try:
            reply = fake._reply_for(body, index)
            if not fake._hang(reply.hang_s):
                self.close_connection = True
                return
            fake._done()
            served = True
            if reply.body is not None:
                self._send_json(reply.status, reply.body)
            elif reply.status == 200:
                self._send_json(200, _completion_body(body, reply, index))
            else:
                extra = {} if reply.retry_after is None else {"Retry-After": f"{reply.retry_after:g}"}
                self._send_json(
                    reply.status, _error_body(reply.content or f"scripted HTTP {reply.status}"), extra
                )
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout) before the answer
        finally:
            if not served:
                fake._done()

    def _send_json(
        self, status: int, payload: dict[str, Any], extra_headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _completion_body(request: dict[str, Any], reply: Reply, index: int) -> dict[str, Any]:
    prompt_text = "".join(str(m.get("content", "")) for m in request.get("messages", []))
    prompt_tokens = _rough_tokens(prompt_text) if reply.prompt_tokens is None else reply.prompt_tokens
    completion_tokens = (
        _rough_tokens(reply.content + (reply.reasoning or ""))
        if reply.completion_tokens is None
        else reply.completion_tokens
    )
    return {
        "id": f"chatcmpl-fake-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": reply.content,
                    "reasoning_content": reply.reasoning,
                },
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error_body(message: str, kind: str = "api_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
