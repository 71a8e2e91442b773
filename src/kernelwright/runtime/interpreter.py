"""Triton's interpreter (``TRITON_INTERPRET=1``): whether it is on, and the fixes kernelwright needs in it.

The one place the variable is parsed (:func:`interpret_requested`) and the interpreter's state read
(:func:`interpreting`): the verifier's children, the export probe and exported packages all ask here. Standard
library only at import (numpy and triton are imported by the fixes that patch them), like the rest of
:mod:`kernelwright.runtime`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def interpret_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``TRITON_INTERPRET`` asks for Triton's interpreter: the one parse of the variable (Triton's own
    reading: 1/true/yes/on, any case; unset, empty and anything else are off)."""
    value = (os.environ if environ is None else environ).get("TRITON_INTERPRET", "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def interpreting() -> bool:
    """Whether Triton would interpret kernels decorated now: Triton's own knob once triton is imported (it read the
    variable then), else :func:`interpret_requested`."""
    triton = sys.modules.get("triton")
    knobs = getattr(triton, "knobs", None) if triton is not None else None
    try:
        return bool(knobs.runtime.interpret) if knobs is not None else interpret_requested()
    except AttributeError:
        return interpret_requested()


def check_interpreter() -> None:
    """Triton's interpreter needs ``TRITON_INTERPRET=1`` before triton is imported: its standard library
    (``tl.sum``, ``tl.max``, ...) is made of ``@triton.jit`` functions, interpretable only if decorated then."""
    import triton.language as tl

    if type(tl.sum).__name__ != "InterpretedFunction":
        raise RuntimeError("TRITON_INTERPRET=1 was set after triton was imported, so Triton's interpreter cannot "
                           "run kernels in this process; set it in the environment before Python starts (or "
                           "unset it to run the reference on CPU tensors)")
    install_interpreter_bf16_dot_fix()
    _install_interpreter_first_config()
    install_interpreter_patch_cache()


def install_interpreter_patch_cache() -> bool:
    """Every launch and every ``@triton.jit`` helper call under the interpreter re-patches ``triton.language`` for
    the interpreter, scanning each module and class with ``inspect.getmembers`` to find its builtins: about 4 ms a
    call, 60% of a CPU verify's candidate job for a softmax whose kernel calls two helpers (profiled, 2026-12-07,
    triton 3.9). The builtins' names are the same every time; remember them per module and class and check only
    those (each still patched only while it is a builtin now, as before). False where this triton's interpreter
    is not the one this was written for (the scan is then left as it is)."""
    try:
        import inspect

        from triton.language import core
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_builtin", None)
    if original is None or getattr(original, "_kernelwright_cached", False):
        return original is not None
    try:
        if list(inspect.signature(original).parameters) != ["pkg", "builder", "scope"] or not callable(
                getattr(interpreter, "_patch_attr", None)):
            return False
    except (TypeError, ValueError):
        return False
    names: dict[int, tuple[Any, list[str]]] = {}  # id(module or class) -> (it, the names of its builtins)

    def patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        known = names.get(id(pkg))
        if known is None or known[0] is not pkg:
            found = [name for name, member in inspect.getmembers(pkg) if core.is_builtin(member)]
            known = names[id(pkg)] = (pkg, found)
        for name in known[1]:
            member = getattr(pkg, name, None)
            if core.is_builtin(member):
                interpreter._patch_attr(pkg, name, member, builder, scope)

    patch_builtin._kernelwright_cached = True  # type: ignore[attr-defined]
    interpreter._patch_builtin = patch_builtin
    return True


def _install_interpreter_first_config() -> None:
    """``triton.autotune`` with several configs benchmarks them, which needs a GPU driver: under the interpreter it
    fails outright. The interpreter checks results, not speed, so an autotuned kernel runs its first config there
    (the verifier instead rotates through all of them, one per trial)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return
    original = Autotuner.run
    # the verifier's own patch (``_kernelwright_wrapped``, rotating configs across trials) takes precedence
    if getattr(original, "_kernelwright_wrapped", False) or getattr(original, "_kernelwright_first_config", False):
        return

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        configs = self.configs
        if len(configs) <= 1:
            return original(self, *args, **kwargs)
        self.configs = configs[:1]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = configs

    run._kernelwright_first_config = True  # type: ignore[attr-defined]
    Autotuner.run = run


def install_interpreter_bf16_dot_fix() -> bool:
    """The Triton interpreter multiplies bf16 operands of ``tl.dot`` as raw uint16 bit patterns (garbage, seen with
    triton 3.9); widen them to fp32 first, which is exact and what the tensor cores' fp32 accumulation computes.
    The verifier installs it in its candidate process, and an exported op before it interprets a variant (a bf16
    GEMM package gave 1e8-sized outputs under TRITON_INTERPRET=1 without it)."""
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    except ImportError:
        return False
    original = InterpreterBuilder.create_dot
    if getattr(original, "_kernelwright_wrapped", False):
        return True

    def widen(h: Any) -> Any:
        if h.dtype == tl.bfloat16:
            return TensorHandle((h.data.astype(np.uint32) << np.uint32(16)).view(np.float32), tl.float32)
        return TensorHandle(h.data.astype(np.float32), tl.float32)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any, **kwargs: Any) -> Any:
        if a.dtype == tl.bfloat16 or b.dtype == tl.bfloat16:
            a, b = widen(a), widen(b)
        return original(self, a, b, d, *args, **kwargs)

    create_dot._kernelwright_wrapped = True  # type: ignore[attr-defined]
    InterpreterBuilder.create_dot = create_dot
    return True
