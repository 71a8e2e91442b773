"""The LLM client and its settings, with the real ``openai`` package talking HTTP to a scripted local server.

Backoff sleeps go to an injected recorder, so only the timeout and concurrency cases spend real time (about 2 s).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from fake_server import Reply

from kernelwright.errors import ConfigError
from kernelwright.llm.client import CallRecord, LLMClient, LLMError, Usage
from kernelwright.llm.settings import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    KNOWN_PRICES,
    LOCAL_API_KEY,
    LOCAL_KEY_SOURCE,
    LLMSettings,
    resolve_settings,
)

SECRET = "sk-test-0123456789abcdef"
MESSAGES = [
    {"role": "system", "content": "You write Triton kernels."},
    {"role": "user", "content": "Write ModelNew for a row softmax."},
]


def _settings(server, **overrides) -> LLMSettings:
    values = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": SECRET,
        "key_source": "TEST_LLM_KEY",
        "timeout_s": 5.0,
        "max_retries": 3,
        "backoff_s": 1.0,
    }
    return LLMSettings(**{**values, **overrides})


# -- the client ------------------------------------------------------------------------------------------------------


def test_success_returns_text_reasoning_tokens_and_cost(fake_llm):
    server = fake_llm(
        [Reply("class ModelNew: ...", reasoning="think first", prompt_tokens=1000, completion_tokens=3000)]
    )
    records: list[CallRecord] = []
    settings = _settings(server, price_prompt_per_mtok=0.5, price_completion_per_mtok=2.0)
    with LLMClient(settings, on_call=records.append) as client:
        completion = client.complete(MESSAGES, tag="sample-0", temperature=0.6)

    assert completion.text == "class ModelNew: ..."
    assert completion.reasoning == "think first"
    assert (completion.prompt_tokens, completion.completion_tokens) == (1000, 3000)
    assert completion.cost_usd == pytest.approx((1000 * 0.5 + 3000 * 2.0) / 1e6)
    assert (completion.attempts, completion.finish_reason, completion.model) == (1, "stop", "fake-model")
    assert client.usage == Usage(
        calls=1, failures=0, prompt_tokens=1000, completion_tokens=3000, cost_usd=pytest.approx(0.0065)
    )

    body = server.requests[0]
    assert body["model"] == "fake-model" and body["messages"] == MESSAGES and body["temperature"] == 0.6
    assert (
        server.headers[0]["authorization"] == f"Bearer {SECRET}"
    )  # the key goes to the server, nowhere else

    (record,) = records
    assert (record.tag, record.error, record.attempts, record.completion) == ("sample-0", None, 1, completion)
    assert record.messages == tuple(MESSAGES) and record.base_url == server.base_url
    assert SECRET not in repr(record) and SECRET not in repr(settings) and SECRET not in settings.describe()


def test_429_waits_for_retry_after_then_succeeds(fake_llm):
    server = fake_llm([Reply(status=429, retry_after=3, content="slow down"), Reply("ok")])
    sleeps: list[float] = []
    with LLMClient(_settings(server), sleep=sleeps.append) as client:
        completion = client.complete(MESSAGES)
    assert completion.text == "ok" and completion.attempts == 2
    assert sleeps == [3.0]


def test_retry_after_is_capped(fake_llm):
    server = fake_llm([Reply(status=429, retry_after=86400), Reply("ok")])
    sleeps: list[float] = []
    with LLMClient(_settings(server), sleep=sleeps.append) as client:
        client.complete(MESSAGES)
    assert sleeps == [120.0]


def test_server_errors_back_off_exponentially_then_succeed(fake_llm):
    server = fake_llm([Reply(status=500), Reply(status=503), Reply("third time")])
    sleeps: list[float] = []
    with LLMClient(_settings(server, backoff_s=2.0), sleep=sleeps.append) as client:
        completion = client.complete(MESSAGES)
    assert completion.text == "third time" and completion.attempts == 3
    assert len(sleeps) == 2
    assert sleeps[0] >= 1.0 and sleeps[0] <= 2.0 and sleeps[1] >= 2.0 and sleeps[1] <= 4.0  # base * 2^(n-1), jittered


def test_hang_past_timeout_is_retried_then_fails_in_one_line(fake_llm):
    server = fake_llm(lambda request, index: Reply("too late", hang_s=5.0))
    sleeps: list[float] = []
    records: list[CallRecord] = []
    settings = _settings(server, timeout_s=0.5, max_retries=1)
    with LLMClient(settings, on_call=records.append, sleep=sleeps.append) as client:
        started = time.perf_counter()
        with pytest.raises(LLMError) as caught:
            client.complete(MESSAGES, tag="hangs")
        assert time.perf_counter() - started < 3.0
    message = str(caught.value)
    assert "\n" not in message
    assert "failed after 2 attempts" in message and "no answer within 0.5 s" in message
    assert "timeout_s" in message and "'hangs'" in message and SECRET not in message
    assert caught.value.attempts == 2 and not caught.value.fatal
    assert len(server.requests) == 2 and len(sleeps) == 1
    assert records[0].error == message and records[0].completion is None


def test_401_is_not_retried_and_names_the_key_source(fake_llm):
    server = fake_llm([Reply(status=401, content=f"Incorrect API key provided: {SECRET}")])
    sleeps: list[float] = []
    with LLMClient(_settings(server), sleep=sleeps.append) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES)
    message = str(caught.value)
    assert "failed after 1 attempt:" in message and "HTTP 401" in message and "TEST_LLM_KEY" in message
    assert SECRET not in message  # scrubbed even when the server echoes it
    assert caught.value.status == 401 and caught.value.fatal
    assert len(server.requests) == 1 and sleeps == []


def test_connection_refused_is_retried_then_fails(fake_llm):
    server = fake_llm([])
    settings = _settings(server, max_retries=2)
    server.stop()  # nothing listens on the port any more
    sleeps: list[float] = []
    with LLMClient(settings, sleep=sleeps.append) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES)
    assert "failed after 3 attempts" in str(caught.value) and "cannot reach the server" in str(caught.value)
    assert len(sleeps) == 2


def test_concurrency_is_bounded_by_max_in_flight(fake_llm):
    server = fake_llm(lambda request, index: Reply(request["messages"][-1]["content"], hang_s=0.2))
    with LLMClient(_settings(server, max_in_flight=3)) as client:
        futures = [client.submit([{"role": "user", "content": f"call {i}"}], tag=str(i)) for i in range(12)]
        texts = [future.result(timeout=10).text for future in futures]
    assert texts == [f"call {i}" for i in range(12)]
    assert server.max_concurrent == 3
    assert client.usage.calls == 12


def test_failures_are_counted_and_reported(fake_llm):
    server = fake_llm([Reply(status=400, content="context too long"), Reply("fine")])
    records: list[CallRecord] = []
    with LLMClient(_settings(server), on_call=records.append, sleep=lambda s: None) as client:
        with pytest.raises(LLMError, match="HTTP 400: context too long"):
            client.complete(MESSAGES, tag="first")
        client.complete(MESSAGES, tag="second")
    assert client.usage.calls == 2 and client.usage.failures == 1
    assert [(r.tag, r.completion is None, r.error is None) for r in records] == [
        ("first", True, False),
        ("second", False, True),
    ]
    assert client.usage.cost_usd is None  # no prices known for fake-model


def test_answers_without_usage_or_choices(fake_llm):
    message = {"role": "assistant", "content": "no usage", "reasoning": "openrouter-style"}
    no_usage = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
    }
    server = fake_llm([Reply(body=no_usage), Reply(body={**no_usage, "choices": []})])
    settings = _settings(server, price_prompt_per_mtok=1.0, price_completion_per_mtok=1.0)
    with LLMClient(settings) as client:
        completion = client.complete(MESSAGES)
        with pytest.raises(LLMError, match="no choices"):
            client.complete(MESSAGES)
    assert (completion.text, completion.reasoning, completion.finish_reason) == (
        "no usage",
        "openrouter-style",
        "length",
    )
    assert (completion.prompt_tokens, completion.cost_usd) == (0, None)
    assert len(server.requests) == 2  # a malformed answer is not retried


def test_on_call_exception_does_not_lose_the_completion(fake_llm, caplog):
    server = fake_llm([Reply("kept")])

    def broken(record: CallRecord) -> None:
        raise RuntimeError("database is locked")

    with LLMClient(_settings(server), on_call=broken) as client:
        assert client.complete(MESSAGES).text == "kept"
    assert "on_call failed" in caplog.text


def test_messages_carrying_reasoning_are_refused(fake_llm):
    server = fake_llm([])
    with LLMClient(_settings(server)) as client, pytest.raises(ValueError, match="reasoning"):
        client.complete([{"role": "assistant", "content": "x", "reasoning_content": "y"}])
    assert server.requests == []


def test_missing_openai_package_is_a_config_error(fake_llm, monkeypatch):
    server = fake_llm([Reply("never sent")])
    monkeypatch.setitem(sys.modules, "openai", None)
    with (
        LLMClient(_settings(server)) as client,
        pytest.raises(ConfigError, match=r"pip install 'kernelwright\[llm\]'"),
    ):
        client.complete(MESSAGES)
    assert server.requests == []


# -- settings --------------------------------------------------------------------------------------------------------


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kernelwright.toml"
    path.write_text(text)
    return path


def test_defaults_use_deepseek_and_its_key_and_prices(tmp_path):
    settings = resolve_settings(environ={"DEEPSEEK_API_KEY": SECRET}, cwd=tmp_path)
    assert (settings.model, settings.base_url) == (DEFAULT_MODEL, DEFAULT_BASE_URL)
    assert (settings.api_key, settings.key_source) == (SECRET, "DEEPSEEK_API_KEY")
    assert settings.price_prompt_per_mtok is not None and settings.price_completion_per_mtok is not None
    assert SECRET not in settings.describe() and "DEEPSEEK_API_KEY" in settings.describe()


def test_precedence_flags_over_env_over_toml_over_defaults(tmp_path):
    _toml(
        tmp_path,
        """
[llm]
model = "from-toml"
base_url = "http://localhost:9000/v1/"
timeout_s = 30
max_in_flight = 2
max_retries = 1
price_prompt_per_mtok = 0.1
""",
    )
    env = {"KERNELWRIGHT_LLM_MODEL": "from-env", "KERNELWRIGHT_LLM_TIMEOUT_S": "45.5"}
    from_file = resolve_settings(environ={}, cwd=tmp_path)
    assert (from_file.model, from_file.base_url, from_file.timeout_s) == (
        "from-toml",
        "http://localhost:9000/v1",
        30.0,
    )
    assert (from_file.max_in_flight, from_file.max_retries, from_file.price_prompt_per_mtok) == (2, 1, 0.1)
    assert from_file.price_completion_per_mtok is None and from_file.cost_usd(10, 10) is None

    from_env = resolve_settings(environ=env, cwd=tmp_path)
    assert (from_env.model, from_env.timeout_s, from_env.max_in_flight) == ("from-env", 45.5, 2)

    from_flags = resolve_settings(
        model="from-flag", base_url="http://127.0.0.1:1234/v1", environ=env, cwd=tmp_path
    )
    assert (from_flags.model, from_flags.base_url, from_flags.timeout_s) == (
        "from-flag",
        "http://127.0.0.1:1234/v1",
        45.5,
    )


def test_toml_prices_override_the_built_in_table(tmp_path):
    config = _toml(tmp_path, "[llm]\nprice_completion_per_mtok = 9.0\n")
    settings = resolve_settings(config_file=config, environ={"DEEPSEEK_API_KEY": SECRET})
    built_in_prompt, _ = KNOWN_PRICES[("api.deepseek.com", DEFAULT_MODEL)]
    assert (settings.price_prompt_per_mtok, settings.price_completion_per_mtok) == (built_in_prompt, 9.0)


def test_missing_key_is_a_one_line_config_error(tmp_path):
    with pytest.raises(ConfigError) as caught:
        resolve_settings(environ={}, cwd=tmp_path)
    assert str(caught.value) == (
        "no API key for https://api.deepseek.com: export DEEPSEEK_API_KEY (or OPENAI_API_KEY with --base-url URL "
        "for any OpenAI-compatible server such as vLLM), or use --generator templates"
    )


def test_key_lookup_order(tmp_path):
    both = {"DEEPSEEK_API_KEY": "deepseek-key", "OPENAI_API_KEY": "openai-key", "MY_KEY": "mine"}
    assert resolve_settings(environ=both, cwd=tmp_path).key_source == "DEEPSEEK_API_KEY"
    # A key goes only to the provider it was made for: no OpenAI key to DeepSeek, no DeepSeek key elsewhere.
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY"):
        resolve_settings(environ={"OPENAI_API_KEY": "o"}, cwd=tmp_path)
    other = resolve_settings(base_url="https://api.example.com/v1", environ=both, cwd=tmp_path)
    assert other.key_source == "OPENAI_API_KEY"
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_settings(base_url="https://api.example.com/v1", environ={"DEEPSEEK_API_KEY": "d"}, cwd=tmp_path)
    local = resolve_settings(base_url="http://localhost:8000/v1", environ=both, cwd=tmp_path)
    assert local.key_source == "OPENAI_API_KEY"  # vLLM --api-key; a DeepSeek key never goes to a local server
    named = _toml(tmp_path, '[llm]\napi_key_env = "MY_KEY"\n')
    assert resolve_settings(config_file=named, environ=both).api_key == "mine"
    with pytest.raises(ConfigError, match="names MY_KEY"):
        resolve_settings(config_file=named, environ={"DEEPSEEK_API_KEY": "d"})


@pytest.mark.parametrize(
    "url", ["http://localhost:8000/v1", "http://127.0.0.1:8000/v1", "http://[::1]:8000/v1"]
)
def test_local_server_needs_no_key(tmp_path, url):
    settings = resolve_settings(base_url=url, environ={"DEEPSEEK_API_KEY": "not-for-local"}, cwd=tmp_path)
    assert (settings.api_key, settings.key_source) == (LOCAL_API_KEY, LOCAL_KEY_SOURCE)
    assert (
        settings.price_prompt_per_mtok is None
    )  # the built-in prices are DeepSeek's API's, not a local server's


def test_unknown_toml_key_names_the_key_and_the_file(tmp_path):
    config = _toml(tmp_path, '[llm]\nmodel = "m"\ntemprature = 0.5\n')
    with pytest.raises(ConfigError, match=r"kernelwright\.toml: unknown \[llm\] key\(s\) temprature"):
        resolve_settings(config_file=config, environ={"DEEPSEEK_API_KEY": SECRET})


def test_api_key_in_toml_is_refused(tmp_path):
    config = _toml(tmp_path, '[llm]\napi_key = "sk-oops"\n')
    with pytest.raises(ConfigError, match="api_key_env") as caught:
        resolve_settings(config_file=config, environ={"DEEPSEEK_API_KEY": SECRET})
    assert "sk-oops" not in str(caught.value)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"KERNELWRIGHT_LLM_MAX_IN_FLIGHT": "0"}, "KERNELWRIGHT_LLM_MAX_IN_FLIGHT='0' is not valid"),
        ({"KERNELWRIGHT_LLM_TIMEOUT_S": "soon"}, "KERNELWRIGHT_LLM_TIMEOUT_S='soon' is not valid"),
        ({"KERNELWRIGHT_LLM_BASE_URL": "api.deepseek.com"}, "is not an http"),
    ],
)
def test_bad_environment_values_are_config_errors(tmp_path, env, match):
    with pytest.raises(ConfigError, match=match):
        resolve_settings(environ={"DEEPSEEK_API_KEY": SECRET, **env}, cwd=tmp_path)


def test_close_can_cancel_pending_calls(fake_llm):
    server = fake_llm(lambda request, index: Reply("done", hang_s=0.2))
    client = LLMClient(_settings(server, max_in_flight=1))
    futures = [client.submit(MESSAGES, tag=str(i)) for i in range(4)]
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:  # until the first call is at the server
        time.sleep(0.01)
    client.close(cancel_pending=True)
    assert futures[0].result().text == "done"
    assert all(future.cancelled() for future in futures[1:])
    assert len(server.requests) == 1
    with pytest.raises(RuntimeError, match="closed"):
        client.submit(MESSAGES)


def test_a_key_in_a_plainly_named_variable_never_reaches_a_verifier_child(tmp_path, monkeypatch):
    """api_key_env may name a variable that does not look like a credential; the children must not see it."""
    from kernelwright.isolation.process import scrubbed_environment

    monkeypatch.setenv("MY_LLM", "sk-plainly-named-0123")
    monkeypatch.setenv("MY_LLM_COPY", "sk-plainly-named-0123")  # the same value under another name
    assert "MY_LLM" in scrubbed_environment()  # not a credential by its name alone ...
    named = _toml(tmp_path, '[llm]\napi_key_env = "MY_LLM"\n')
    assert resolve_settings(config_file=named).api_key == "sk-plainly-named-0123"
    env = scrubbed_environment()
    assert "MY_LLM" not in env and "MY_LLM_COPY" not in env  # ... but once it holds the LLM's key it is scrubbed


def test_credentials_in_the_base_url_stay_out_of_error_messages_and_descriptions(fake_llm):
    # The message is stored in the run database (llm_calls.error): a user:key@host URL must not put the key there.
    server = fake_llm([Reply(status=404, content="no such model")])
    url = server.base_url.replace("http://", "http://user:sk-in-url@") + "?api_key=sk-in-query"
    settings = _settings(server, base_url=url)
    with LLMClient(settings, sleep=lambda s: None) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES)
    for text in (str(caught.value), settings.describe()):
        assert "sk-in-url" not in text and "sk-in-query" not in text and "127.0.0.1" in text


def test_a_deadline_bounds_each_attempt_and_starts_none_after_it(fake_llm):
    # The loop's budget reaches every call: a server that hangs for 30 s is given up at the deadline (2 s), not
    # after the settings' timeout, and no retry begins past it.
    import time

    server = fake_llm([Reply(content="late", hang_s=30.0), Reply(content="never asked")])
    settings = _settings(server, timeout_s=60.0, max_retries=3)
    started = time.monotonic()
    with LLMClient(settings, sleep=lambda s: None) as client, pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, deadline=started + 2.0)
    assert time.monotonic() - started < 15
    assert len(server.requests) == 1 and caught.value.attempts == 1 and "no answer" in str(caught.value)
    with LLMClient(settings, sleep=lambda s: None) as client, pytest.raises(LLMError, match="budget ran out"):
        client.complete(MESSAGES, deadline=time.monotonic() - 1.0)
