"""Work counting and roofline floors — protocol rule 11.

The reference child counts what the problem must do (:func:`count_work`): FLOPs of matmul-like ops through
PyTorch's own flop formulas (``torch.utils.flop_counter.flop_registry``), attributed to the operand dtype, plus an
element-op estimate for everything else, and the minimum bytes (inputs the output depends on, outputs, parameters
and buffers, each once). The parent turns that into two floors (:func:`floors`):

- the *achievable* floor, from the device's measured ceilings (copy bandwidth, library matmul rate) — what
  "% of floor" reports;
- the *physical* floor, from datasheet peaks — a candidate faster than 0.9 x this is rejected ("faster than the
  hardware allows"). It is deliberately permissive: fp32 matmul work is priced at a third of the TF32 tensor rate
  (error-compensated 3xTF32 is a legitimate fp32 technique), and the element-op estimate is left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelwright.jobs.records import WorkCount
from kernelwright.records import DEFAULT_POLICY, Policy, ProblemTraits

if TYPE_CHECKING:
    from kernelwright.jobs import Measurement

_ATTENTION_HINTS = ("scaled_dot_product", "flash_attention", "efficient_attention", "flex_attention")
_FREE_OPS = (
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "alias", "lift_fresh",
    "_local_scalar_dense", "set_", "resize_", "_to_copy_meta",
)  # fmt: skip

# dtype name -> key in GpuSpec.peak_tflops / Ceilings.matmul_tflops
_RATE_KEY = {"float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "float8_e4m3fn": "fp8",
             "float8_e5m2": "fp8", "int8": "int8"}


def _tensor_bytes(values: Sequence[Any]) -> float:
    import torch

    seen: set[tuple[str, int]] = set()
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor) and v.numel():
            key = (str(v.device), v.untyped_storage().data_ptr())
            if key in seen:
                continue
            seen.add(key)
            total += v.numel() * v.element_size()
    return float(total)


def count_work(model: Any, inputs: Sequence[Any], outputs: Sequence[Any],
               ignored_inputs: Sequence[int] = ()) -> WorkCount:
    """Run ``model(*inputs)`` once under a dispatch mode that counts FLOPs by operand dtype. Trusted code only."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import flop_registry

    matmul: dict[str, float] = defaultdict(float)
    kinds: set[str] = set()
    elementwise = 0.0

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            nonlocal elementwise
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.overloadpacket
            name = packet.__name__
            tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else "float32"
            flops = None
            if packet in flop_registry:
                try:
                    flops = float(flop_registry[packet](*args, out_val=out, **kwargs))
                except Exception:  # a formula that does not fit these arguments: fall back to the estimate
                    flops = None
            elif "scaled_dot_product" in name and len(tensors) >= 3:
                q, k = tensors[0], tensors[1]  # (..., L, E) and (..., S, E); v is (..., S, Ev)
                batch = q.numel() // (q.shape[-1] * q.shape[-2])
                flops = 2.0 * batch * q.shape[-2] * k.shape[-2] * (q.shape[-1] + tensors[2].shape[-1])
            if flops is not None:
                matmul[dtype] += flops
                if "conv" in name:
                    kinds.add("conv")
                elif any(h in name for h in _ATTENTION_HINTS):
                    kinds.add("attention")
                else:
                    kinds.add("matmul")
            elif name not in _FREE_OPS and not func.is_view:
                if "softmax" in name:
                    kinds.add("softmax")
                outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
                largest = max((t.numel() for t in tensors + outs), default=0)
                elementwise += float(largest)
            return out

    with torch.no_grad(), Counter():
        model(*inputs)

    ignored = set(ignored_inputs)
    dtypes = sorted(
        {str(t.dtype).removeprefix("torch.") for t in list(inputs) + list(outputs) + list(model.parameters())
         if isinstance(t, torch.Tensor) and t.is_floating_point()}
    )
    return WorkCount(
        matmul_flops=dict(matmul),
        elementwise_flops=elementwise,
        input_bytes=_tensor_bytes([v for i, v in enumerate(inputs) if i not in ignored]),
        ignored_inputs=tuple(sorted(ignored)),
        output_bytes=_tensor_bytes(outputs),
        parameter_bytes=_tensor_bytes(list(model.parameters()) + list(model.buffers())),
        kinds=tuple(sorted(kinds)),
        dtypes=tuple(dtypes),
    )


# Below this many matmul FLOPs per byte of minimum traffic, even a matmul problem is bandwidth-bound (a GEMV, a
# skinny linear): tensor cores are then not what decides its speed.
MATMUL_BOUND_INTENSITY = 32.0


def traits(work: WorkCount, *, policy: Policy = DEFAULT_POLICY) -> ProblemTraits:
    mm = work.total_matmul_flops
    if mm and mm / max(work.bytes, 1.0) >= MATMUL_BOUND_INTENSITY:
        if "attention" in work.kinds or ("softmax" in work.kinds and "matmul" in work.kinds):
            dominant = "attention"
        elif "conv" in work.kinds:
            dominant = "conv"
        else:
            dominant = "matmul"
    else:
        dominant = "memory"
    if work.matmul_flops:
        compute_dtype = max(work.matmul_flops.items(), key=lambda kv: kv[1])[0]
    else:
        compute_dtype = _widest(work.dtypes)
    return ProblemTraits(
        dominant=dominant,
        compute_dtype=compute_dtype,
        dtypes=work.dtypes,
        flops=mm + work.elementwise_flops,
        matmul_flops=mm,
        bytes=work.bytes,
        policy=policy,
    )


def _widest(dtypes: Sequence[str]) -> str | None:
    order = ["float64", "float32", "bfloat16", "float16"]
    for name in order:
        if name in dtypes:
            return name
    return dtypes[0] if dtypes else None


@dataclass(frozen=True, kw_only=True)
class Roofline:
    """Two floors (ms) and where they come from."""

    bytes: float
    flops: float
    matmul_flops: float
    achievable_floor_ms: float | None  # from measured ceilings; None when not measured
    physical_floor_ms: float | None  # from datasheet peaks; None for an unknown device
    bound: str  # "memory" or "compute": which term of the achievable (else physical) floor is larger
    basis: Mapping[str, Any] = field(default_factory=dict)  # the rates used

    def percent_of_floor(self, measured_ms: float | None) -> float | None:
        if measured_ms is None or not measured_ms or self.achievable_floor_ms is None:
            return None
        return 100.0 * self.achievable_floor_ms / measured_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "flops": self.flops,
            "matmul_flops": self.matmul_flops,
            "achievable_floor_ms": self.achievable_floor_ms,
            "physical_floor_ms": self.physical_floor_ms,
            "bound": self.bound,
            "basis": dict(self.basis),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Roofline:
        return cls(bytes=float(data["bytes"]), flops=float(data["flops"]), matmul_flops=float(data["matmul_flops"]),
                   achievable_floor_ms=data.get("achievable_floor_ms"), physical_floor_ms=data.get("physical_floor_ms"),
                   bound=str(data["bound"]), basis=dict(data.get("basis") or {}))


def _matmul_ms(flops_by_dtype: Mapping[str, float], rates: Mapping[str, float], *, fp32_key: str,
               fp32_divisor: float = 1.0) -> float | None:
    total = 0.0
    for dtype, flops in flops_by_dtype.items():
        if dtype == "float32":
            rate = rates.get(fp32_key)
            rate = rate / fp32_divisor if rate else None
        else:
            rate = rates.get(_RATE_KEY.get(dtype, dtype))
        if not rate:
            return None
        total += flops / (rate * 1e12) * 1e3
    return total


def floors(work: WorkCount, *, peak_bandwidth_gbs: float | None, peak_tflops: Mapping[str, float] | None,
           copy_gbs: float | None, measured_tflops: Mapping[str, float] | None,
           allow_tf32: bool = False) -> Roofline:
    """The achievable and physical floors for ``work`` on one device."""
    basis: dict[str, Any] = {}
    achievable = None
    bound = "memory"
    if copy_gbs:
        bytes_ms = work.bytes / (copy_gbs * 1e9) * 1e3
        mm_ms = _matmul_ms(work.matmul_flops, measured_tflops or {}, fp32_key="tf32" if allow_tf32 else "fp32")
        basis["copy_gbs"] = copy_gbs
        basis["measured_tflops"] = dict(measured_tflops or {})
        if mm_ms is None:
            mm_ms = 0.0
            if work.matmul_flops:
                basis["note"] = "no measured matmul rate for " + ", ".join(work.matmul_flops)
        achievable = max(bytes_ms, mm_ms)
        bound = "compute" if mm_ms > bytes_ms else "memory"
    physical = None
    if peak_bandwidth_gbs:
        bytes_ms = work.bytes / (peak_bandwidth_gbs * 1e9) * 1e3
        mm_ms = _matmul_ms(work.matmul_flops, peak_tflops or {}, fp32_key="tf32", fp32_divisor=3.0) or 0.0
        physical = max(bytes_ms, mm_ms)
        basis["peak_bandwidth_gbs"] = peak_bandwidth_gbs
        basis["peak_tflops"] = dict(peak_tflops or {})
        if achievable is None:
            bound = "compute" if mm_ms > bytes_ms else "memory"
    return Roofline(
        bytes=work.bytes,
        flops=work.total_matmul_flops + work.elementwise_flops,
        matmul_flops=work.total_matmul_flops,
        achievable_floor_ms=achievable,
        physical_floor_ms=physical,
        bound=bound,
        basis=basis,
    )


def place(work: WorkCount, timing: Mapping[str, Measurement | None], *, device: str, device_name: Any,
          ceilings: Mapping[str, Any], allow_tf32: bool, judge: Any) -> tuple[Roofline, float | None]:
    """The candidate on the roofline: (the floors, % of the achievable floor). Adds to ``judge`` a
    ``beyond-roofline`` finding for a time the hardware cannot reach, and a ``redundant-reference`` note when
    torch.compile runs the reference far faster than eager (the speedup over eager then overstates the kernel)."""
    from kernelwright.records import Severity

    peak_bw = peak = None
    if device == "cuda" and device_name:
        try:
            from kernelwright.hardware import lookup

            spec = lookup(str(device_name))
            peak_bw, peak = spec.memory_bandwidth_gbs, dict(spec.peak_tflops)
        except Exception as exc:
            judge.add("unknown-device", f"no datasheet peaks for {device_name}: {exc}", Severity.NOTE)
    roof = floors(work, peak_bandwidth_gbs=peak_bw, peak_tflops=peak, copy_gbs=ceilings.get("copy_gbs"),
                  measured_tflops=ceilings.get("matmul_tflops"), allow_tf32=allow_tf32)
    cand = timing.get("candidate")
    percent = roof.percent_of_floor(cand.median_ms) if cand else None
    if cand and roof.physical_floor_ms and cand.median_ms < 0.9 * roof.physical_floor_ms:
        judge.add("beyond-roofline",
                  f"measured {cand.median_ms:.4f} ms is faster than the hardware allows: the physical "
                  f"floor is {roof.physical_floor_ms:.4f} ms ({roof.bytes / 1e6:.1f} MB, "
                  f"{roof.matmul_flops / 1e9:.1f} GFLOP matmul at datasheet peaks)",
                  physical_floor_ms=roof.physical_floor_ms, median_ms=cand.median_ms)
    eager, compiled = timing.get("eager"), timing.get("compile_max_autotune") or timing.get("compile")
    if eager and compiled and compiled.median_ms > 0 and eager.median_ms / compiled.median_ms >= 2.0:
        judge.add("redundant-reference",
                  f"torch.compile runs the reference {eager.median_ms / compiled.median_ms:.1f}x "
                  "faster than eager: the speedup over eager overstates the kernel; compare with "
                  "torch.compile", Severity.NOTE)
    return roof, percent
