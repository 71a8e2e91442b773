"""A thread-safe client for any OpenAI-compatible chat endpoint: bounded concurrency, our own retries, usage totals.

    with LLMClient(resolve_settings(), on_call=database.record_llm_call) as client:
        futures = [client.submit(messages, tag=f"sample-{i}") for i in range(16)]   # overlap with evaluation
        completion = futures[0].result()     # Completion(text=..., reasoning=..., cost_usd=...)
    client.usage                             # Usage(calls=16, failures=0, prompt_tokens=..., ...)

Every call, successful or not, is handed to ``on_call`` as a :class:`CallRecord` (the run database keeps prompts
and responses that way). A call that fails for good raises :class:`LLMError` with one line saying what failed,
after how many attempts, and what to do. The API key lives only inside the SDK client: records, logs and errors
never carry it.

The ``openai`` package is an optional extra, imported on the first call.
"""

from __future__ import annotations

import importlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any

from kernelwright.config import redact_url, url_secrets
from kernelwright.deadline import Deadline
from kernelwright.errors import ConfigError
from kernelwright.llm.settings import LOCAL_API_KEY, LLMSettings

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0  # the exponential backoff stops growing here
MAX_RETRY_AFTER_S = 120.0  # a server asking for a longer pause is waited on this long, then retried
_RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx; the OpenAI SDK retries the same set
_DETAIL_CHARS = 300  # a server's error text is cut to this in messages


@dataclass(frozen=True, kw_only=True)
class Completion:
    """One answer. ``reasoning`` is the model's chain of thought, kept apart: it is never sent back to a model."""

    text: str
    reasoning: str | None
    model: str  # as the server names it
    prompt_tokens: int
    completion_tokens: int  # includes reasoning tokens where the server counts them (DeepSeek does)
    cost_usd: float | None  # None when the price or the token counts are unknown
    latency_s: float  # from the first attempt to the answer, backoff included
    attempts: int
    finish_reason: str  # "stop", "length" (cut off by max_tokens) ...


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """What ``on_call`` receives for every call: the request, and either the completion or the error."""

    tag: str
    model: str
    base_url: str
    messages: tuple[dict[str, Any], ...]
    completion: Completion | None
    error: str | None
    started: float  # epoch seconds of the first attempt
    latency_s: float
    attempts: int


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Totals over a client's life. ``calls`` counts failed calls too; ``cost_usd`` is None when prices are unknown."""

    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class LLMError(Exception):
    """A call failed for good. ``fatal``: every later call would fail the same way (bad key, model or URL)."""

    def __init__(
        self, message: str, *, attempts: int, status: int | None = None, fatal: bool = False
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.fatal = fatal


@dataclass(frozen=True)
class _Failure:
    """One failed attempt, classified."""

    what: str  # one line, already scrubbed of the key
    retry: bool
    fix: str = ""
    wait_s: float | None = None  # the server's Retry-After
    status: int | None = None
    fatal: bool = False


class LLMClient:
    """Chat completions against ``settings``' endpoint; safe to share between threads.

    At most ``settings.max_in_flight`` calls are in flight at once, whether they come from :meth:`submit` or from
    :meth:`complete` on the caller's threads; a call waiting out a backoff keeps its slot. Attempts that hit a 429,
    a 5xx, a timeout or a dropped connection are retried up to ``settings.max_retries`` times with exponential
    backoff and jitter (a 429's Retry-After is honoured, up to :data:`MAX_RETRY_AFTER_S`); any other error fails at
    once. ``sleep`` is injectable so tests need not wait.

    The reasoning a model returns is kept in :attr:`Completion.reasoning` and never put into any prompt: callers
    build fresh messages for every call (DeepSeek rejects a request that carries ``reasoning_content`` back, and a
    chain of thought fed back mostly costs tokens), and messages holding reasoning are refused here.

    ``on_call`` gets a :class:`CallRecord` for every call, one at a time (calls are serialised by a lock), on the
    thread that made the call; an exception it raises is logged and does not lose the completion.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        on_call: Callable[[CallRecord], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self._on_call = on_call
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(settings.max_in_flight)
        self._executor = ThreadPoolExecutor(
            max_workers=settings.max_in_flight, thread_name_prefix="kernelwright-llm"
        )
        self._lock = threading.Lock()  # guards the SDK client, the totals and `closed`
        self._report_lock = threading.Lock()
        self._random = random.Random()
        self._openai: Any = None
        self._sdk: Any = None
        self._usage = Usage(cost_usd=None if settings.cost_usd(0, 0) is None else 0.0)
        self._closed = False

    # -- public API ------------------------------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tag: str = "",
        temperature: float | None = None,
        max_tokens: int | None = None,
        deadline: Deadline | float | None = None,
    ) -> Completion:
        """One chat completion; ``temperature`` and ``max_tokens`` override the settings' for this call. With
        ``deadline`` (the caller's budget: a :class:`~kernelwright.deadline.Deadline`, or a ``time.monotonic()``
        instant) no attempt outlives it and none starts after it.

        Raises :class:`LLMError` when the call fails for good, :class:`ConfigError` when ``openai`` is missing.
        """
        if self._closed:
            raise RuntimeError("this LLMClient is closed")
        return self._call(_frozen_messages(messages), tag, temperature, max_tokens, deadline)

    def submit(self, messages: Sequence[Mapping[str, Any]], *, tag: str = "", temperature: float | None = None,
               max_tokens: int | None = None, deadline: Deadline | float | None = None) -> Future[Completion]:
        """:meth:`complete` on the client's thread pool. The messages are copied now, so the caller may reuse them."""
        if self._closed:
            raise RuntimeError("this LLMClient is closed")
        return self._executor.submit(self._call, _frozen_messages(messages), tag, temperature, max_tokens, deadline)

    @property
    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    def close(self, *, cancel_pending: bool = False, wait: bool = True) -> None:
        """Stop taking calls; cancel submitted calls not yet started if ``cancel_pending``.

        With ``wait`` (the default) this returns once running calls are done and the connections are released;
        without it, running calls are abandoned to finish on their own (their records still reach ``on_call``).
        """
        self._executor.shutdown(wait=wait, cancel_futures=cancel_pending)
        with self._lock:
            self._closed = True
            sdk = self._sdk
            if wait:
                self._sdk = None
        if wait and sdk is not None:
            sdk.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(cancel_pending=exc_type is not None)

    # -- one call -------------------------------------------------------------------------------------------------

    def _call(
        self, sent: tuple[dict[str, Any], ...], tag: str, temperature: float | None, max_tokens: int | None,
        deadline: Deadline | float | None = None,
    ) -> Completion:
        """One call with its retries, accounted and reported; runs even after close() for calls submitted before."""
        sdk = self._sdk_client()
        with self._slots:
            started, t0 = time.time(), time.perf_counter()
            completion, failure, attempts = self._attempts(sdk, sent, temperature, max_tokens, t0, deadline)
            latency_s = completion.latency_s if completion is not None else time.perf_counter() - t0
        error = None if failure is None else self._error_message(tag, attempts, failure)
        self._account(completion)
        self._report(
            CallRecord(
                tag=tag,
                model=self.settings.model,
                base_url=self.settings.base_url,
                messages=sent,
                completion=completion,
                error=error,
                started=started,
                latency_s=latency_s,
                attempts=attempts,
            )
        )
        if completion is None:
            assert failure is not None and error is not None
            raise LLMError(error, attempts=attempts, status=failure.status, fatal=failure.fatal)
        return completion

    def _sdk_client(self) -> Any:
        with self._lock:
            if self._sdk is None:
                try:
                    self._openai = importlib.import_module("openai")
                except ImportError:
                    raise ConfigError(
                        "the LLM generator needs the openai package: pip install 'kernelwright[llm]'"
                    ) from None
                # max_retries=0: the SDK's own retries would multiply ours and hide attempts from the records.
                self._sdk = self._openai.OpenAI(
                    api_key=self.settings.api_key,
                    base_url=self.settings.base_url,
                    timeout=self.settings.timeout_s,
                    max_retries=0,
                )
            return self._sdk

    def _attempts(
        self,
        sdk: Any,
        messages: tuple[dict[str, Any], ...],
        temperature: float | None,
        max_tokens: int | None,
        t0: float,
        deadline: Deadline | float | None = None,
    ) -> tuple[Completion | None, _Failure | None, int]:
        """(completion, None, attempts) on success, (None, last failure, attempts) when out of attempts."""
        request: dict[str, Any] = {"model": self.settings.model, "messages": list(messages)}
        temperature = self.settings.temperature if temperature is None else temperature
        max_tokens = self.settings.max_tokens if max_tokens is None else max_tokens
        if temperature is not None:
            request["temperature"] = temperature
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        end = Deadline.of(deadline)
        attempt = 0
        while True:
            attempt += 1
            if end.bounded:  # the caller's budget bounds each attempt, and none starts after it
                if end.expired():
                    return None, _Failure("the budget ran out before this attempt", retry=False), attempt - 1
                request["timeout"] = end.cap(self.settings.timeout_s, at_least_s=1.0)
            try:
                response = sdk.chat.completions.create(**request)
                if not getattr(response, "choices", None):
                    return None, _Failure("the server answered with no choices", retry=False), attempt
                return (
                    self._completion(response, latency_s=time.perf_counter() - t0, attempts=attempt),
                    None,
                    attempt,
                )
            except Exception as exc:  # every failure becomes data in the record
                failure = self._classify(exc)
            delay = self._delay(attempt, failure.wait_s)
            past_deadline = end.expired(margin_s=delay)
            if not failure.retry or attempt > self.settings.max_retries or past_deadline:
                return None, failure, attempt  # the last real failure, not "out of time"
            log.info("LLM attempt %d failed (%s); retrying in %.1f s", attempt, failure.what, delay)
            self._sleep(delay)

    def _delay(self, failed_attempts: int, wait_s: float | None) -> float:
        """The server's Retry-After if it gave one, else base * 2^(n-1), jittered into [50%, 100%]."""
        if wait_s is not None:
            return min(wait_s, MAX_RETRY_AFTER_S)
        delay = min(self.settings.backoff_s * 2 ** (failed_attempts - 1), MAX_BACKOFF_S)
        return delay * (0.5 + 0.5 * self._random.random())

    def _classify(self, exc: Exception) -> _Failure:
        openai, settings = self._openai, self.settings
        if isinstance(exc, openai.APITimeoutError):
            return _Failure(
                f"no answer within {settings.timeout_s:g} s",
                retry=True,
                fix="raise timeout_s ([llm] in kernelwright.toml or KERNELWRIGHT_LLM_TIMEOUT_S)",
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return _Failure(
                f"cannot reach the server ({type(cause).__name__}: {self._scrub(str(cause))})",
                retry=True,
                fix="check --base-url and that the server is up",
            )
        if not isinstance(exc, openai.APIStatusError):
            return _Failure(f"{type(exc).__name__}: {self._scrub(str(exc))}", retry=False)
        status = exc.status_code
        what = f"HTTP {status}: {self._server_detail(exc)}"
        if status == 429:
            return _Failure(
                what,
                retry=True,
                fix="lower max_in_flight or retry later",
                wait_s=_retry_after_s(exc.response.headers),
                status=status,
            )
        if status >= 500 or status in _RETRY_STATUSES:
            return _Failure(what, retry=True, fix="the server is failing; retry later", status=status)
        if status in (401, 403):
            return _Failure(
                what,
                retry=False,
                status=status,
                fatal=True,
                fix=f"check the API key in {settings.key_source} and that it may use {settings.model}",
            )
        if status == 404:
            return _Failure(
                what,
                retry=False,
                status=status,
                fatal=True,
                fix=f"check the model name ({settings.model}) and the base URL "
                f"({redact_url(settings.base_url)}; OpenAI-compatible servers usually end in /v1)",
            )
        return _Failure(what, retry=False, status=status)

    def _server_detail(self, exc: Any) -> str:
        body = exc.body
        detail = body.get("message") if isinstance(body, dict) else None
        return self._scrub(str(detail or body or exc.message))

    def _scrub(self, text: str) -> str:
        """One line, cut short, and without the key should a server echo it."""
        key = self.settings.api_key
        if key and key != LOCAL_API_KEY:
            text = text.replace(key, "<api key>")
        for secret in url_secrets(self.settings.base_url):  # a URL the message quotes, with its credentials
            text = text.replace(secret, "<redacted>")
        text = " ".join(text.split())
        return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."

    def _error_message(self, tag: str, attempts: int, failure: _Failure) -> str:
        call = f"LLM call {tag!r}" if tag else "LLM call"
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        fix = f"; {failure.fix}" if failure.fix else ""
        where = redact_url(self.settings.base_url)  # the message is stored (llm_calls.error): no credentials in it
        return f"{call} to {self.settings.model} at {where} failed after {tries}: {failure.what}{fix}"

    def _completion(self, response: Any, *, latency_s: float, attempts: int) -> Completion:
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return Completion(
            text=choice.message.content or "",
            reasoning=_reasoning(choice.message),
            model=getattr(response, "model", None) or self.settings.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=None if usage is None else self.settings.cost_usd(prompt_tokens, completion_tokens),
            latency_s=latency_s,
            attempts=attempts,
            finish_reason=str(choice.finish_reason or "unknown"),
        )

    def _account(self, completion: Completion | None) -> None:
        with self._lock:
            usage = self._usage
            if completion is None:
                self._usage = replace(usage, calls=usage.calls + 1, failures=usage.failures + 1)
                return
            cost = usage.cost_usd
            if cost is not None and completion.cost_usd is not None:
                cost += completion.cost_usd
            self._usage = replace(
                usage,
                calls=usage.calls + 1,
                prompt_tokens=usage.prompt_tokens + completion.prompt_tokens,
                completion_tokens=usage.completion_tokens + completion.completion_tokens,
                cost_usd=cost,
            )

    def _report(self, record: CallRecord) -> None:
        if self._on_call is None:
            return
        with self._report_lock:
            try:
                self._on_call(record)
            except Exception:  # losing a record must not lose the completion
                log.exception("on_call failed for LLM call %r; the call's result is kept", record.tag)


def _frozen_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """A private copy of ``messages``, checked: each a mapping with role and content, and no reasoning in it."""
    if isinstance(messages, (str, bytes)) or not messages:
        raise ValueError("messages must be a non-empty sequence of {'role': ..., 'content': ...} mappings")
    frozen = []
    for message in messages:
        if not isinstance(message, Mapping) or "role" not in message or "content" not in message:
            raise ValueError(f"each message needs 'role' and 'content', got {message!r:.120}")
        if "reasoning_content" in message or "reasoning" in message:
            raise ValueError(
                "a model's reasoning must not be sent back; build the message from completion.text"
            )
        frozen.append(dict(message))
    return tuple(frozen)


def _reasoning(message: Any) -> str | None:
    """DeepSeek and vLLM name it ``reasoning_content``, OpenRouter ``reasoning``; the SDK keeps either as extra."""
    extra = getattr(message, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None) or extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (seconds or an HTTP date); None if absent."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
