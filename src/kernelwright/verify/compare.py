"""Judging one output against the reference — protocol rule 4; integrity #2, #10, #11.

``reference`` mode (the default) judges against a float64 reference, relative to PyTorch's own error::

    u       unit roundoff of the output dtype (2^-24 fp32, 2^-11 fp16, 2^-8 bf16)
    scale   root-mean-square of the float64 reference (over finite elements)
    err(x)  |x - ref64| / (|ref64| + scale)        per element: relative for large values, scale-relative near 0
    e_nat   max err(PyTorch's native-precision output)
    bound   max(K * max(e_nat, u), floor(dtype))    K = --tolerance-factor (default 8)

An element is wrong when ``err(candidate) > bound``. ``floor`` is 2^-17 (7.6e-6) for fp32 outputs — room for
honest fast-math (``ex2.approx`` in a Triton softmax is ~10 ulp off) while a TF32 or fp16 shortcut in an fp32
problem (errors ~1e-4 to 1e-3) fails by two orders of magnitude. NaN and infinities must sit exactly where the
correctly rounded answer (or PyTorch's) has them.

``kernelbench`` mode reproduces KernelBench: ``|got - native| <= atol + rtol * |native|`` with atol = rtol = 1e-4
for fp32 and 1e-2 for fp16/bf16.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from kernelwright.records import Policy

REFERENCE = "reference"
KERNELBENCH = "kernelbench"
MODES = (REFERENCE, KERNELBENCH)

_FLOOR = {torch.float32: 2.0**-17, torch.float64: 2.0**-40}
_KB_TOL = {torch.float16: 1e-2, torch.bfloat16: 1e-2}


@dataclass(frozen=True, kw_only=True)
class Comparison:
    ok: bool
    reason: str  # one line; empty when ok
    mode: str
    numel: int
    wrong_count: int
    wrong_fraction: float
    nonfinite_mismatches: int
    max_abs_error: float
    max_rel_error: float
    rel_l2_error: float
    native_rel_l2_error: float | None
    native_max_error: float | None  # e_nat (reference mode)
    bound: float  # reference mode: the normalised bound; kernelbench: atol (= rtol)
    worst_index: tuple[int, ...] | None
    worst_got: float | None
    worst_expected: float | None
    rel_error_rms: float = 0.0  # RMS of the signed relative error over significant elements
    rel_error_mean: float = 0.0  # its mean: near 0 for rounding noise, near the RMS for a systematic error

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["worst_index"] = list(self.worst_index) if self.worst_index is not None else None
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def structure_problems(got: Sequence[Any], expected: Sequence[torch.Tensor], device_type: str) -> list[str]:
    """One line per way the outputs' structure differs from the reference's (count, type, shape, dtype)."""
    problems = []
    if len(got) != len(expected):
        return [f"forward returned {len(got)} output(s); the reference returns {len(expected)}"]
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(g, torch.Tensor):
            problems.append(f"output {i} is a {type(g).__name__}, not a tensor")
            continue
        if g.shape != e.shape:
            problems.append(f"output {i} has shape {tuple(g.shape)}; the reference's is {tuple(e.shape)}")
        if g.dtype != e.dtype:
            problems.append(f"output {i} has dtype {g.dtype}; the reference's is {e.dtype}")
    return problems


def _same_nonfinite(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (torch.isnan(a) & torch.isnan(b)) | (a == b)


def _index(flat_index: int, shape: Sequence[int]) -> tuple[int, ...]:
    idx = []
    for size in reversed(list(shape)):
        idx.append(flat_index % max(size, 1))
        flat_index //= max(size, 1)
    return tuple(reversed(idx))


def _rel_l2(x: torch.Tensor, ref: torch.Tensor) -> float:
    if x.numel() == 0:
        return 0.0
    denom = float(torch.linalg.vector_norm(ref))
    num = float(torch.linalg.vector_norm(x - ref))
    return num / denom if denom else (0.0 if num == 0 else math.inf)


def compare(got: torch.Tensor, native: torch.Tensor, ref64: torch.Tensor | None, *, mode: str = REFERENCE,
            factor: float = 8.0, allowed_unit_roundoff: float = 0.0, scale_floor: float = 0.0,
            device: str = "cpu") -> Comparison:
    """Judge ``got`` (same shape and dtype as ``native``, checked before) against the reference.

    ``device``: where the float64 arithmetic runs. "cuda" judges a 67M-element output in well under a second where
    the host took ~10 s; a device that has no room for the float64 buffers falls back to the host (same figures).

    ``allowed_unit_roundoff`` relaxes the reference-mode bound explicitly for a narrower arithmetic the user allowed
    (``--allow-tf32``: 2^-11, ``--allow-reduced-precision``: 2^-8): the bound is then at least K times it.
    ``scale_floor``: the least ``scale`` (reference mode) where the caller knows the magnitude the value was computed
    from better than its own RMS says — a batch norm's running mean over zero-mean activations is rounding noise of
    about 1e-9 whose natural scale is the layer's standard deviation, not itself."""
    if device != "cpu":
        try:
            return _compare_on(device, got, native, ref64, mode=mode, factor=factor,
                               allowed_unit_roundoff=allowed_unit_roundoff, scale_floor=scale_floor)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
    return _compare_on("cpu", got, native, ref64, mode=mode, factor=factor,
                       allowed_unit_roundoff=allowed_unit_roundoff, scale_floor=scale_floor)


def _compare_on(device: str, got: torch.Tensor, native: torch.Tensor, ref64: torch.Tensor | None, *, mode: str,
                factor: float, allowed_unit_roundoff: float, scale_floor: float) -> Comparison:
    shape = tuple(native.shape)
    if not native.is_floating_point():
        return _compare_exact(got, native, ref64, mode, device)
    c = got.detach().to(device, torch.float64).reshape(-1)
    n = native.detach().to(device, torch.float64).reshape(-1)
    if mode == KERNELBENCH or ref64 is None:
        r = n
    else:
        r = ref64.detach().to(device, torch.float64).reshape(-1)
    dtype = native.dtype
    if _all_finite(c, n, r, dtype):
        comparison = _compare_finite(c, n, r, shape, dtype, mode=mode, factor=factor,
                                     allowed_unit_roundoff=allowed_unit_roundoff, have_ref64=ref64 is not None,
                                     scale_floor=scale_floor)
        return comparison if comparison.ok else _with_reason(comparison)
    # The correctly rounded answer decides where NaN/inf belong; PyTorch's own non-finite values are accepted too.
    rq = r.to(dtype).to(torch.float64)
    finite_ref = torch.isfinite(rq)
    finite_got = torch.isfinite(c)
    bad_nonfinite = (~finite_ref & ~(_same_nonfinite(c, rq) | _same_nonfinite(c, n))) | (
        finite_ref & ~finite_got & ~_same_nonfinite(c, n))
    both = finite_ref & finite_got & torch.isfinite(r)
    diff = (c - r).abs()
    diff = torch.where(both, diff, torch.zeros_like(diff))

    if mode == KERNELBENCH:
        tol = _KB_TOL.get(dtype, 1e-4)
        wrong = both & (diff > tol + tol * r.abs())
        bound, e_nat, normalised = tol, None, diff / (tol + tol * r.abs())
    else:
        u = float(torch.finfo(dtype).eps) / 2.0
        rf = r[both]
        scale = float(torch.sqrt(torch.mean(rf * rf))) if rf.numel() else 0.0
        scale = max(scale, scale_floor) if math.isfinite(scale) else scale_floor
        scale = scale if scale > 0 else 1e-30
        denom = r.abs() + scale
        if ref64 is not None:
            nat_ok = both & torch.isfinite(n)
            e_nat = float(torch.max(torch.where(nat_ok, (n - r).abs() / denom, torch.zeros_like(n)))) if n.numel() else 0.0
        else:
            e_nat = 2 * u  # no float64 reference: assume PyTorch is within rounding of the truth
        bound = max(factor * max(e_nat, u, allowed_unit_roundoff), _FLOOR.get(dtype, 0.0))
        normalised = torch.where(both, diff / denom, torch.zeros_like(diff))
        wrong = normalised > bound

    wrong_all = wrong | bad_nonfinite
    wrong_count = int(wrong_all.sum())
    numel = c.numel()
    # The worst element: a misplaced NaN/inf first, else the largest normalised error.
    if bool(bad_nonfinite.any()):
        worst = int(torch.nonzero(bad_nonfinite)[0])
    elif numel:
        worst = int(torch.argmax(normalised))
    else:
        worst = None
    # Relative error among elements that are not tiny next to the tensor's scale (1% of its RMS or more).
    rms = float(torch.sqrt(torch.mean(r[both] ** 2))) if bool(both.any()) else 0.0
    significant = both & (r.abs() > 0.01 * rms)
    rel = torch.where(significant, diff / r.abs().clamp_min(1e-300), torch.zeros_like(diff))
    signed = ((c - r) / r.abs().clamp_min(1e-300))[significant]
    signed = signed[torch.isfinite(signed)]
    comparison = Comparison(
        ok=wrong_count == 0,
        reason="",
        mode=mode,
        numel=numel,
        wrong_count=wrong_count,
        wrong_fraction=wrong_count / numel if numel else 0.0,
        nonfinite_mismatches=int(bad_nonfinite.sum()),
        max_abs_error=float(diff.max()) if numel else 0.0,
        max_rel_error=float(rel.max()) if numel else 0.0,
        rel_l2_error=_rel_l2(c[both], r[both]),
        native_rel_l2_error=_rel_l2(n[both], r[both]) if mode == REFERENCE and ref64 is not None else None,
        native_max_error=e_nat,
        bound=bound,
        worst_index=_index(worst, shape) if worst is not None else None,
        worst_got=float(c[worst]) if worst is not None else None,
        worst_expected=float(r[worst]) if worst is not None else None,
        rel_error_rms=float(torch.sqrt(torch.mean(signed * signed))) if signed.numel() else 0.0,
        rel_error_mean=float(torch.mean(signed)) if signed.numel() else 0.0,
    )
    if comparison.ok:
        return comparison
    return _with_reason(comparison)


def _all_finite(c: torch.Tensor, n: torch.Tensor, r: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether every element of the candidate, PyTorch's output and the reference is finite, and the reference
    rounds to a finite value of ``dtype`` (max-norms: NaN propagates through them; no mask is allocated)."""
    if c.numel() == 0:
        return False
    inf = float("inf")
    if not (math.isfinite(float(torch.linalg.vector_norm(c, inf)))
            and math.isfinite(float(torch.linalg.vector_norm(n, inf)))):
        return False
    r_max = float(torch.linalg.vector_norm(r, inf))
    return math.isfinite(r_max) and r_max <= float(torch.finfo(dtype).max)


def _compare_finite(c: torch.Tensor, n: torch.Tensor, r: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype,
                    *, mode: str, factor: float, allowed_unit_roundoff: float, have_ref64: bool,
                    scale_floor: float = 0.0) -> Comparison:
    """:func:`compare` when nothing is NaN or infinite (the usual case): the same figures in a few in-place passes
    over three float64 buffers instead of some forty masked ones. A 67M-element fp32 output took ~10 s per
    comparison on the H200 machine's host (2026-12-02, ``cumsum_dim1``: 111 s of judging for one verify)."""
    numel = c.numel()
    r_norm = float(torch.linalg.vector_norm(r))
    rms = r_norm / math.sqrt(numel)
    diff = torch.sub(c, r)
    rel_l2 = float(torch.linalg.vector_norm(diff)) / r_norm if r_norm else (
        0.0 if not bool(diff.any()) else math.inf)
    diff.abs_()
    abs_r = r.abs()
    work = torch.empty_like(diff)
    native_l2: float | None = None
    if mode == KERNELBENCH:
        tol = _KB_TOL.get(dtype, 1e-4)
        bound, e_nat = tol, None
        torch.mul(abs_r, tol, out=work).add_(tol)
        torch.div(diff, work, out=work)  # normalised: wrong where above 1
        wrong_count = int((work > 1.0).sum())
    else:
        u = float(torch.finfo(dtype).eps) / 2.0
        scale = max(rms, scale_floor) or 1e-30
        denom = abs_r.add(scale)
        if have_ref64:
            torch.sub(n, r, out=work)
            nat = float(torch.linalg.vector_norm(work))
            native_l2 = nat / r_norm if r_norm else (0.0 if nat == 0 else math.inf)
            e_nat = float(work.abs_().div_(denom).max())
        else:
            e_nat = 2 * u
        bound = max(factor * max(e_nat, u, allowed_unit_roundoff), _FLOOR.get(dtype, 0.0))
        torch.div(diff, denom, out=work)
        del denom
        wrong_count = int((work > bound).sum())
    worst = int(torch.argmax(work))
    # Relative error among elements that are not tiny next to the tensor's scale (1% of its RMS or more).
    insignificant = abs_r <= 0.01 * rms
    significant_count = numel - int(insignificant.sum())
    torch.sub(c, r, out=work).div_(abs_r.clamp_min_(1e-300)).masked_fill_(insignificant, 0.0)  # signed
    max_rel = float(torch.linalg.vector_norm(work, float("inf")))
    rel_rms = float(torch.linalg.vector_norm(work)) / math.sqrt(significant_count) if significant_count else 0.0
    rel_mean = float(work.sum()) / significant_count if significant_count else 0.0
    return Comparison(
        ok=wrong_count == 0,
        reason="",
        mode=mode,
        numel=numel,
        wrong_count=wrong_count,
        wrong_fraction=wrong_count / numel,
        nonfinite_mismatches=0,
        max_abs_error=float(diff.max()),
        max_rel_error=max_rel,
        rel_l2_error=rel_l2,
        native_rel_l2_error=native_l2 if mode == REFERENCE else None,
        native_max_error=e_nat,
        bound=bound,
        worst_index=_index(worst, shape),
        worst_got=float(c[worst]),
        worst_expected=float(r[worst]),
        rel_error_rms=rel_rms,
        rel_error_mean=rel_mean,
    )


# Unit roundoffs of the formats a shortcut computes in: TF32 and fp16 keep 10 mantissa bits, bf16 keeps 7.
TF32_UNIT_ROUNDOFF = 2.0**-11
BF16_UNIT_ROUNDOFF = 2.0**-8


def allowed_roundoff(policy: Policy) -> float:
    """The unit roundoff a policy lets an fp32 problem's candidate compute at (0: fp32's own)."""
    return BF16_UNIT_ROUNDOFF if policy.allow_reduced_precision else TF32_UNIT_ROUNDOFF if policy.allow_tf32 else 0.0
_REDUCED_FORMATS = (("TF32 or fp16", TF32_UNIT_ROUNDOFF), ("bf16", BF16_UNIT_ROUNDOFF))


def precision_signature(c: Comparison, dtype: torch.dtype) -> str | None:
    """If a failed comparison in an fp32 problem looks like rounding noise of a narrower format — unbiased (the
    mean relative error well under its RMS) at about that format's unit roundoff — name the format."""
    if dtype not in (torch.float32, torch.float64) or c.ok or c.nonfinite_mismatches or not c.rel_error_rms:
        return None
    if abs(c.rel_error_mean) > 0.3 * c.rel_error_rms:
        return None  # a systematic error (a wrong constant, a missing term), not rounding
    for name, u in _REDUCED_FORMATS:
        if 0.05 * u <= c.rel_error_rms <= 6 * u:
            return f"{name} (relative error RMS {c.rel_error_rms:.2g}, unbiased; that format rounds to {u:.2g})"
    return None


def _with_reason(c: Comparison) -> Comparison:
    where = f"at {list(c.worst_index)}" if c.worst_index is not None else ""
    if c.nonfinite_mismatches and c.worst_got is not None and not math.isfinite(c.worst_got):
        head = f"{c.nonfinite_mismatches} NaN/inf where the reference is finite (first {where}: got {c.worst_got})"
    elif c.nonfinite_mismatches:
        head = f"{c.nonfinite_mismatches} element(s) finite where the reference is NaN/inf (first {where})"
    else:
        head = (f"max abs error {c.max_abs_error:.3g}, max rel error {c.max_rel_error:.3g} "
                f"(worst {where}: got {c.worst_got:.6g}, expected {c.worst_expected:.6g})")
    tail = f"{c.wrong_fraction:.2%} of elements wrong"
    if c.mode == REFERENCE:
        tail += f"; allowed {c.bound:.2g} (PyTorch's own error {c.native_max_error:.2g})"
    else:
        tail += f"; KernelBench tolerance atol=rtol={c.bound:g}"
    return Comparison(**{**asdict(c), "reason": f"{head}; {tail}",
                         "worst_index": c.worst_index})


def _compare_exact(got: torch.Tensor, native: torch.Tensor, ref64: torch.Tensor | None, mode: str,
                   device: str = "cpu") -> Comparison:
    g = got.detach().to(device).reshape(-1)
    n = native.detach().to(device).reshape(-1)
    right = g == n
    if ref64 is not None and ref64.shape == native.shape:
        right |= g == ref64.detach().to(device).reshape(-1).to(g.dtype)  # ties resolved differently are fine
    wrong = ~right
    count = int(wrong.sum())
    worst = int(torch.nonzero(wrong)[0]) if count else None
    comparison = Comparison(
        ok=count == 0, reason="", mode=mode, numel=g.numel(), wrong_count=count,
        wrong_fraction=count / g.numel() if g.numel() else 0.0, nonfinite_mismatches=0,
        max_abs_error=float((g.double() - n.double()).abs().max()) if g.numel() else 0.0,
        max_rel_error=0.0, rel_l2_error=0.0, native_rel_l2_error=None, native_max_error=None, bound=0.0,
        worst_index=_index(worst, tuple(native.shape)) if worst is not None else None,
        worst_got=float(g[worst]) if worst is not None else None,
        worst_expected=float(n[worst]) if worst is not None else None,
    )
    if comparison.ok:
        return comparison
    reason = (f"{count} of {g.numel()} elements differ from the exact answer (first at "
              f"{list(comparison.worst_index or ())}: got {comparison.worst_got:g}, expected "
              f"{comparison.worst_expected:g})")
    return Comparison(**{**asdict(comparison), "reason": reason, "worst_index": comparison.worst_index})
