"""``export_package``: verified runs -> an importable package that registers a ``torch.library`` op;
``load``: the same package, built in the cache and imported, returning its module class.

The package is written into a temporary directory beside its destination and renamed into place at the end, so a
failure leaves nothing half-written; an existing package is replaced only with ``force`` (and never a directory
that is not an exported package).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.errors import InputError
from kernelwright.export.package import (
    RUNTIME_FOLDER,
    PackagePlan,
    camel_case,
    is_identifier,
    read_variants_json,
    write_files,
)
from kernelwright.export.runs import RunVariant, read_run

log = logging.getLogger(__name__)

# names the generated __init__.py defines or imports itself, and attributes of torch.ops.<namespace> that would
# hide an op of that name (``torch.ops.ns.name`` is the namespace's name): an op may not take them
_RESERVED = {"variants", "variant_for", "describe", "assume_capability", "dispatch_counts", "torch", "Path",
             "Optional", "OpRuntime", "functools", "name"}
LOAD_CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    path: Path
    package: str
    namespace: str
    op: str
    module_class: str
    registration: str
    registration_reason: str
    variants: tuple[str, ...]
    backward: str | None


def export_package(runs: Sequence[str | Path], *, out: str | Path, name: str | None = None, force: bool = False,
                   isolate: bool = True, trace: bool = True) -> ExportResult:
    """Package the verified ``runs`` (one per arch and precision policy) as the Python package ``out``.

    The package's name is ``out``'s last part, its op namespace ``kernelwright_<package>``, the op ``name``
    (default: the problem's name). ``isolate`` runs the probe of the runs' code in a child process; ``trace``
    checks that every Triton variant traces into Inductor-visible kernel calls (else the op is a ``custom_op``).
    Raises :class:`InputError` for anything that cannot be exported."""
    out = Path(out)
    package = out.name
    if not is_identifier(package):
        raise InputError(f"the package directory's name {package!r} is not a Python identifier, so the package "
                         "could not be imported; choose --out like my_kernels/")
    if not runs:
        raise InputError("give at least one run folder to export")
    variants, op = _read_variants(runs, name)
    _check_destination(out, force)

    created = [p for p in [out.parent, *out.parent.parents] if not p.exists()]  # removed again on failure
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{package}.kw-export-", dir=out.parent))
    done = False
    try:
        plan = _plan(variants, package=package, op=op, scratch=scratch, isolate=isolate, trace=trace)
        write_files(scratch, plan, _runtime_sources())
        _move_into_place(scratch, out, replace=force)
        done = True
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
        for parent in created if not done else []:  # innermost first; only if still empty
            with contextlib.suppress(OSError):
                parent.rmdir()
    log.info("exported %s to %s (%s)", op, out, plan.registration)
    return ExportResult(path=out, package=package, namespace=plan.namespace, op=op, module_class=plan.module_class,
                        registration=plan.registration, registration_reason=plan.registration_reason,
                        variants=tuple(v.id for v in variants),
                        backward=plan.backward_method)


def _read_variants(runs: Sequence[str | Path], name: str | None) -> tuple[list[RunVariant], str]:
    """The runs read and checked as variants of one op, and the op's name (``name`` or the problem's)."""
    variants = [read_run(r) for r in runs]
    _check_one_problem(variants)
    op = name if name is not None else _default_op_name(variants[0].problem_name)
    _check_op_name(op)
    return variants, op


def _check_one_problem(variants: list[RunVariant]) -> None:
    first = variants[0]
    for other in variants[1:]:
        if other.problem_sha256 != first.problem_sha256:
            raise InputError(f"runs {first.path} ({first.problem_name}, problem sha256 {first.problem_sha256[:12]}) "
                             f"and {other.path} ({other.problem_name}, {other.problem_sha256[:12]}) are of different "
                             "problems; a package holds variants of one op")
    seen: dict[str, RunVariant] = {}
    for v in variants:
        if v.id in seen:
            raise InputError(f"runs {seen[v.id].path} and {v.path} are both the {v.arch} {v.precision}-precision "
                             f"variant ({v.id}); export one of them")
        seen[v.id] = v


def _default_op_name(problem_name: str) -> str:
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in problem_name.lower()).strip("_") or "op"
    return ident if not ident[0].isdigit() else "op_" + ident


def _check_op_name(op: str) -> None:
    if not is_identifier(op) or op.startswith("_"):
        raise InputError(f"--name {op!r} is not a valid op name: use letters, digits and underscores, starting "
                         "with a letter (e.g. rms_norm)")
    if op in _RESERVED or op == camel_case(op):
        raise InputError(f"--name {op!r} clashes with a name the package defines; choose another (e.g. "
                         f"{op.lower()}_op)")


def _check_destination(out: Path, force: bool) -> None:
    if not out.exists():
        return
    is_package = (out / "variants.json").is_file() and _is_export(out)
    if not force:
        what = "an exported package" if is_package else "a path"
        raise InputError(f"{out} already exists ({what}); pass --force to replace it, or choose another --out")
    if not is_package and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} exists and is not a package kernelwright export wrote; --force replaces only "
                         "those (or an empty directory): choose another --out")


def _is_export(path: Path) -> bool:
    try:
        read_variants_json(path)
    except InputError:
        return False
    return True


def _move_into_place(scratch: Path, out: Path, *, replace: bool) -> None:
    """Rename ``scratch`` to ``out``; an ``out`` that appeared meanwhile (another export, another process's
    :func:`load`) is replaced only with ``replace``."""
    if not replace:
        try:
            scratch.rename(out)  # atomic; fails if out is now a non-empty directory or a file
        except OSError:
            if out.exists():
                raise InputError(f"{out} appeared while exporting (another export?); pass --force to replace "
                                 "it, or choose another --out") from None
            raise
        return
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.kw-replaced-{uuid.uuid4().hex[:8]}"
        out.rename(old)
    try:
        scratch.rename(out)
    except OSError:
        if old is not None:
            old.rename(out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _runtime_sources() -> dict[str, str]:
    """The runtime files the package holds, by their path there: every module of kernelwright.runtime, verbatim."""
    import kernelwright.runtime

    folder = Path(kernelwright.runtime.__file__).parent
    return {f"{RUNTIME_FOLDER}/{file.name}": file.read_text() for file in sorted(folder.glob("*.py"))}


def _plan(variants: list[RunVariant], *, package: str, op: str, scratch: Path, isolate: bool,
          trace: bool) -> PackagePlan:
    from kernelwright.export.probe import run_probe
    from kernelwright.jobs.export_probe import ExportProbeSpec, ProbeVariant

    probe_dir = scratch / "_probe"
    probe_dir.mkdir()
    reference = probe_dir / "reference.py"
    reference.write_text(variants[0].problem_source)
    spec_variants = []
    for v in variants:
        path = probe_dir / f"{v.id}.py"
        path.write_text(v.source)
        spec_variants.append(ProbeVariant(id=v.id, path=str(path), language=v.language, run=str(v.path)))
    spec = ExportProbeSpec(reference=str(reference), variants=tuple(spec_variants), trace=trace,
                           prefix=f"_kw_export_probe_{uuid.uuid4().hex[:10]}")
    result = run_probe(spec, isolate=isolate)
    shutil.rmtree(probe_dir, ignore_errors=True)
    if not result.get("ok"):
        raise InputError(f"cannot export {variants[0].problem_name}: {result.get('message')}")
    registration, reason = _registration(variants, result)
    return PackagePlan(package=package, op=op, runs=tuple(variants), probe=result, registration=registration,
                       registration_reason=reason)


def _registration(variants: list[RunVariant], probed: dict[str, Any]) -> tuple[str, str]:
    """triton_op when every variant is Triton and traces into kernel calls; else custom_op, with the reason."""
    cuda = [v.id for v in variants if v.language != "triton"]
    if cuda:
        return "custom_op", (f"variant(s) {', '.join(cuda)} are CUDA C++ (load_inline), which Inductor cannot "
                             "trace into")
    failed = [(v.id, probed["variants"][v.id]["trace"]) for v in variants
              if not probed["variants"][v.id]["trace"].get("ok")]
    if failed:
        return "custom_op", "; ".join(f"variant {vid} did not trace into Triton kernel calls ({t.get('message')})"
                                      for vid, t in failed)
    checked = all(probed["variants"][v.id]["trace"].get("checked") for v in variants)
    return "triton_op", ("every variant is Triton and traces into wrap_triton kernel calls" if checked
                         else "every variant is Triton (trace check skipped)")


# ------------------------------------------------------------------------------------------------ load


def load(*runs: str | Path, name: str | None = None) -> type:
    """The module class of the package :func:`export_package` would write for ``runs`` — built (once) in the
    kernelwright cache, imported under a name derived from the runs' content, without writing anything else."""
    from kernelwright.config import config

    if not runs:
        raise InputError("kernelwright.load needs at least one run folder")
    variants, op = _read_variants(runs, name)
    key = hashlib.sha256(json.dumps({
        "version": LOAD_CACHE_VERSION, "op": op, "problem": variants[0].problem_sha256,
        "runtime": hashlib.sha256(json.dumps(_runtime_sources(), sort_keys=True).encode()).hexdigest(),
        "variants": sorted((v.id, v.source_sha256, v.language) for v in variants),
    }, sort_keys=True).encode()).hexdigest()[:16]
    package = f"kw_{_default_op_name(variants[0].problem_name)[:40]}_{key}"
    # One load at a time in this process: the in-process probe patches Triton's launcher and sets
    # TRITON_INTERPRET while it runs, which another thread's kernel launches must not see.
    with _LOAD_LOCK:
        module = sys.modules.get(package)
        if module is None:
            root = Path(config.cache_dir) / "export" / package
            if not _is_export(root):
                try:  # never replace a package another process (a torchrun rank) has just built and may be using
                    export_package(runs, out=root, name=op, force=root.exists(), isolate=False)
                except InputError:
                    if not _is_export(root):
                        raise
            module = _import_package(package, root)
    return getattr(module, camel_case(op))


_LOAD_LOCK = threading.RLock()


def _import_package(package: str, root: Path) -> Any:
    from kernelwright.runtime.modules import load_module

    return load_module(package, root / "__init__.py", package_dir=root)


def list_package(path: str | Path) -> str:
    """The table ``kernelwright export --list`` prints."""
    from kernelwright.runtime.op import format_variants

    return format_variants(read_variants_json(Path(path)))
