"""Where the LLM generator sends its requests, with which key, and how patiently.

    settings = resolve_settings(model="deepseek-chat")   # flags from the CLI; None = not given
    settings.describe()   # 'deepseek-chat at https://api.deepseek.com, key from DEEPSEEK_API_KEY, ...'

Precedence, highest first: the arguments (CLI flags), the environment (``KERNELWRIGHT_LLM_MODEL``,
``KERNELWRIGHT_LLM_BASE_URL``, ``KERNELWRIGHT_LLM_TIMEOUT_S``, ``KERNELWRIGHT_LLM_MAX_IN_FLIGHT``), the ``[llm]``
table of ``kernelwright.toml``, then the defaults (DeepSeek-R1 through DeepSeek's own API).

API keys are read from the environment only, never from a file that might be committed: the variable named by
``api_key_env`` in the toml, else ``DEEPSEEK_API_KEY`` for DeepSeek's host and ``OPENAI_API_KEY`` for any other
(never one provider's key sent to another). A server on this machine (vLLM, the test server) needs no key: it gets
``OPENAI_API_KEY`` if set (how vLLM's ``--api-key`` is usually passed), else the placeholder ``EMPTY``, and never
``DEEPSEEK_API_KEY``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kernelwright.errors import ConfigError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_MODEL = "deepseek-reasoner"
DEFAULT_BASE_URL = "https://api.deepseek.com"
CONFIG_FILE_NAME = "kernelwright.toml"

LOCAL_API_KEY = "EMPTY"  # what vLLM's documentation sends when the server was started without --api-key
LOCAL_KEY_SOURCE = "none (local server)"

DEEPSEEK_KEY_ENV = "DEEPSEEK_API_KEY"
OPENAI_KEY_ENV = "OPENAI_API_KEY"

# USD per million tokens, (prompt, completion), keyed by (host, model) so that the same model name served by a
# local vLLM is not charged. Source: https://api-docs.deepseek.com/quick_start/pricing — DeepSeek-V3.2 prices in
# effect since 2025-09-29 (input at the cache-miss rate, so costs are an upper bound; cache hits bill $0.028),
# last confirmed from a copy of that page dated April 2026. POSSIBLY STALE: prices change without notice;
# kernelwright.toml's price_prompt_per_mtok / price_completion_per_mtok override these.
KNOWN_PRICES: dict[tuple[str, str], tuple[float, float]] = {
    ("api.deepseek.com", "deepseek-reasoner"): (0.28, 0.42),
    ("api.deepseek.com", "deepseek-chat"): (0.28, 0.42),
}


@dataclass(frozen=True, kw_only=True)
class LLMSettings:
    """One endpoint and how to call it. ``api_key`` never appears in ``repr`` or :meth:`describe`."""

    model: str
    base_url: str
    api_key: str = field(repr=False)
    key_source: str  # the variable the key came from, or LOCAL_KEY_SOURCE
    timeout_s: float = 600.0  # per attempt; DeepSeek-R1 can think for minutes before its first byte
    max_in_flight: int = 8
    max_retries: int = 5  # retries after the first attempt, for 429, 5xx, timeouts and connection errors
    backoff_s: float = 2.0  # base of the exponential backoff: about 2, 4, 8 ... seconds, jittered
    temperature: float | None = None  # None: the server's default
    max_tokens: int | None = None  # None: the server's default
    price_prompt_per_mtok: float | None = None  # USD per million tokens; None: unknown, no cost reported
    price_completion_per_mtok: float | None = None

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ConfigError(f"LLM timeout_s must be positive, got {self.timeout_s}")
        if self.max_in_flight < 1:
            raise ConfigError(f"LLM max_in_flight must be at least 1, got {self.max_in_flight}")
        if self.max_retries < 0:
            raise ConfigError(f"LLM max_retries must be 0 or more, got {self.max_retries}")
        if self.backoff_s < 0:
            raise ConfigError(f"LLM backoff_s must be 0 or more, got {self.backoff_s}")

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What a call with these token counts cost, or None when either price is unknown."""
        if self.price_prompt_per_mtok is None or self.price_completion_per_mtok is None:
            return None
        return (
            prompt_tokens * self.price_prompt_per_mtok + completion_tokens * self.price_completion_per_mtok
        ) / 1e6

    def describe(self) -> str:
        """One line for logs and the CLI; names where the key came from, never the key."""
        if self.price_prompt_per_mtok is None or self.price_completion_per_mtok is None:
            prices = "price unknown"
        else:
            prices = f"${self.price_prompt_per_mtok:g}/${self.price_completion_per_mtok:g} per Mtok in/out"
        return (
            f"{self.model} at {self.base_url}, key from {self.key_source}, timeout {self.timeout_s:g} s, "
            f"{self.max_in_flight} in flight, {self.max_retries} retries, {prices}"
        )


@dataclass(frozen=True)
class _Option:
    """One ``[llm]`` setting: how to read it and which environment variable (if any) overrides the file."""

    parse: Callable[[Any], Any]
    env: str | None = None


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _number(low: float, *, strict: bool) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        number = float(value)  # "1.5" from the environment, 1.5 or 2 from toml
        if number < low or (strict and number == low):
            raise ValueError(f"expected a number {'>' if strict else '>='} {low:g}")
        return number

    return parse


def _integer(low: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, (bool, float)):
            raise ValueError("expected an integer")
        number = int(value)
        if number < low:
            raise ValueError(f"expected an integer >= {low}")
        return number

    return parse


_OPTIONS: dict[str, _Option] = {
    "model": _Option(_text, "KERNELWRIGHT_LLM_MODEL"),
    "base_url": _Option(_text, "KERNELWRIGHT_LLM_BASE_URL"),
    "api_key_env": _Option(_text),
    "timeout_s": _Option(_number(0.0, strict=True), "KERNELWRIGHT_LLM_TIMEOUT_S"),
    "max_in_flight": _Option(_integer(1), "KERNELWRIGHT_LLM_MAX_IN_FLIGHT"),
    "max_retries": _Option(_integer(0)),
    "backoff_s": _Option(_number(0.0, strict=False)),
    "temperature": _Option(_number(0.0, strict=False)),
    "max_tokens": _Option(_integer(1)),
    "price_prompt_per_mtok": _Option(_number(0.0, strict=False)),
    "price_completion_per_mtok": _Option(_number(0.0, strict=False)),
}


def resolve_settings(
    *,
    model: str | None = None,
    base_url: str | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LLMSettings:
    """Settings from flags > environment > ``kernelwright.toml`` ``[llm]`` > defaults; :class:`ConfigError` if unusable.

    ``config_file`` must exist when given; otherwise ``cwd/kernelwright.toml`` is read if present.
    """
    env = os.environ if environ is None else environ
    values = _read_config_file(config_file, cwd)
    for name, option in _OPTIONS.items():
        raw = env.get(option.env, "").strip() if option.env else ""
        if raw:  # an empty variable counts as unset, so `export KERNELWRIGHT_LLM_MODEL=` clears it
            values[name] = _parse(option, raw, f"{option.env}={raw!r}", "unset it or fix its value")
    for name, flag in (("model", model), ("base_url", base_url)):
        if flag is not None:
            values[name] = _parse(
                _OPTIONS[name], flag, f"--{name.replace('_', '-')} {flag!r}", "fix the flag"
            )

    url = _check_url(values.get("base_url", DEFAULT_BASE_URL))
    chosen_model = values.get("model", DEFAULT_MODEL)
    api_key, key_source = _find_key(url, values.get("api_key_env"), env)
    prompt_price, completion_price = KNOWN_PRICES.get((_host(url), chosen_model), (None, None))
    values.setdefault("price_prompt_per_mtok", prompt_price)
    values.setdefault("price_completion_per_mtok", completion_price)
    for name in ("model", "base_url", "api_key_env"):
        values.pop(name, None)
    return LLMSettings(model=chosen_model, base_url=url, api_key=api_key, key_source=key_source, **values)


def _parse(option: _Option, raw: Any, where: str, fix: str) -> Any:
    try:
        return option.parse(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where} is not valid ({exc}); {fix}") from None


def _read_config_file(config_file: Path | None, cwd: Path | None) -> dict[str, Any]:
    """The parsed ``[llm]`` table, or {} when no file applies."""
    if config_file is None:
        config_file = (Path.cwd() if cwd is None else cwd) / CONFIG_FILE_NAME
        if not config_file.is_file():
            return {}
    try:
        data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {config_file}: {exc.strerror or exc}; check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file} is not valid TOML ({exc}); fix the file") from None
    table = data.get("llm", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{config_file}: 'llm' must be a table ([llm]); fix the file")
    if "api_key" in table:
        raise ConfigError(
            f"{config_file}: [llm] api_key is not read from files (they get committed); "
            "export the key and name its variable with api_key_env"
        )
    unknown = sorted(set(table) - set(_OPTIONS))
    if unknown:
        raise ConfigError(
            f"{config_file}: unknown [llm] key(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}"
        )
    return {
        name: _parse(_OPTIONS[name], value, f"{config_file}: [llm] {name} = {value!r}", "fix the file")
        for name, value in table.items()
    }


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"LLM base URL {url!r} is not an http(s) URL; give e.g. http://localhost:8000/v1")
    return url.rstrip("/")


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _is_deepseek(url: str) -> bool:
    host = _host(url)
    return host == "deepseek.com" or host.endswith(".deepseek.com")


def is_local(url: str) -> bool:
    """True for a server on this machine: localhost, 127.0.0.0/8, ::1 (and 0.0.0.0, as vLLM prints its address)."""
    host = _host(url)
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _find_key(url: str, api_key_env: str | None, env: Mapping[str, str]) -> tuple[str, str]:
    """(key, the variable it came from). A local server gets the placeholder unless a key is set for it."""
    if api_key_env:
        candidates = [api_key_env]
    elif is_local(url):
        # vLLM started with --api-key is usually given the token as OPENAI_API_KEY; a DeepSeek key never is.
        candidates = [OPENAI_KEY_ENV]
    elif _is_deepseek(url):
        # No cross-provider fallback: a key goes only to the provider it was made for.
        candidates = [DEEPSEEK_KEY_ENV]
    else:
        candidates = [OPENAI_KEY_ENV]
    for name in candidates:
        value = env.get(name, "").strip()
        if value:
            from kernelwright.isolation.process import register_secret

            register_secret(name)  # whatever its name, it never reaches the verifier's children
            return value, name
    if is_local(url):
        return LOCAL_API_KEY, LOCAL_KEY_SOURCE
    if api_key_env:
        raise ConfigError(
            f"no API key for {url}: kernelwright.toml names {api_key_env} as its variable, but it is not set; "
            f"export {api_key_env}, or use --generator templates"
        )
    if _is_deepseek(url):
        raise ConfigError(
            f"no API key for {url}: export {DEEPSEEK_KEY_ENV} (or {OPENAI_KEY_ENV} with --base-url URL for any "
            "OpenAI-compatible server such as vLLM), or use --generator templates"
        )
    raise ConfigError(
        f"no API key for {url}: export {OPENAI_KEY_ENV} (or name another variable with api_key_env in "
        f"{CONFIG_FILE_NAME}'s [llm] table), or use --generator templates"
    )
