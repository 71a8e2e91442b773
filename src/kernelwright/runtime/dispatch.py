"""Which variant of an exported op runs where, and making a variant's module ready to launch.

The op-independent half of an exported op's runtime (:mod:`.op` holds ``OpRuntime``). Like all of
:mod:`kernelwright.runtime` it imports only the standard library, torch and (lazily) triton, and its siblings
relatively, so an exported package carries the folder verbatim as its ``_runtime/``.

- **Choosing**: :class:`VariantSpec` (a ``variants.json`` entry), :func:`runs_on` (an arch on a compute
  capability), :func:`precision_allows`, :func:`select_variant` (the variant for a device, or None for the
  reference).
- **Launching**: :func:`launched_kernels` and :func:`wrap_launches` (a ``triton_op``'s kernels made visible to
  Inductor), :func:`build_instance` (a ``ModelNew`` ready for ``torch.func.functional_call``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

# torch.get_float32_matmul_precision() names, least to most permissive; a run's precision policy maps onto them
# (strict fp32 -> "highest", TF32 allowed -> "high", fp16/bf16 compute allowed -> "medium")
PRECISIONS = ("highest", "high", "medium")
PRECISION_LABELS = {"highest": "fp32", "high": "tf32", "medium": "reduced"}


# ------------------------------------------------------------------------------------------------ choosing


@dataclass(frozen=True, kw_only=True)
class VariantSpec:
    """One variant as ``variants.json`` records it (the fields the runtime needs)."""

    id: str
    arch: str  # "sm_90a", "sm_80", "sm_100f"
    capability: tuple[int, int]
    language: str  # "triton" or "cuda"
    precision: str  # one of PRECISIONS
    file: str  # relative to the package root
    state_map: dict[str, str] | None  # variant's state_dict key -> reference key, when they differ
    backward_file: str | None = None  # the generated backward's ModelNew, relative to the package root
    gradients: tuple[str, ...] = ()  # what the backward returns, in order: input names and state keys

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VariantSpec:
        backward = data.get("backward") or {}
        return cls(id=data["id"], arch=data["arch"], capability=(int(data["capability"][0]),
                                                                  int(data["capability"][1])),
                   language=data["language"], precision=data["precision"], file=data["file"],
                   state_map=data.get("state_map"), backward_file=backward.get("file"),
                   gradients=tuple(backward.get("gradients") or ()))


def runs_on(arch: str, capability: tuple[int, int]) -> bool:
    """Whether code built for ``arch`` runs on a device of ``capability``: an arch-specific target (``sm_90a``)
    only on exactly its capability, a family target (``sm_100f``) on its major version from its minor up, a plain
    one (``sm_80``) on its capability and every newer one (Triton compiles for the device; CUDA code carries PTX)."""
    major, minor = _capability_of(arch)
    if arch.endswith("a"):
        return capability == (major, minor)
    if arch.endswith("f"):
        return capability[0] == major and capability[1] >= minor
    return capability >= (major, minor)


def precision_allows(variant_precision: str, current: str) -> bool:
    """A variant computed at ``variant_precision`` may run when PyTorch's float32 matmul precision is at least as
    permissive (``torch.set_float32_matmul_precision("high")`` admits TF32 variants)."""
    return _precision_rank(variant_precision) <= _precision_rank(current)


def select_variant(variants: Sequence[VariantSpec], *, capability: tuple[int, int] | None, precision: str,
                   interpreted: bool = False) -> VariantSpec | None:
    """The variant for a device of ``capability`` (None: the CPU), or None for the reference.

    Among the variants that run on the device and whose precision is allowed: the newest arch (exact before
    nearest older), then the most permissive precision allowed. On the CPU only the Triton interpreter runs
    variants (``interpreted``), and only Triton ones."""
    allowed = [v for v in variants if precision_allows(v.precision, precision)]
    if capability is None:
        if not interpreted:
            return None
        usable = [v for v in allowed if v.language == "triton"]
    else:
        usable = [v for v in allowed if runs_on(v.arch, capability)]
    if not usable:
        return None
    return max(usable, key=lambda v: (v.capability, _precision_rank(v.precision), v.arch.endswith("a")))


def _capability_of(arch: str) -> tuple[int, int]:
    digits = arch[3:].rstrip("af") if arch.startswith("sm_") else ""
    if len(digits) < 2 or not digits.isdigit():
        raise ValueError(f"{arch!r} is not an NVIDIA arch such as sm_80 or sm_90a")
    return int(digits[:-1]), int(digits[-1])


def _precision_rank(precision: str) -> int:
    try:
        return PRECISIONS.index(precision)
    except ValueError:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}") from None


# ------------------------------------------------------------------------------------------------ loading


def launched_kernels(module: Any) -> dict[str, Any]:
    """The module's ``@triton.jit`` / ``@triton.autotune`` kernels that Python code launches: every such global
    except those another kernel calls as a device function (``wrap_triton`` wraps launches, and a device function
    replaced by its wrapper would no longer compile)."""
    try:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
    except ImportError:
        return {}
    kernels = {name: value for name, value in vars(module).items() if isinstance(value, (JITFunction, Autotuner))}
    called: set[str] = set()
    for value in kernels.values():
        fn = _python_function(value)
        if fn is not None:
            called.update(fn.__code__.co_names)
    return {name: value for name, value in kernels.items() if name not in called}


def _python_function(kernel: Any) -> Any:
    inner = kernel
    for _ in range(8):  # Autotuner -> Heuristics -> JITFunction -> the Python function
        nxt = getattr(inner, "fn", None)
        if nxt is None:
            break
        inner = nxt
    return inner if hasattr(inner, "__code__") else None


def wrap_launches(module: Any) -> list[str]:
    """Replace the module's launched kernels by ``torch.library.wrap_triton`` wrappers, so a ``kernel[grid](...)``
    traced inside a ``triton_op`` becomes a kernel call Inductor sees (and an eager call launches it directly)."""
    from torch.library import wrap_triton

    try:  # a module loaded inside the op's eager body would otherwise get the raw kernels back
        from torch._library.triton import set_wrap_triton_enabled
    except ImportError:  # pragma: no cover - older torch: wrapping is always enabled
        set_wrap_triton_enabled = None  # noqa: N806
    wrapped = []
    enabled = set_wrap_triton_enabled(True) if set_wrap_triton_enabled else contextlib.nullcontext()
    with enabled:
        for name, kernel in launched_kernels(module).items():
            setattr(module, name, wrap_triton(kernel))
            wrapped.append(name)
    return wrapped


def _no_dispatch_modes() -> contextlib.AbstractContextManager[Any]:
    """Build modules outside any tracing mode (fake tensors, functionalization): their parameters are real."""
    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return _disable_current_modes()


def build_instance(model_cls: type, init_inputs: Sequence[Any], state_keys: Sequence[str],
                   device: torch.device) -> torch.nn.Module:
    """``model_cls(*init_inputs)`` for calls on ``device``. Its ``state_keys`` entries become empty meta tensors
    (every call supplies them), its other buffers move to ``device``; the caller's random state is untouched."""
    with _no_dispatch_modes(), torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_cls(*init_inputs)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"{model_cls.__name__}(...) is a {type(model).__name__}, not an nn.Module")
        own = model.state_dict(keep_vars=True)
        missing = [k for k in state_keys if k not in own]
        if missing:
            raise RuntimeError(f"{model_cls.__name__} has no parameter or buffer {', '.join(missing)}; "
                               f"it holds {', '.join(own) or 'none'}")
        stripped: dict[int, torch.Tensor] = {}
        for key in state_keys:
            _replace_with_meta(model, key, stripped)
        for module in model.modules():
            for name, buf in list(module._buffers.items()):
                if buf is not None and buf.device.type != "meta":
                    module._buffers[name] = buf.to(device)
    return model


def _replace_with_meta(model: torch.nn.Module, key: str, done: dict[int, torch.Tensor]) -> None:
    *path, leaf = key.split(".")
    owner = model
    for part in path:
        owner = getattr(owner, part)
    value = owner._parameters.get(leaf) if leaf in owner._parameters else owner._buffers.get(leaf)
    if value is None:
        return
    if id(value) not in done:  # tied weights stay tied
        meta = torch.empty_like(value, device="meta")
        done[id(value)] = torch.nn.Parameter(meta, requires_grad=value.requires_grad) \
            if isinstance(value, torch.nn.Parameter) else meta
    if leaf in owner._parameters:
        owner._parameters[leaf] = done[id(value)]
    else:
        owner._buffers[leaf] = done[id(value)]
