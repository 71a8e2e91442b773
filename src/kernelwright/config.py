"""One configuration object, backed by ``KERNELWRIGHT_*`` environment variables, with a scoped override for tests.

    from kernelwright.config import config
    config.trials                      # 5, or $KERNELWRIGHT_TRIALS
    with config.scope(trials=2):       # tests and callers override for a block
        ...

Precedence: ``scope()`` overrides, then the environment, then the default. Values are parsed on every read, so a
changed environment is seen at once; a malformed variable is a :class:`ConfigError` naming the variable.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.errors import ConfigError


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelwright"


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected one of 1/0/true/false/yes/no/on/off, got {raw!r}")


@dataclass(frozen=True)
class Knob:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str

    @property
    def env(self) -> str:
        return "KERNELWRIGHT_" + self.name.upper()

    def default_value(self) -> Any:
        return self.default() if callable(self.default) and not isinstance(self.default, type) else self.default


KNOBS: dict[str, Knob] = {
    knob.name: knob
    for knob in (
        Knob("cache_dir", Path, _default_cache_dir, "content-hashed cache (calibration, builds, decoys)"),
        Knob("device", str, "auto", "where candidates run: auto, cpu or cuda"),
        Knob("trials", int, 5, "correctness trials with fresh random inputs (at least 5 are always run)"),
        Knob("tolerance_factor", float, 8.0, "a candidate's error may be this multiple of PyTorch's own error"),
        Knob("timeout_s", float, 600.0, "wall-clock limit for one isolated child process"),
        Knob("timing_min_reps", int, 20, "fewest timed repetitions"),
        Knob("timing_max_reps", int, 2000, "most timed repetitions"),
        Knob("timing_target_ms", float, 600.0, "aim for this much timed work per measurement"),
        Knob("timing_warmup_ms", float, 100.0, "warm-up time before measuring"),
        Knob("input_sets", int, 4, "input sets rotated among timed calls"),
        Knob("keep_workdir", _parse_bool, False, "keep the verifier's scratch directories for inspection"),
        Knob("cpu_max_elements", int, 1 << 18,
             "without a GPU, problems whose inputs hold more elements are checked at reduced sizes"),
        Knob("child_memory_gb", float, 0.0,
             "address-space limit for CPU-only children (0: three quarters of this machine's memory; <0: none)"),
        Knob("arch", str, "sm_90a", "arch whose instructions are summarised when no GPU is present"),
    )
}


class Config:
    """Read settings as attributes; see :data:`KNOBS` for names, variables and defaults."""

    def __init__(self) -> None:
        self._layers: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        knob = KNOBS.get(name)
        if knob is None:
            raise AttributeError(f"kernelwright has no setting {name!r}; known: {', '.join(sorted(KNOBS))}")
        for layer in reversed(self._layers):
            if name in layer:
                return layer[name]
        raw = os.environ.get(knob.env)
        if raw is None:
            return knob.default_value()
        try:
            return knob.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{knob.env}={raw!r} is not valid ({exc}); unset it or fix its value") from None

    @contextlib.contextmanager
    def scope(self, **values: Any) -> Iterator[Config]:
        unknown = sorted(set(values) - set(KNOBS))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(KNOBS))}")
        self._layers.append(dict(values))
        try:
            yield self
        finally:
            self._layers.pop()

    def describe(self) -> list[tuple[str, str, Any, str]]:
        """(name, variable, current value, doc) for every setting."""
        return [(k.name, k.env, getattr(self, k.name), k.doc) for k in KNOBS.values()]


config = Config()
