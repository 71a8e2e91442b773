"""Where the LLM generator sends its requests, with which key, and how patiently: the ``[llm]`` table of
:mod:`kernelwright.config` (its settings, parsers and precedence are there; this module adds the key and prices).

    settings = resolve_settings(model="deepseek-chat")   # flags from the CLI; None = not given
    settings.describe()   # 'deepseek-chat at https://api.deepseek.com, key from DEEPSEEK_API_KEY, ...'

Precedence, highest first: the arguments (CLI flags), the environment (``KERNELWRIGHT_LLM_<NAME>`` for every
setting: ``KERNELWRIGHT_LLM_MODEL``, ``KERNELWRIGHT_LLM_BASE_URL``, ``KERNELWRIGHT_LLM_TIMEOUT_S``, ...), the
``[llm]`` table of ``kernelwright.toml``, then the defaults (DeepSeek-R1 through DeepSeek's own API).

API keys are read from the environment only, never from a file that might be committed: the variable named by
``api_key_env``, else ``DEEPSEEK_API_KEY`` for DeepSeek's host and ``OPENAI_API_KEY`` for any other (never one
provider's key sent to another). A server on this machine (vLLM, the test server) needs no key: it gets
``OPENAI_API_KEY`` if set (how vLLM's ``--api-key`` is usually passed), else the placeholder ``EMPTY``, and never
``DEEPSEEK_API_KEY``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kernelwright.config import (
    CONFIG_FILE_NAME,
    DEFAULT,
    LLM_SETTINGS,
    LLM_TABLE,
    ConfigFile,
    Resolved,
    find_file,
    parse_value,
    redact_url,
    resolve_table,
)
from kernelwright.errors import ConfigError

DEFAULT_MODEL: str = LLM_SETTINGS["model"].default
DEFAULT_BASE_URL: str = LLM_SETTINGS["base_url"].default

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


def _default(name: str) -> Any:
    """The ``[llm]`` table's default for ``name``: written once, in kernelwright.config."""
    return LLM_SETTINGS[name].default


@dataclass(frozen=True, kw_only=True)
class LLMSettings:
    """One endpoint and how to call it. ``api_key`` never appears in ``repr`` or :meth:`describe`. What the other
    fields mean, their defaults and their checks: :data:`kernelwright.config.LLM_SETTINGS`."""

    model: str
    base_url: str
    api_key: str = field(repr=False)
    key_source: str  # the variable the key came from, or LOCAL_KEY_SOURCE
    timeout_s: float = _default("timeout_s")
    max_in_flight: int = _default("max_in_flight")
    max_retries: int = _default("max_retries")
    backoff_s: float = _default("backoff_s")
    temperature: float | None = _default("temperature")
    max_tokens: int | None = _default("max_tokens")
    price_prompt_per_mtok: float | None = _default("price_prompt_per_mtok")
    price_completion_per_mtok: float | None = _default("price_completion_per_mtok")

    def __post_init__(self) -> None:
        for name in ("timeout_s", "max_in_flight", "max_retries", "backoff_s", "temperature", "max_tokens",
                     "price_prompt_per_mtok", "price_completion_per_mtok"):
            value = getattr(self, name)
            if value is not None:  # the same checks as a value from the file or the environment
                parse_value(LLM_SETTINGS[name], value, f"LLM {name} {value!r}", "fix the value")

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
            f"{self.model} at {redact_url(self.base_url)}, key from {self.key_source}, "
            f"timeout {self.timeout_s:g} s, "
            f"{self.max_in_flight} in flight, {self.max_retries} retries, {prices}"
        )


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
    resolved = resolve_llm_table(model=model, base_url=base_url, environ=env, file=find_file(config_file, cwd))
    values = {name: value for name, (value, _) in resolved.items()}
    url, chosen_model, api_key_env = values.pop("base_url"), values.pop("model"), values.pop("api_key_env")
    api_key, key_source = _find_key(url, api_key_env, env, named_by=resolved["api_key_env"].source)
    return LLMSettings(model=chosen_model, base_url=url, api_key=api_key, key_source=key_source, **values)


def resolve_llm_table(*, model: str | None = None, base_url: str | None = None,
                      environ: Mapping[str, str] | None = None, file: ConfigFile | None = None) -> dict[str, Resolved]:
    """The ``[llm]`` table through :func:`kernelwright.config.resolve_table`, with the built-in prices for the
    chosen host and model where none are set; no key is looked up."""
    file = find_file() if file is None else file
    if "api_key" in file.table(LLM_TABLE):
        raise ConfigError(
            f"{file.path}: [llm] api_key is not read from files (they get committed); "
            "export the key and name its variable with api_key_env"
        )
    resolved = resolve_table(LLM_TABLE, flags={"model": model, "base_url": base_url}, environ=environ, file=file)
    known = KNOWN_PRICES.get((_host(resolved["base_url"].value), resolved["model"].value))
    for name, price in zip(("price_prompt_per_mtok", "price_completion_per_mtok"), known or ()):
        if resolved[name].source == DEFAULT:
            resolved[name] = Resolved(price, "built-in price table")
    return resolved


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


def _key_variable(url: str, api_key_env: str | None) -> str:
    """The one variable the key for ``url`` is read from."""
    if api_key_env:
        return api_key_env
    if is_local(url):
        # vLLM started with --api-key is usually given the token as OPENAI_API_KEY; a DeepSeek key never is.
        return OPENAI_KEY_ENV
    # No cross-provider fallback: a key goes only to the provider it was made for.
    return DEEPSEEK_KEY_ENV if _is_deepseek(url) else OPENAI_KEY_ENV


def key_status(url: str, api_key_env: str | None, env: Mapping[str, str]) -> str:
    """Which variable the key would come from and whether it is set (``kernelwright config``); never the key."""
    name = _key_variable(url, api_key_env)
    if env.get(name, "").strip():
        return f"from {name} (set)"
    return f"from {name} (not set{'; a local server needs none' if is_local(url) else ''})"


def _find_key(url: str, api_key_env: str | None, env: Mapping[str, str], *, named_by: str) -> tuple[str, str]:
    """(key, the variable it came from). A local server gets the placeholder unless a key is set for it.
    ``named_by``: where ``api_key_env`` was set (the file, or the variable), for the error."""
    name = _key_variable(url, api_key_env)
    value = env.get(name, "").strip()
    if value:
        from kernelwright.isolation.process import register_secret

        register_secret(name)  # whatever its name, it never reaches the verifier's children
        return value, name
    if is_local(url):
        return LOCAL_API_KEY, LOCAL_KEY_SOURCE
    if api_key_env:
        raise ConfigError(
            f"no API key for {url}: {named_by} names {api_key_env} as its variable, but it is not set; "
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
