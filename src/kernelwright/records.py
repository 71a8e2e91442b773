"""Small records shared by every role. Roles talk only through frozen dataclasses; a failure is data."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """The verdict on a candidate (docs/protocol.md, "Verdicts")."""

    PASSED = "passed"
    INCORRECT = "incorrect"
    REJECTED = "rejected"  # integrity: an exploit or a rule of the protocol was broken
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    UNSUPPORTED = "unsupported"  # cannot be executed here (e.g. CUDA C++ without a GPU)

    def __str__(self) -> str:
        return self.value


class Severity(str, enum.Enum):
    ERROR = "error"  # decides the verdict
    WARNING = "warning"  # does not fail the candidate, but a pass is not clean
    NOTE = "note"  # information

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One observation about a candidate: ``code`` is stable and machine-readable, ``message`` is one line for
    a human, ``details`` holds the evidence (numbers, indices, opcode counts)."""

    code: str
    message: str
    severity: Severity = Severity.ERROR
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": str(self.severity),
            "message": self.message,
            "details": dict(self.details),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=str(data["code"]),
            message=str(data["message"]),
            severity=Severity(data.get("severity", "error")),
            details=dict(data.get("details") or {}),
        )


@dataclass(frozen=True, kw_only=True)
class Policy:
    """The precision policy, one record for generate, verify, bench and export: an fp32 problem gets fp32 math unless
    the user allowed TF32 (``allow_tf32``) or half precision (``allow_reduced_precision``). Written to JSON as those
    two keys, flat, wherever a record carries it (run databases and verdicts keep their keys)."""

    allow_tf32: bool = False
    allow_reduced_precision: bool = False

    @property
    def matmul_precision(self) -> str:
        """``torch.set_float32_matmul_precision``'s word for this policy."""
        return "medium" if self.allow_reduced_precision else "high" if self.allow_tf32 else "highest"

    def to_json(self) -> dict[str, bool]:
        return {"allow_tf32": self.allow_tf32, "allow_reduced_precision": self.allow_reduced_precision}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Policy:
        data = data or {}
        return cls(allow_tf32=bool(data.get("allow_tf32", False)),
                   allow_reduced_precision=bool(data.get("allow_reduced_precision", False)))


DEFAULT_POLICY = Policy()

# The baseline of eager PyTorch as its defaults run it (cuDNN convolutions may use TF32), timed beside eager at the
# problem's precision for fp32 problems with convolutions (verify/baseline.py); never the scores' basis.
EAGER_DEFAULTS = "eager_defaults"


@dataclass(frozen=True, kw_only=True)
class ProblemTraits:
    """What the reference computes, as the expectations engine and the roofline need it.

    ``dominant`` is the kind of work that bounds the problem: ``"matmul"``, ``"conv"``, ``"attention"`` (tensor-core
    candidates), or ``"memory"`` (bandwidth-bound: pointwise chains, reductions, scans, norms).
    ``compute_dtype`` is the precision the problem's arithmetic is specified in (``"float32"``, ``"bfloat16"``, ...);
    an MMA operand type below it is a precision finding unless the ``policy`` allows it.
    """

    dominant: str
    compute_dtype: str | None
    dtypes: tuple[str, ...] = ()
    flops: float = 0.0  # all floating-point operations (matmul-like plus element-wise estimate)
    matmul_flops: float = 0.0  # the part done by matmul / conv / attention
    bytes: float = 0.0  # minimum bytes: inputs + outputs + parameters, each once
    policy: Policy = DEFAULT_POLICY

    @property
    def intensity(self) -> float:
        """FLOPs per byte of the minimum traffic (0 when unknown)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "dominant": self.dominant,
            "compute_dtype": self.compute_dtype,
            "dtypes": list(self.dtypes),
            "flops": self.flops,
            "matmul_flops": self.matmul_flops,
            "bytes": self.bytes,
            "intensity": self.intensity,
            **self.policy.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProblemTraits:
        return cls(dominant=data["dominant"], compute_dtype=data.get("compute_dtype"),
                   dtypes=tuple(data.get("dtypes", ())), flops=float(data.get("flops", 0.0)),
                   matmul_flops=float(data.get("matmul_flops", 0.0)), bytes=float(data.get("bytes", 0.0)),
                   policy=Policy.from_json(data))
