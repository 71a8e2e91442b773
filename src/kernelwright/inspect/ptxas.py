"""Reading ``ptxas -v`` logs: per-function resources, spills and the performance warnings (C75xx).

    ptxas info    : Compiling entry function 'k' for 'sm_90a'
    ptxas info    : Function properties for k
        288 bytes stack frame, 48 bytes spill stores, 48 bytes spill loads
    ptxas info    : Used 42 registers, used 1 barriers, 32776 bytes smem, 400 bytes cmem[0]
    ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to ...
                    in the function 'k'

Fields are optional (sm_80 adds ``cmem[0]``; ``smem`` appears only when used).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CODE_RE = re.compile(r"\((C\d{4})\)")
_IN_FUNCTION_RE = re.compile(r"in (?:the )?function '([^']+)'")

# ptxas's numbering moves between releases (C7510-C7515 and C7520 all say "wgmma.mma_async instructions are
# serialized due to ..."; 13.x reports injected waits as C7517/C7519), so warnings are classified by their text.
_KINDS = (
    ("wgmma-serialized", re.compile(r"(?i)wgmma\S*\s+instructions are serialized")),
    ("wgmma-wait-injected", re.compile(r"(?i)(warpgroup|wgmma)\.\w+ is injected")),
    ("setmaxnreg-ignored", re.compile(r"(?i)setmaxnreg.*ignored|\(C7508\)")),
    ("spills", re.compile(r"(?i)registers? spill|spill(ed)? .*bytes")),
)


@dataclass(frozen=True, kw_only=True)
class PtxasFunction:
    name: str
    arch: str = ""
    registers: int | None = None
    barriers: int | None = None
    shared_bytes: int | None = None  # static shared memory ("smem")
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class PtxasWarning:
    code: str  # "C7515", or "" for an uncoded warning
    function: str  # the function named in the message, or ""
    message: str

    @property
    def kind(self) -> str:
        """``"wgmma-serialized"``, ``"wgmma-wait-injected"``, ``"setmaxnreg-ignored"``, ``"spills"`` or ``""``."""
        return next((kind for kind, pattern in _KINDS if pattern.search(self.message)), "")

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "function": self.function, "message": self.message, "kind": self.kind}


@dataclass(frozen=True, kw_only=True)
class PtxasLog:
    functions: Mapping[str, PtxasFunction] = field(default_factory=dict)
    warnings: tuple[PtxasWarning, ...] = ()

    def for_function(self, name: str) -> tuple[PtxasFunction | None, tuple[PtxasWarning, ...]]:
        warnings = tuple(w for w in self.warnings if not w.function or w.function == name)
        return self.functions.get(name), warnings


def parse_ptxas_log(text: str) -> PtxasLog:
    functions: dict[str, dict[str, Any]] = {}
    warnings: list[PtxasWarning] = []
    entry: str | None = None
    props_for: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _ENTRY_RE.search(line)
        if match:
            entry = match.group(1)
            functions.setdefault(entry, {"name": entry})["arch"] = match.group(2)
            continue
        match = _PROPS_RE.search(line)
        if match:
            props_for = match.group(1)
            continue
        match = _FRAME_RE.search(line)
        if match and props_for:
            # properties of device functions are reported too; keep those of entries (and of unknown owners)
            record = functions.setdefault(props_for, {"name": props_for})
            record.update(stack_bytes=int(match.group(1)), spill_store_bytes=int(match.group(2)),
                          spill_load_bytes=int(match.group(3)))
            props_for = None
            continue
        match = _USED_RE.search(line)
        if match and entry:
            record = functions.setdefault(entry, {"name": entry})
            record["registers"] = int(match.group(1))
            if (b := _BARRIERS_RE.search(line)) is not None:
                record["barriers"] = int(b.group(1))
            if (s := _SMEM_RE.search(line)) is not None:
                record["shared_bytes"] = int(s.group(1))
            continue
        code = _CODE_RE.search(line)
        if code or "warning" in line.lower():
            owner = _IN_FUNCTION_RE.search(line)
            message = re.sub(r"^ptxas[\w-]*\s+(info|warning)\s*:\s*", "", line)
            warnings.append(PtxasWarning(code=code.group(1) if code else "", function=owner.group(1) if owner else "",
                                         message=message))
    return PtxasLog(
        functions={name: PtxasFunction(**record) for name, record in functions.items()},
        warnings=tuple(warnings),
    )


def relevant_lines(text: str, *, limit: int = 40) -> str:
    """The lines of a compiler log a person needs: errors, warnings and coded infos, not the resource chatter."""
    keep = [
        line for line in text.splitlines()
        if re.search(r"(?i)\berror\b|\bwarning\b|\(C\d{4}\)|fatal", line)
    ]
    if len(keep) > limit:
        keep = keep[:limit] + [f"... {len(keep) - limit} more lines"]
    return "\n".join(keep)
