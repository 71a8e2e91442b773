"""The run database: every problem, run, candidate, verdict and LLM call of a search, in one SQLite file.

    db = RunDB()                                   # config.cache_dir / "runs.sqlite"
    problem_id = db.add_problem(path, source)
    run_id = db.start_run(problem_id, generator="llm", strategy="evolutionary", settings={...},
                          arch="sm_90a", toolchain=toolchain_fingerprint(), device="NVIDIA H200")
    cid, is_new = db.add_candidate(run_id, source, origin="llm", llm_call_id=call_id)
    cached = db.cached_verdict(problem_sha, candidate_sha, arch=..., toolchain=..., options_key=key)
    verdict_json = cached if cached is not None else verify(...).to_json()
    db.record_verdict(cid, verdict_json, arch=..., toolchain=..., options_key=key)
    db.finish_run(run_id, "finished", {"best": cid, ...})

Durability: every call commits before it returns. With WAL and ``synchronous=NORMAL`` a committed transaction
survives the writer being killed (SIGKILL included); only a power cut or OS crash can lose the last few. A
transaction cut short by a kill is rolled back when the file is next opened.

A run killed without the chance to say so stays 'running' in the file; readers report it 'interrupted' once its
process (same host, same pid *and* start time, so a reused pid does not fool it) is gone, and ``resume_run`` picks
it up again.

Verdicts are shared across runs: one is keyed by (problem sha256, candidate sha256, arch, toolchain, options key),
so a candidate already verified for the same problem on the same target with the same toolchain and verification
options is not verified again. Timings differ between GPUs of one arch (H100 and H200 are both sm_90a): where a
verdict carries timings, put the device's name in ``arch`` or in the options key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import platform
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.config import redact_url
from kernelwright.errors import InputError
from kernelwright.search.db_schema import MIGRATIONS, SCHEMA_VERSION

log = logging.getLogger(__name__)

RUN_STATUSES = ("running", "finished", "interrupted", "failed")
GENERATORS = ("templates", "llm", "hybrid")
ORIGINS = ("template", "llm", "seed", "mutation", "crossover")
BUSY_TIMEOUT_S = 30.0



def default_path() -> Path:
    from kernelwright.config import config

    return Path(config.cache_dir) / "runs.sqlite"


def source_sha256(source: str) -> str:
    """The content hash used for problems and candidates (the same as the verifier's ``*_sha256``)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def toolchain_fingerprint() -> str:
    """What, besides the source, decides a verdict: ``torch-2.5.1+cu124/triton-3.1.0/cuda-12.4/py-3.11.7``.
    Imports torch (once per run; not for reading the database)."""
    from importlib import metadata

    parts = []
    try:
        import torch

        parts.append(f"torch-{torch.__version__}")
        gpu_runtime = torch.version.cuda or (f"hip{torch.version.hip}" if getattr(torch.version, "hip", None)
                                             else "none")
    except ImportError:
        parts.append("torch-none")
        gpu_runtime = "none"
    try:
        parts.append(f"triton-{metadata.version('triton')}")
    except metadata.PackageNotFoundError:
        parts.append("triton-none")
    parts += [f"cuda-{gpu_runtime}", f"py-{platform.python_version()}"]
    return "/".join(parts)


def options_key(options: Mapping[str, Any] | Any) -> str:
    """A short, stable key for verification options (a mapping, or a dataclass such as ``VerifyOptions``).
    Leave out what must not split the cache (a random seed) before calling."""
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        options = dataclasses.asdict(options)
    text = json.dumps(options, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def verdict_options_key(*, device: str, policy: Any, reduced: bool) -> str:
    """The options key of a search's verdicts (``policy``: a generate ``Policy``). What, besides problem, source, arch and toolchain, changes a verdict (for the verdict cache) — including the
    verifier's own version and settings, so a stronger protocol never inherits an old "passed"."""
    from kernelwright.config import config
    from kernelwright.verify.trials import plan_trials
    from kernelwright.version import __version__

    # The plan's kinds too: a trial added to the protocol (the sparse ones) makes earlier verdicts stale.
    kinds = [t.kind for t in plan_trials(0, config.trials)]
    return json.dumps({"device": device, "allow_tf32": policy.allow_tf32,
                       "allow_reduced_precision": policy.allow_reduced_precision, "reduced_sizes": reduced,
                       "kernelwright": __version__, "trials": config.trials, "trial_kinds": kinds}, sort_keys=True)


# ------------------------------------------------------------------------------------------------------ records


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: int
    problem_id: int
    problem_name: str
    problem_path: str
    problem_sha256: str
    started: float  # unix time
    finished: float | None
    status: str  # as stored, except a 'running' run whose process is gone reads 'interrupted'
    generator: str
    strategy: str
    settings: Mapping[str, Any]
    arch: str
    toolchain: str
    device: str
    pid: int
    host: str
    resumes: int
    summary: Mapping[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One line of ``kernelwright runs``."""

    id: int
    started: float
    finished: float | None
    status: str
    problem_name: str
    generator: str
    strategy: str
    arch: str
    device: str
    candidates: int
    passed: int
    best_ms: float | None  # fastest passed candidate
    best_speedup: float | None  # best passed speedup over eager PyTorch
    llm_calls: int
    tokens: int
    cost_usd: float | None


@dataclass(frozen=True, kw_only=True)
class CallRow:
    """One LLM call as stored (no messages: they can be large; read them with ``runs show --json``)."""

    id: int
    tag: str
    response_text: str | None
    error: str | None
    created: float


@dataclass(frozen=True, kw_only=True)
class CandidateRow:
    id: int
    run_id: int
    sha256: str
    source: str
    origin: str
    parent_id: int | None
    parent2_id: int | None
    lineage: int
    round: int
    llm_call_id: int | None
    created: float
    status: str  # 'new' until the loop says otherwise; a verdict's status once verified
    median_ms: float | None
    error: str | None
    meta: Mapping[str, Any] | None
    verdict_id: int | None
    speedup_eager: float | None


# ------------------------------------------------------------------------------------------------ processes


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks) of a Linux process, or None where /proc has no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0], fields[19]


def _process_start(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def _process_alive(pid: int, start: str | None) -> bool:
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        return state not in ("Z", "X") and (start is None or started == start)
    if Path("/proc/self/stat").exists():
        return False  # Linux, and /proc has no such process
    if os.name == "nt":
        return True  # cannot tell safely: there os.kill(pid, 0) sends CTRL_C_EVENT
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _median_ms(verdict_json: Mapping[str, Any]) -> float | None:
    value = ((verdict_json.get("timing") or {}).get("candidate") or {}).get("median_ms")
    return float(value) if value is not None else None


def _speedup_eager(verdict_json: Mapping[str, Any]) -> float | None:
    value = (verdict_json.get("speedups") or {}).get("vs_eager")
    return float(value) if value is not None else None


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


# ------------------------------------------------------------------------------------------------ database


class RunDB:
    """The run database (see the module docstring). One connection, guarded by a lock: safe from several threads;
    several processes may open the same file (WAL lets readers run beside one writer)."""

    def __init__(self, path: str | Path | None = None, *, create: bool = True) -> None:
        self.path = Path(path) if path is not None else default_path()
        if not create and not self.path.exists():
            raise InputError(f"no runs yet at {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._host = socket.gethostname()
        self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                     check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        try:
            self._configure()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise InputError(f"{self.path} is not a kernelwright run database ({exc}); move it aside or "
                             "name another with --db") from None
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.warning("%s: SQLite refused WAL mode (journal_mode=%s); a killed run may lose its last write",
                        self.path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        if self._user_version() == SCHEMA_VERSION:
            return
        with self._write() as conn:  # re-read under the write lock: another process may have migrated
            version = self._user_version()
            if version > SCHEMA_VERSION:
                raise InputError(f"{self.path} was written by a newer kernelwright (schema {version}, this one "
                                 f"reads {SCHEMA_VERSION}); upgrade kernelwright or name another file with --db")
            for target in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[target]:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {target + 1}")

    def _user_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, committed before the caller's method returns."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for reads that take several statements."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> RunDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------------- problems, runs

    def add_problem(self, path: str | Path, source: str) -> int:
        """The problem's id, by the sha256 of its source; the first path and name seen are kept."""
        sha = source_sha256(source)
        with self._write() as conn:
            conn.execute("INSERT INTO problems (sha256, name, path, source, created) VALUES (?, ?, ?, ?, ?) "
                         "ON CONFLICT (sha256) DO NOTHING", (sha, Path(path).stem, str(path), source, time.time()))
            return int(conn.execute("SELECT id FROM problems WHERE sha256 = ?", (sha,)).fetchone()[0])

    def start_run(self, problem_id: int, *, generator: str, strategy: str, settings: Mapping[str, Any],
                  arch: str, toolchain: str, device: str) -> int:
        if generator not in GENERATORS:
            raise ValueError(f"generator {generator!r} is not one of {', '.join(GENERATORS)}")
        pid = os.getpid()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (problem_id, started, status, generator, strategy, settings_json, arch, toolchain,"
                " device, pid, pid_start, host) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (problem_id, time.time(), generator, strategy, json.dumps(dict(settings), sort_keys=True, default=str),
                 arch, toolchain, device, pid, _process_start(pid), self._host))
            return int(cursor.lastrowid)

    def resume_run(self, run_id: int) -> RunRow:
        """Mark an unfinished run as running again in this process. Raises :class:`InputError` for an unknown or
        finished run, or one whose process is still alive on this host."""
        pid = os.getpid()
        with self._write() as conn:
            row = self._run_row(conn, run_id)
            if row.status == "finished":
                raise InputError(f"run {run_id} finished on {_when(row.finished)}; nothing to resume (start a new "
                                 "run, or show it with 'kernelwright runs show')")
            if row.status == "running" and row.host == self._host and row.pid != pid:
                raise InputError(f"run {run_id} is still running (pid {row.pid} on {row.host}); stop that process "
                                 "before resuming")
            if row.status == "running" and row.host != self._host:
                log.warning("run %d was last run on host %s, still marked running; taking it over", run_id, row.host)
            conn.execute("UPDATE runs SET status = 'running', finished = NULL, pid = ?, pid_start = ?, host = ?, "
                         "resumes = resumes + 1 WHERE id = ?", (pid, _process_start(pid), self._host, run_id))
            return self._run_row(conn, run_id)

    def set_summary(self, run_id: int, summary: Mapping[str, Any]) -> None:
        """Store the run's summary (e.g. the scaling curve so far) without finishing it."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute("UPDATE runs SET summary_json = ? WHERE id = ?",
                         (json.dumps(dict(summary), default=str), run_id))

    def finish_run(self, run_id: int, status: str, summary: Mapping[str, Any]) -> None:
        if status not in RUN_STATUSES or status == "running":
            raise ValueError(f"a run finishes as finished, interrupted or failed, not {status!r}")
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute("UPDATE runs SET status = ?, finished = ?, summary_json = ? WHERE id = ?",
                         (status, time.time(), json.dumps(dict(summary), default=str), run_id))

    def run(self, run_id: int) -> RunRow:
        """Raises :class:`InputError` (naming the newest runs) for an unknown id."""
        with self._read() as conn:
            return self._run_row(conn, run_id)

    def runs(self, limit: int = 50, *, problem_sha256: str | None = None) -> list[RunSummary]:
        """The newest runs first, optionally of one problem only."""
        query = """
            SELECT r.id, r.started, r.finished, r.status, r.generator, r.strategy, r.arch, r.device, r.pid,
                   r.pid_start, r.host, p.name AS problem_name,
                   (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) AS n_candidates,
                   (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id AND c.status = 'passed') AS n_passed,
                   (SELECT MIN(c.median_ms) FROM candidates c
                     WHERE c.run_id = r.id AND c.status = 'passed') AS best_ms,
                   (SELECT MAX(v.speedup_eager) FROM candidates c JOIN verdicts v ON v.id = c.verdict_id
                     WHERE c.run_id = r.id AND c.status = 'passed') AS best_speedup,
                   (SELECT COUNT(*) FROM llm_calls l WHERE l.run_id = r.id) AS n_calls,
                   (SELECT TOTAL(COALESCE(l.prompt_tokens, 0) + COALESCE(l.completion_tokens, 0))
                      FROM llm_calls l WHERE l.run_id = r.id) AS tokens,
                   (SELECT SUM(l.cost_usd) FROM llm_calls l WHERE l.run_id = r.id) AS cost_usd
              FROM runs r JOIN problems p ON p.id = r.problem_id
             WHERE ? IS NULL OR p.sha256 = ?
             ORDER BY r.id DESC LIMIT ?"""
        with self._read() as conn:
            rows = conn.execute(query, (problem_sha256, problem_sha256, int(limit))).fetchall()
        return [RunSummary(
            id=r["id"], started=r["started"], finished=r["finished"], status=self._status(r),
            problem_name=r["problem_name"], generator=r["generator"], strategy=r["strategy"], arch=r["arch"],
            device=r["device"], candidates=r["n_candidates"], passed=r["n_passed"], best_ms=r["best_ms"],
            best_speedup=r["best_speedup"], llm_calls=r["n_calls"], tokens=int(r["tokens"]), cost_usd=r["cost_usd"],
        ) for r in rows]

    # -- kernelwright bench ---------------------------------------------------------------------------------------
    def bench_result(self, key: str) -> dict[str, Any] | None:
        """A bench row stored under ``key`` (problem content, device, versions, settings), or None."""
        with self._read() as conn:
            row = conn.execute("SELECT row_json FROM bench_results WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def store_bench_result(self, key: str, problem_sha256: str, problem_name: str, row: Mapping[str, Any]) -> None:
        with self._write() as conn:
            conn.execute("INSERT INTO bench_results (key, problem_sha256, problem_name, row_json, created) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET row_json = excluded.row_json, "
                         "created = excluded.created",
                         (key, problem_sha256, problem_name, json.dumps(dict(row), default=str), time.time()))

    def baseline_timings(self, key: str) -> tuple[dict[str, Any], float] | None:
        """Baseline timings (eager, torch.compile, ...) stored under ``key``, with when they were measured."""
        with self._read() as conn:
            row = conn.execute("SELECT timing_json, created FROM baselines WHERE key = ?", (key,)).fetchone()
        return (json.loads(row[0]), float(row[1])) if row else None

    def store_baseline_timings(self, key: str, timing: Mapping[str, Any]) -> None:
        with self._write() as conn:
            conn.execute("INSERT INTO baselines (key, timing_json, created) VALUES (?, ?, ?) ON CONFLICT (key) "
                         "DO UPDATE SET timing_json = excluded.timing_json, created = excluded.created",
                         (key, json.dumps(dict(timing), default=str), time.time()))

    def _status(self, row: sqlite3.Row) -> str:
        if row["status"] == "running" and row["host"] == self._host and not _process_alive(row["pid"],
                                                                                            row["pid_start"]):
            return "interrupted"
        return row["status"]

    def _require_run(self, conn: sqlite3.Connection, run_id: int) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise InputError(self._unknown_run(conn, run_id))

    def _unknown_run(self, conn: sqlite3.Connection, run_id: int) -> str:
        newest = [str(r[0]) for r in conn.execute("SELECT id FROM runs ORDER BY id DESC LIMIT 10")]
        known = f"newest: {', '.join(newest)}" if newest else "it holds no runs yet"
        return f"no run {run_id} in {self.path} ({known})"

    def _run_row(self, conn: sqlite3.Connection, run_id: int) -> RunRow:
        r = conn.execute("SELECT r.*, p.name AS problem_name, p.path AS problem_path, p.sha256 AS problem_sha256 "
                         "FROM runs r JOIN problems p ON p.id = r.problem_id WHERE r.id = ?", (run_id,)).fetchone()
        if r is None:
            raise InputError(self._unknown_run(conn, run_id))
        return RunRow(
            id=r["id"], problem_id=r["problem_id"], problem_name=r["problem_name"], problem_path=r["problem_path"],
            problem_sha256=r["problem_sha256"], started=r["started"], finished=r["finished"], status=self._status(r),
            generator=r["generator"], strategy=r["strategy"], settings=json.loads(r["settings_json"]), arch=r["arch"],
            toolchain=r["toolchain"], device=r["device"], pid=r["pid"], host=r["host"], resumes=r["resumes"],
            summary=_loads(r["summary_json"]),
        )

    # ------------------------------------------------------------------------------------------------ candidates

    def add_candidate(self, run_id: int, source: str, *, origin: str, parent_id: int | None = None,
                      parent2_id: int | None = None, lineage: int = 0, round: int = 0,
                      llm_call_id: int | None = None, meta: Mapping[str, Any] | None = None) -> tuple[int, bool]:
        """(candidate id, whether it is new to this run); a source already in the run returns its first id."""
        if origin not in ORIGINS:
            raise ValueError(f"origin {origin!r} is not one of {', '.join(ORIGINS)}")
        sha = source_sha256(source)
        with self._write() as conn:
            row = conn.execute("SELECT id FROM candidates WHERE run_id = ? AND sha256 = ?", (run_id, sha)).fetchone()
            if row is not None:
                return int(row[0]), False
            cursor = conn.execute(
                "INSERT INTO candidates (run_id, sha256, source, origin, parent_id, parent2_id, lineage, round, "
                "llm_call_id, created, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, sha, source, origin, parent_id, parent2_id, lineage, round, llm_call_id, time.time(),
                 json.dumps(dict(meta), default=str) if meta is not None else None))
            return int(cursor.lastrowid), True

    def update_candidate(self, candidate_id: int, *, status: str, median_ms: float | None = None,
                         error: str | None = None) -> None:
        """A stage short of a verdict: built, timed by the tuning worker, failed to build (``error``)."""
        with self._write() as conn:
            cursor = conn.execute("UPDATE candidates SET status = ?, median_ms = COALESCE(?, median_ms), error = ? "
                                  "WHERE id = ?", (status, median_ms, error, candidate_id))
            if cursor.rowcount == 0:
                raise ValueError(f"no candidate {candidate_id} in {self.path}")

    def candidate(self, candidate_id: int) -> CandidateRow:
        with self._read() as conn:
            rows = self._candidate_rows(conn, "c.id = ?", (candidate_id,))
        if not rows:
            raise ValueError(f"no candidate {candidate_id} in {self.path}")
        return rows[0]

    def candidates(self, run_id: int) -> list[CandidateRow]:
        """The run's candidates in the order they were added."""
        with self._read() as conn:
            return self._candidate_rows(conn, "c.run_id = ?", (run_id,))

    @staticmethod
    def _candidate_rows(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[CandidateRow]:
        rows = conn.execute(f"SELECT c.*, v.speedup_eager FROM candidates c LEFT JOIN verdicts v "
                            f"ON v.id = c.verdict_id WHERE {where} ORDER BY c.id", tuple(params)).fetchall()
        return [CandidateRow(
            id=r["id"], run_id=r["run_id"], sha256=r["sha256"], source=r["source"], origin=r["origin"],
            parent_id=r["parent_id"], parent2_id=r["parent2_id"], lineage=r["lineage"], round=r["round"],
            llm_call_id=r["llm_call_id"], created=r["created"], status=r["status"], median_ms=r["median_ms"],
            error=r["error"], meta=_loads(r["meta_json"]), verdict_id=r["verdict_id"],
            speedup_eager=r["speedup_eager"],
        ) for r in rows]

    # -------------------------------------------------------------------------------------------------- verdicts

    def record_verdict(self, candidate_id: int, verdict_json: Mapping[str, Any], *, arch: str, toolchain: str,
                       options_key: str) -> int:
        """Store a verdict (``Verdict.to_json()``) under the cache key, replacing an older one for the same key,
        and set the candidate's status, median and verdict from it. Returns the verdict's id."""
        status = str(verdict_json.get("status") or "unknown")
        median_ms = _median_ms(verdict_json)
        with self._write() as conn:
            row = conn.execute("SELECT c.sha256 AS candidate_sha256, p.sha256 AS problem_sha256 FROM candidates c "
                               "JOIN runs r ON r.id = c.run_id JOIN problems p ON p.id = r.problem_id "
                               "WHERE c.id = ?", (candidate_id,)).fetchone()
            if row is None:
                raise ValueError(f"no candidate {candidate_id} in {self.path}")
            claimed = verdict_json.get("candidate_sha256")
            if claimed and claimed != row["candidate_sha256"]:
                log.warning("verdict for candidate %d names candidate sha256 %s, but its source hashes to %s",
                            candidate_id, claimed[:12], row["candidate_sha256"][:12])
            key = (row["problem_sha256"], row["candidate_sha256"], arch, toolchain, options_key)
            conn.execute(
                "INSERT INTO verdicts (problem_sha256, candidate_sha256, arch, toolchain, options_key, status, "
                "median_ms, speedup_eager, verdict_json, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (problem_sha256, candidate_sha256, arch, toolchain, options_key) DO UPDATE SET "
                "status = excluded.status, median_ms = excluded.median_ms, speedup_eager = excluded.speedup_eager, "
                "verdict_json = excluded.verdict_json, created = excluded.created",
                (*key, status, median_ms, _speedup_eager(verdict_json), json.dumps(dict(verdict_json)), time.time()))
            verdict_id = int(conn.execute(
                "SELECT id FROM verdicts WHERE problem_sha256 = ? AND candidate_sha256 = ? AND arch = ? AND "
                "toolchain = ? AND options_key = ?", key).fetchone()[0])
            conn.execute("UPDATE candidates SET status = ?, median_ms = ?, verdict_id = ? WHERE id = ?",
                         (status, median_ms, verdict_id, candidate_id))
            return verdict_id

    def cached_verdict(self, problem_sha256: str, candidate_sha256: str, *, arch: str, toolchain: str,
                       options_key: str) -> dict[str, Any] | None:
        """The stored ``Verdict.to_json()`` for this key, from any run, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT verdict_json FROM verdicts WHERE problem_sha256 = ? AND candidate_sha256 = ? AND arch = ? "
                "AND toolchain = ? AND options_key = ?",
                (problem_sha256, candidate_sha256, arch, toolchain, options_key)).fetchone()
        return json.loads(row[0]) if row else None

    def verdict(self, verdict_id: int) -> dict[str, Any]:
        with self._lock:
            row = self._conn.execute("SELECT verdict_json FROM verdicts WHERE id = ?", (verdict_id,)).fetchone()
        if row is None:
            raise ValueError(f"no verdict {verdict_id} in {self.path}")
        return json.loads(row[0])

    # ------------------------------------------------------------------------------------------------- LLM calls

    def record_llm_call(self, run_id: int, *, tag: str, model: str, base_url: str | None,
                        messages: Sequence[Mapping[str, Any]], response_text: str | None,
                        reasoning_text: str | None, prompt_tokens: int | None, completion_tokens: int | None,
                        cost_usd: float | None, latency_s: float | None, attempts: int = 1,
                        error: str | None = None) -> int:
        """One request to a model (``error`` set when it failed after ``attempts``). The caller passes no API key;
        credentials embedded in ``base_url`` are dropped all the same."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO llm_calls (run_id, tag, model, base_url, messages_json, response_text, reasoning_text, "
                "prompt_tokens, completion_tokens, cost_usd, latency_s, attempts, error, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, tag, model, redact_url(base_url), json.dumps([dict(m) for m in messages], default=str),
                 response_text, reasoning_text, prompt_tokens, completion_tokens, cost_usd, latency_s, attempts,
                 error, time.time()))
            return int(cursor.lastrowid)

    def llm_calls(self, run_id: int) -> list[CallRow]:
        """The run's LLM calls, oldest first."""
        with self._lock:
            rows = self._conn.execute("SELECT id, tag, response_text, error, created FROM llm_calls "
                                      "WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return [CallRow(id=r[0], tag=r[1], response_text=r[2], error=r[3], created=r[4]) for r in rows]

    def llm_usage(self, run_id: int) -> dict[str, Any]:
        """calls, failures, prompt/completion/total tokens, cost (None when no call reported one), seconds."""
        with self._lock:
            r = self._conn.execute(
                "SELECT COUNT(*), COUNT(error), TOTAL(prompt_tokens), TOTAL(completion_tokens), SUM(cost_usd), "
                "TOTAL(latency_s) FROM llm_calls WHERE run_id = ?", (run_id,)).fetchone()
        prompt, completion = int(r[2]), int(r[3])
        return {"calls": r[0], "failures": r[1], "prompt_tokens": prompt, "completion_tokens": completion,
                "tokens": prompt + completion, "cost_usd": r[4], "latency_s": r[5]}


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "?"
