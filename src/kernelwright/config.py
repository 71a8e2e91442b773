"""kernelwright's one configuration: every setting, where it is read from, and one precedence rule.

    from kernelwright.config import config
    config.trials                      # 5, or $KERNELWRIGHT_TRIALS, or kernelwright.toml's [kernelwright] trials
    with config.scope(trials=2):       # tests and callers override for a block
        ...
    resolve_settings(model="deepseek-chat")   # kernelwright.llm.settings: the LLM endpoint, from the [llm] table

Each setting is taken, highest first, from: an explicit value (a CLI flag, or ``config.scope()``), its environment
variable (``KERNELWRIGHT_<NAME>``; ``KERNELWRIGHT_LLM_<NAME>`` for the ``[llm]`` table; an empty variable counts as
unset), the ``kernelwright.toml`` of the working directory, then its default. ``kernelwright config`` prints every
setting, its value and where it came from.

    [kernelwright]        # the general settings (KNOBS)
    trials = 8
    cache_dir = "/scratch/kernelwright"
    [llm]                 # the LLM generator (LLM_SETTINGS); API keys are read from the environment only
    model = "deepseek-chat"

Values are read afresh on every access (the file is parsed again only when it changes), so a changed environment is
seen at once. A malformed value is a one-line :class:`ConfigError` naming the variable, or the file and key, and the
fix.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from kernelwright.errors import ConfigError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

log = logging.getLogger(__name__)

CONFIG_FILE_NAME = "kernelwright.toml"
GENERAL_TABLE = "kernelwright"
LLM_TABLE = "llm"
DEFAULT = "default"  # the source of a value nobody set

# -- values: each parser takes a variable's text or a toml value and says in its ValueError what it expected --------


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def path(value: Any) -> Path:
    """A folder or file; relative to the working directory (where kernelwright.toml is found), ``~`` expanded."""
    return Path(text(value)).expanduser().absolute()


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) else None
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected one of 1/0/true/false/yes/no/on/off")


def number(low: float | None = None, *, strict: bool = False) -> Callable[[Any], float]:
    """A float (``"1.5"`` from a variable, ``1.5`` or ``2`` from toml), at least ``low`` (above it if ``strict``)."""

    def parse(value: Any) -> float:
        try:
            result = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            result = math.nan
        if math.isnan(result):
            raise ValueError("expected a number")
        if low is not None and (result < low or (strict and result == low)):
            raise ValueError(f"expected a number {'>' if strict else '>='} {low:g}")
        return result

    return parse


def integer(low: int | None = None) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        try:
            result = None if isinstance(value, (bool, float)) else int(value)
        except (TypeError, ValueError):
            result = None
        if result is None:
            raise ValueError("expected an integer")
        if low is not None and result < low:
            raise ValueError(f"expected an integer >= {low}")
        return result

    return parse


def choice(*options: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        word = value.strip().lower() if isinstance(value, str) else None
        if word not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return word

    return parse


def http_url(value: Any) -> str:
    url = text(value)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("it is not an http(s) URL: give e.g. http://localhost:8000/v1")
    return url.rstrip("/")


_SECRET_WORDS = ("key", "token", "secret", "auth")


def redact_url(url: str | None) -> str | None:
    """Drop credentials a base URL may carry (``https://user:key@host``, ``?api_key=...``): for anything written
    down (run databases, error messages, ``kernelwright config``)."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not any(word in k.lower() for word in _SECRET_WORDS)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str | None) -> list[str]:
    """The credentials :func:`redact_url` drops, as they appear in text (to scrub a server's or a library's
    message that quotes the URL)."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [parts.netloc.rsplit("@", 1)[0]] if "@" in parts.netloc else []
    found += [v for k, v in parse_qsl(parts.query) if v and any(word in k.lower() for word in _SECRET_WORDS)]
    return found


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelwright"


def _default_scratch_dir() -> str:
    """Memory-backed /dev/shm where it has room for a large problem's trials (its references and inputs are
    written there and read back by the next process), else the system's temporary directory (""), which is also
    what a set TMPDIR asks for."""
    if os.environ.get("TMPDIR"):  # the user chose where temporary files go
        return ""
    try:
        stat = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and stat.f_bavail * stat.f_frsize >= 32 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return ""


# -- the settings ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[Any], Any]
    default: Any  # a value, or a function of no arguments that computes it when read
    doc: str
    table: str = GENERAL_TABLE

    @property
    def env(self) -> str:
        prefix = "KERNELWRIGHT_" if self.table == GENERAL_TABLE else f"KERNELWRIGHT_{self.table.upper()}_"
        return prefix + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_value(self) -> Any:
        return self.default() if callable(self.default) and not isinstance(self.default, type) else self.default


def _table(*settings: Setting) -> dict[str, Setting]:
    return {setting.name: setting for setting in settings}


KNOBS: dict[str, Setting] = _table(
    Setting("cache_dir", path, _default_cache_dir, "content-hashed cache (calibration, builds, decoys, runs)"),
    Setting("device", choice("auto", "cpu", "cuda"), "auto", "where candidates run: auto, cpu or cuda"),
    Setting("trials", integer(1), 5, "correctness trials with fresh random inputs (at least 5 are always run)"),
    Setting("tolerance_factor", number(0, strict=True), 8.0,
            "a candidate's error may be this multiple of PyTorch's own error"),
    Setting("timeout_s", number(0, strict=True), 600.0, "wall-clock limit for one isolated child process"),
    Setting("timing_min_reps", integer(1), 20, "fewest timed repetitions"),
    Setting("timing_max_reps", integer(1), 2000, "most timed repetitions"),
    Setting("timing_target_ms", number(0, strict=True), 600.0, "aim for this much timed work per measurement"),
    # Off until a GPU run compares it side by side with full-length timing (medians, spreads, reps): a
    # measurement cut short may read a boosted clock (verify/child/timing.py); 0.002 is the value to try.
    Setting("timing_stable_rel", number(0), 0.0,
            "end a measurement early once its median's standard error is at most this share of it (0: never)"),
    Setting("timing_warmup_ms", number(0), 100.0, "warm-up time before measuring"),
    Setting("input_sets", integer(1), 4, "input sets rotated among timed calls"),
    Setting("scratch_dir", text, _default_scratch_dir,
            "where the verifier's per-verify files go (default: /dev/shm with 32 GiB free, else the system's "
            "temporary directory; TMPDIR set: that)"),
    Setting("scratch_limit_gb", number(0), 0.0,
            "the most GB one verify's files may take in scratch_dir (0: what it has); trials that need more are "
            "checked in groups that fit"),
    Setting("keep_workdir", boolean, False, "keep the verifier's scratch directories for inspection"),
    Setting("judge_on_device", boolean, True,
            "compare a GPU candidate's outputs with the float64 reference on the GPU (the host took ~10 s for a "
            "67M-element output)"),
    Setting("executed", boolean, True,
            "on a GPU, profile one call of every passed candidate under Nsight Compute for executed instruction "
            "counts (verify/executed.py); --no-executed turns it off for one run"),
    Setting("executed_timeout_s", number(0, strict=True), 120.0,
            "the most one profiled call under Nsight Compute may take (then: a note and the static view)"),
    Setting("prestart", boolean, True,
            "start the verifier's candidate and baseline processes while the reference runs (imports and CUDA "
            "context ready; each still serves one job)"),
    Setting("reference_cache_gb", number(), -1.0,
            "memory for references reused by the verifies of one run (same problem content, seed, trials, sizes, "
            "device); <0: a quarter of this machine's memory (a full-size level-1 reference can hold 11 GB); "
            "0 turns the reuse off"),
    Setting("job_box", choice("auto", "namespace", "subreaper", "none"), "auto",
            "how each isolated job is closed in: its own PID and mount namespaces (auto: where the kernel allows, "
            "else subreaper), a child subreaper only, or none (every process a job starts must end with it)"),
    Setting("job_zygote", boolean, True,
            "fork each job from a warm parent that has imported torch, Triton and the job modules (about 0.3 s a "
            "job instead of 4 s); false: a fresh interpreter for every job"),
    Setting("cpu_max_elements", integer(1), 1 << 18,
            "without a GPU, problems whose inputs hold more elements are checked at reduced sizes"),
    Setting("child_memory_gb", number(), 0.0,
            "address-space limit for CPU-only children (0: three quarters of this machine's memory; <0: none)"),
    Setting("arch", text, "sm_90a", "arch whose instructions are summarised when no GPU is present"),
    Setting("cpu_instructions", boolean, True,
            "on a verify without a GPU, cross-compile the candidate's Triton kernels for arch and summarise their "
            "instructions (about 0.7 s a verify on 2 cores); false: no instruction summary unless --arch asks"),
    Setting("backend", choice("triton", "cuda", "all"), "all",
            "template back ends the search tries: triton, cuda (CUDA C++ with inline PTX, where a family has it) or "
            "all"),
    Setting("ptx_rewrites", boolean, True,
            "on a GPU, time the PTX rewrite passes (cache and eviction hints) on the tuned Triton leader and keep "
            "one only where it measures faster"),
    # Set by bench for the processes it starts (each worker and its children inherit them); a user sets them to make
    # separate kernelwright commands on one GPU take turns measuring.
    Setting("gpu_lock", text, None, "file lock the processes sharing a GPU take turns on for their measurements "
                                    "(unset: no lock; bench sets one per GPU)"),
    Setting("gpu_lock_holds", text, None, "where long holds of the GPU lock are logged (unset: beside the lock)"),
    Setting("profile_jobs", text, None, "a folder: every isolated child job writes its cProfile there (diagnostic)"),
)

_llm = functools.partial(Setting, table=LLM_TABLE)
LLM_SETTINGS: dict[str, Setting] = _table(
    _llm("model", text, "deepseek-reasoner", "model name"),
    _llm("base_url", http_url, "https://api.deepseek.com", "OpenAI-compatible server"),
    _llm("api_key_env", text, None, "the variable holding the API key (unset: DEEPSEEK_API_KEY for DeepSeek's "
                                    "host, OPENAI_API_KEY for any other); keys are never read from a file"),
    _llm("timeout_s", number(0, strict=True), 600.0,
         "per attempt; DeepSeek-R1 can think for minutes before its first byte"),
    _llm("max_in_flight", integer(1), 8, "requests at once"),
    _llm("max_retries", integer(0), 5, "retries after the first attempt, for 429, 5xx, timeouts and connection errors"),
    _llm("backoff_s", number(0), 2.0, "base of the exponential backoff: about 2, 4, 8 ... seconds, jittered"),
    _llm("temperature", number(0), None, "sampling temperature (unset: the server's default)"),
    _llm("max_tokens", integer(1), None, "completion tokens per call (unset: the server's default)"),
    _llm("price_prompt_per_mtok", number(0), None, "USD per million prompt tokens (unset: the built-in table's)"),
    _llm("price_completion_per_mtok", number(0), None, "USD per million completion tokens (unset: likewise)"),
)

TABLES: dict[str, dict[str, Setting]] = {GENERAL_TABLE: KNOBS, LLM_TABLE: LLM_SETTINGS}


class Resolved(NamedTuple):
    value: Any
    source: str  # "flag --model", "scope", the variable's name, the file's path, or DEFAULT


def parse_value(setting: Setting, raw: Any, where: str, fix: str) -> Any:
    """``setting``'s value from ``raw``, or a one-line ConfigError: '<where> is not valid (<why>); <fix>'."""
    try:
        return setting.parse(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where} is not valid ({exc}); {fix}") from None


# -- the file ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigFile:
    path: Path | None  # None: no file applies
    data: Mapping[str, Any]

    def table(self, name: str) -> Mapping[str, Any]:
        table = self.data.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{self.path}: '{name}' must be a table ([{name}]); fix the file")
        return table


def find_file(config_file: Path | None = None, cwd: Path | None = None) -> ConfigFile:
    """``config_file`` (which must exist), else ``kernelwright.toml`` in ``cwd`` (the working directory) if there."""
    if config_file is None:
        try:
            config_file = (Path.cwd() if cwd is None else cwd) / CONFIG_FILE_NAME
        except OSError:  # the working directory was removed: no file applies
            return ConfigFile(None, {})
        if not config_file.is_file():
            return ConfigFile(None, {})
    try:
        stat = config_file.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read {config_file}: {exc.strerror or exc}; check the path") from None
    return ConfigFile(config_file, _load(str(config_file), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _load(file: str, mtime_ns: int, size: int) -> Mapping[str, Any]:
    """The parsed file, kept while its modification time and size stay the same."""
    try:
        data = tomllib.loads(Path(file).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {file}: {exc.strerror or exc}; check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML ({exc}); fix the file") from None
    ignored = sorted(set(data) - set(TABLES))
    if ignored:  # not an error: files written before the [kernelwright] table keep working
        log.warning("%s: %s ignored; kernelwright reads the tables [%s]", file, ", ".join(ignored),
                    "] and [".join(TABLES))
    return data


def _file_values(table: str, file: ConfigFile) -> dict[str, Resolved]:
    settings, given = TABLES[table], file.table(table)
    unknown = sorted(set(given) - set(settings))
    if unknown:
        raise ConfigError(f"{file.path}: unknown [{table}] key(s) {', '.join(unknown)}; known: {', '.join(settings)}")
    return {
        name: Resolved(parse_value(settings[name], value, f"{file.path}: [{table}] {name} = {value!r}",
                                   "fix the file"), str(file.path))
        for name, value in given.items()
    }


def _resolve(setting: Setting, from_file: Mapping[str, Resolved], environ: Mapping[str, str],
             flag: Any = None) -> Resolved:
    """The one precedence rule: the flag, the variable, the file, the default."""
    if flag is not None:
        return Resolved(parse_value(setting, flag, f"{setting.flag} {flag!r}", "fix the flag"), "flag " + setting.flag)
    raw = environ.get(setting.env, "").strip()
    if raw:
        return Resolved(parse_value(setting, raw, f"{setting.env}={raw!r}", "unset it or fix its value"), setting.env)
    return from_file.get(setting.name) or Resolved(setting.default_value(), DEFAULT)


def resolve_table(table: str, *, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                  file: ConfigFile | None = None) -> dict[str, Resolved]:
    """Every setting of ``table`` with where it came from; ``flags`` (None: not given) > ``environ`` > ``file``
    (default: the working directory's) > defaults. The whole file table is checked, even values set elsewhere."""
    from_file = _file_values(table, find_file() if file is None else file)
    env = os.environ if environ is None else environ
    return {name: _resolve(setting, from_file, env, (flags or {}).get(name))
            for name, setting in TABLES[table].items()}


# -- the object --------------------------------------------------------------------------------------------------


class Config:
    """Read the ``[kernelwright]`` settings as attributes (see :data:`KNOBS`); ``llm()`` for the ``[llm]`` table."""

    def __init__(self) -> None:
        self._layers: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.resolve(name).value

    def resolve(self, name: str) -> Resolved:
        """The value of setting ``name`` and where it came from."""
        knob = KNOBS.get(name)
        if knob is None:
            raise AttributeError(f"kernelwright has no setting {name!r}; known: {', '.join(sorted(KNOBS))}")
        for layer in reversed(self._layers):
            if name in layer:
                return Resolved(layer[name], "scope")
        return _resolve(knob, _file_values(GENERAL_TABLE, find_file()), os.environ)

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
