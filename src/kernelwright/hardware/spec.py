"""The hardware knowledge base: GPU and architecture records read from ``gpus.toml``.

    from kernelwright.hardware import lookup, arch_spec
    lookup("H100").peak_tflops["bf16"]        # 989.4
    arch_spec("sm_90a").features              # frozenset({... "wgmma", "tma", ...})

The data lives in ``gpus.toml`` beside this module (one row per GPU, each with its source); this module only parses,
validates and looks up. Names are matched case- and spacing-insensitively, with aliases (``"NVIDIA H200"``,
``"h100-sxm"``); an unknown name is an :class:`InputError` that lists the close matches.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from kernelwright.errors import InputError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

PEAK_KEYS = ("fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")

_KIB = 1024
_MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class ArchSpec:
    """Per-architecture limits (occupancy rules) and instruction features, e.g. ``sm_90a``."""

    name: str
    family: str
    vendor: str
    compute_capability: tuple[int, int] | None
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_alloc_unit: int
    shared_memory_per_sm_bytes: int
    shared_memory_per_block_bytes: int
    shared_memory_per_block_optin_bytes: int
    shared_alloc_unit_bytes: int
    reserved_shared_per_block_bytes: int
    features: frozenset[str]
    distinctive: tuple[str, ...]
    cuda_min: tuple[int, int] | None
    cuda_max: tuple[int, int] | None
    source: str

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def is_cuda(self) -> bool:
        return self.vendor == "nvidia"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "vendor": self.vendor,
            "compute_capability": list(self.compute_capability) if self.compute_capability else None,
            "warp_size": self.warp_size,
            "max_threads_per_block": self.max_threads_per_block,
            "max_threads_per_sm": self.max_threads_per_sm,
            "max_blocks_per_sm": self.max_blocks_per_sm,
            "registers_per_sm": self.registers_per_sm,
            "max_registers_per_block": self.max_registers_per_block,
            "max_registers_per_thread": self.max_registers_per_thread,
            "shared_memory_per_sm_bytes": self.shared_memory_per_sm_bytes,
            "shared_memory_per_block_bytes": self.shared_memory_per_block_bytes,
            "shared_memory_per_block_optin_bytes": self.shared_memory_per_block_optin_bytes,
            "shared_alloc_unit_bytes": self.shared_alloc_unit_bytes,
            "reserved_shared_per_block_bytes": self.reserved_shared_per_block_bytes,
            "features": sorted(self.features),
            "distinctive": list(self.distinctive),
            "cuda_min": list(self.cuda_min) if self.cuda_min else None,
            "cuda_max": list(self.cuda_max) if self.cuda_max else None,
            "source": self.source,
        }


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """One GPU product: the arch's limits plus the product's SM count, caches, bandwidth, clocks and peaks.

    ``peak_tflops`` is dense (never the with-sparsity figure); ``fp32`` is the SIMT rate, ``tf32``/``fp16``/... the
    tensor-core rates. ``live`` is True when the record was built from (or corrected by) a present device.
    """

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    arch: str
    compute_capability: tuple[int, int] | None
    sm_count: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    shared_memory_per_sm_bytes: int
    shared_memory_per_block_optin_bytes: int
    l2_bytes: int
    last_level_cache_bytes: int
    memory_bytes: int
    memory_bandwidth_gbs: float
    boost_clock_mhz: float
    peak_tflops: Mapping[str, float] = field(default_factory=dict)
    features: frozenset[str] = frozenset()
    source: str
    live: bool = False

    @property
    def arch_spec(self) -> ArchSpec:
        return arch_spec(self.arch)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "arch": self.arch,
            "compute_capability": list(self.compute_capability) if self.compute_capability else None,
            "sm_count": self.sm_count,
            "max_threads_per_block": self.max_threads_per_block,
            "max_threads_per_sm": self.max_threads_per_sm,
            "max_blocks_per_sm": self.max_blocks_per_sm,
            "registers_per_sm": self.registers_per_sm,
            "max_registers_per_thread": self.max_registers_per_thread,
            "shared_memory_per_sm_bytes": self.shared_memory_per_sm_bytes,
            "shared_memory_per_block_optin_bytes": self.shared_memory_per_block_optin_bytes,
            "l2_bytes": self.l2_bytes,
            "last_level_cache_bytes": self.last_level_cache_bytes,
            "memory_bytes": self.memory_bytes,
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
            "boost_clock_mhz": self.boost_clock_mhz,
            "peak_tflops": dict(self.peak_tflops),
            "features": sorted(self.features),
            "source": self.source,
            "live": self.live,
        }


# ----------------------------------------------------------------------------------------------------- loading


def _version(raw: Any) -> tuple[int, int] | None:
    return (int(raw[0]), int(raw[1])) if raw else None


def _arch_from_row(name: str, row: Mapping[str, Any]) -> ArchSpec:
    cc = row.get("compute_capability")
    try:
        return ArchSpec(
            name=name,
            family=str(row["family"]),
            vendor=str(row.get("vendor", "nvidia")),
            compute_capability=(int(cc[0]), int(cc[1])) if cc else None,
            warp_size=int(row["warp_size"]),
            max_threads_per_block=int(row["max_threads_per_block"]),
            max_threads_per_sm=int(row["max_threads_per_sm"]),
            max_blocks_per_sm=int(row["max_blocks_per_sm"]),
            registers_per_sm=int(row["registers_per_sm"]),
            max_registers_per_block=int(row["max_registers_per_block"]),
            max_registers_per_thread=int(row["max_registers_per_thread"]),
            register_alloc_unit=int(row["register_alloc_unit"]),
            shared_memory_per_sm_bytes=int(row["shared_memory_per_sm_kib"] * _KIB),
            shared_memory_per_block_bytes=int(row["shared_memory_per_block_kib"] * _KIB),
            shared_memory_per_block_optin_bytes=int(row["shared_memory_per_block_optin_kib"] * _KIB),
            shared_alloc_unit_bytes=int(row["shared_alloc_unit_bytes"]),
            reserved_shared_per_block_bytes=int(row["reserved_shared_per_block_bytes"]),
            features=frozenset(row.get("features", ())),
            distinctive=tuple(row.get("distinctive", ())),
            cuda_min=_version(row.get("cuda_min")),
            cuda_max=_version(row.get("cuda_max")),
            source=str(row.get("source", "")),
        )
    except KeyError as exc:  # a defect in gpus.toml, caught by the tests
        raise ValueError(f"gpus.toml: arch {name} lacks {exc.args[0]!r}") from None


def _resolve_arch_rows(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    resolved: dict[str, dict[str, Any]] = {}

    def resolve(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        if name in resolved:
            return resolved[name]
        if name in seen:
            raise ValueError(f"gpus.toml: arch inheritance cycle through {name}")
        row = dict(raw[name])
        parent = row.pop("inherits", None)
        merged = {**resolve(parent, (*seen, name)), **row} if parent else row
        if parent and "source" not in row:
            merged["source"] = resolved[parent].get("source", "")
        resolved[name] = merged
        return merged

    for name in raw:
        resolve(name)
    return resolved


def _gpu_from_row(row: Mapping[str, Any], archs: Mapping[str, ArchSpec]) -> GpuSpec:
    arch = archs[row["arch"]]
    peaks = {str(k): float(v) for k, v in row.get("peak_tflops", {}).items()}
    unknown = sorted(set(peaks) - set(PEAK_KEYS))
    if unknown:
        raise ValueError(f"gpus.toml: {row['name']} has unknown peak keys {unknown}")
    l2 = int(row["l2_mib"] * _MIB)
    return GpuSpec(
        name=str(row["name"]),
        aliases=tuple(row.get("aliases", ())),
        vendor=str(row["vendor"]),
        arch=arch.name,
        compute_capability=arch.compute_capability,
        sm_count=int(row["sm_count"]),
        max_threads_per_block=arch.max_threads_per_block,
        max_threads_per_sm=arch.max_threads_per_sm,
        max_blocks_per_sm=arch.max_blocks_per_sm,
        registers_per_sm=arch.registers_per_sm,
        max_registers_per_thread=arch.max_registers_per_thread,
        shared_memory_per_sm_bytes=arch.shared_memory_per_sm_bytes,
        shared_memory_per_block_optin_bytes=arch.shared_memory_per_block_optin_bytes,
        l2_bytes=l2,
        last_level_cache_bytes=int(row.get("last_level_cache_mib", row["l2_mib"]) * _MIB),
        memory_bytes=int(row.get("memory_gb", 0) * 10**9),
        memory_bandwidth_gbs=float(row["memory_bandwidth_gbs"]),
        boost_clock_mhz=float(row["boost_clock_mhz"]),
        peak_tflops=peaks,
        features=arch.features | frozenset(row.get("features", ())),
        source=str(row["source"]),
    )


@functools.cache
def _knowledge_base() -> tuple[dict[str, ArchSpec], tuple[GpuSpec, ...]]:
    text = resources.files("kernelwright.hardware").joinpath("gpus.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    arch_rows = _resolve_arch_rows(data.get("arch", {}))
    archs = {name: _arch_from_row(name, row) for name, row in arch_rows.items()}
    gpus = tuple(_gpu_from_row(row, archs) for row in data.get("gpu", ()))
    return archs, gpus


# ----------------------------------------------------------------------------------------------------- lookup


def normalize_name(name: str) -> str:
    """``"NVIDIA GeForce RTX 4090"`` -> ``"rtx4090"``: lower case, no vendor/brand words, no separators."""
    text = name.lower()
    text = re.sub(r"\b(nvidia|amd|geforce|tesla|instinct|gpu)\b", " ", text)
    return re.sub(r"[^a-z0-9]", "", text)


@functools.cache
def _name_index() -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for gpu in _knowledge_base()[1]:
        for key in (gpu.name, *gpu.aliases):
            index.setdefault(normalize_name(key), gpu)
    return index


def all_gpus() -> list[GpuSpec]:
    """Every GPU in the knowledge base, in file order."""
    return list(_knowledge_base()[1])


def all_archs() -> list[ArchSpec]:
    return list(_knowledge_base()[0].values())


def lookup(name: str) -> GpuSpec:
    """The GPU called ``name`` (any alias, any case or spacing); :class:`InputError` with close matches if none."""
    key = normalize_name(name)
    index = _name_index()
    if key in index:
        return index[key]
    candidates = sorted({gpu.name for gpu in all_gpus()})
    by_key = {normalize_name(c): c for c in candidates} | {
        normalize_name(alias): gpu.name for gpu in all_gpus() for alias in gpu.aliases
    }
    close = difflib.get_close_matches(key, list(by_key), n=5, cutoff=0.5)
    # a key that is a prefix/substring of a known name ("h1" -> H100 ...) is also a close match
    close += [k for k in by_key if key and (k.startswith(key) or key in k) and k not in close]
    names = list(dict.fromkeys(by_key[k] for k in close))[:5]
    hint = f"close matches: {', '.join(names)}" if names else "see 'kernelwright hw --list'"
    raise InputError(f"unknown GPU {name!r}; {hint}")


_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d)(\d{1,2})([af]?)$")


def canonical_arch(arch: str) -> str:
    """``"sm90a"``, ``"SM_90a"``, ``"90a"``, ``"9.0"`` -> ``"sm_90a"``; AMD ``"gfx942"`` stays as is."""
    text = arch.strip().lower().replace(" ", "")
    if text.startswith("gfx"):
        return text
    match = re.match(r"^(\d+)\.(\d)([af]?)$", text)
    if match:
        return f"sm_{match.group(1)}{match.group(2)}{match.group(3)}"
    match = _ARCH_RE.match(text)
    if not match:
        raise InputError(f"{arch!r} is not an arch name; write it like sm_80, sm_90a or sm_100a")
    return f"sm_{match.group(1)}{match.group(2)}{match.group(3)}"


def compute_capability_of(arch: str) -> tuple[int, int]:
    """``"sm_90a"`` -> ``(9, 0)``; ``"sm_120"`` -> ``(12, 0)``."""
    name = canonical_arch(arch)
    if name.startswith("gfx"):
        raise InputError(f"{arch} is an AMD arch; it has no CUDA compute capability")
    digits = re.sub(r"[af]$", "", name[3:])
    return int(digits[:-1]), int(digits[-1])


def known_archs(text: str) -> list[str]:
    """A comma-separated ``--arch`` value as canonical names, each one the knowledge base knows (InputError naming
    the known archs otherwise): an unknown arch is the caller's mistake, said in one line before anything is
    compiled."""
    archs = [canonical_arch(a) for a in text.split(",") if a.strip()]
    for arch in archs:
        arch_spec(arch)
    return archs


def arch_spec(arch: str) -> ArchSpec:
    """Limits and features of ``arch``. An arch not in the table (``sm_87``) falls back to the nearest lower one of
    the same major version, with the features of that one; a family-specific ``sm_100f`` uses ``sm_100a``."""
    archs = _knowledge_base()[0]
    name = canonical_arch(arch)
    if name in archs:
        return archs[name]
    if name.endswith("f") and name[:-1] + "a" in archs:
        return replace(archs[name[:-1] + "a"], name=name)
    if not name.startswith("gfx"):
        cc = compute_capability_of(name)
        same_major = [a for a in archs.values() if a.compute_capability and a.compute_capability[0] == cc[0]
                      and a.compute_capability <= cc and not a.name.endswith("a")]
        if same_major:
            base = max(same_major, key=lambda a: a.compute_capability or (0, 0))
            return replace(base, name=name, compute_capability=cc)
    known = ", ".join(sorted(archs))
    raise InputError(f"unknown arch {arch!r}; known: {known}")


def gpus_for_arch(arch: str) -> list[GpuSpec]:
    name = canonical_arch(arch)
    base = name.rstrip("af")
    return [gpu for gpu in all_gpus() if gpu.arch.rstrip("af") == base]
