"""A Triton candidate whose kernels' PTX is rewritten before ptxas assembles it (issue 30 item 2): the candidate file
as the templates wrote it, plus a block that names the passes (inspect/ptx_rewrite.py) and applies them through
Triton's supported extension point for its compile pipeline, ``triton.knobs.runtime.add_stages_inspection_hook``.

How it runs. Each of the file's own ``@triton.jit`` kernels gets an instance-level ``run`` that, for the length of
its own launch, installs the hook and points Triton's disk cache at a folder of the rewrite's own
(``<cache>/kernelwright-ptx/<digest>``), then puts back what was there: the rewrite reaches exactly these kernels —
never another candidate's kernels in the same tuning worker, nor a library's. The hook wraps the ``ptx`` stage:
Triton writes the PTX as usual, the passes rewrite it, and Triton's own ptxas step assembles what they wrote. The
cache of its own matters because Triton 3.6 (the GPU machine's) leaves the hook out of its cache key, and the plain
and the rewritten kernel share a source: they would be served each other's cubin (newer Tritons key on the hook
too; in memory, each file's kernels are objects of their own). The launch itself (grid, arguments, the class's
``run``, and so the verifier's launch recorder) is unchanged. ``kernelwright inspect`` and the verifier's
instruction evidence compile the kernels in the same scope (``kernelwright_ptx_scope`` on the kernel), so the SASS
they report is the rewritten one. The file stays a standalone KernelBench ``ModelNew`` file: the applier is
:func:`~kernelwright.inspect.ptx_rewrite.rewrite_lines`'s own source, copied in.

Under Triton's interpreter there is no PTX: the kernels run as written (the passes change cache hints, never what
is computed). A Triton without the hook (before 3.4) makes the file raise at import with that said — a failed
candidate, not a silent plain one.
"""

from __future__ import annotations

import hashlib
import inspect as pyinspect
from collections.abc import Sequence

from kernelwright.inspect.ptx_rewrite import PASSES, rewrite_lines

MARK = "# --- PTX rewrite"

_BLOCK = '''

{mark}: {names} (kernelwright.inspect.ptx_rewrite) -----------------------------------------------
# The kernels above are compiled by Triton as usual; before ptxas assembles each one's PTX, these passes add their
# qualifier where an instruction has none of its kind. A kernel launch installs the hook for its own compile only.
import contextlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

from triton import knobs as _triton_knobs  # noqa: E402
from triton.runtime.jit import JITFunction as _JITFunction  # noqa: E402

_PTX_PASSES = {passes!r}
_PTX_RULES = {rules!r}
_PTX_KEY = "kernelwright-ptx-rewrite:{digest}"


{applier}

def _ptx_stages(backend=None, stages=None, options=None, language=None, capability=None):
    """Triton's add_stages_inspection_hook: with no arguments, the cache key part; else wrap the ptx stage."""
    if stages is None:
        return _PTX_KEY, "{digest}"
    make_ptx = stages["ptx"]

    def ptx(src, metadata):
        text = make_ptx(src, metadata)
        for rule in _PTX_RULES:
            text = rewrite_lines(text, rule)[0]
        return text

    stages["ptx"] = ptx


_NOT_SET = object()


def _ptx_enter():
    """Install the hook, and a Triton cache of this rewrite's own: Triton 3.6 leaves the hook out of its cache key,
    so there the plain and the rewritten kernel (the same source) would be served each other's cubin."""
    runtime, cache = _triton_knobs.runtime, _triton_knobs.cache
    saved = runtime.add_stages_inspection_hook, cache.__dict__.get("dir", _NOT_SET)
    base = cache.dir
    runtime.add_stages_inspection_hook = _ptx_stages
    cache.__dict__["dir"] = os.path.join(base, "kernelwright-ptx", "{digest}")
    return saved


def _ptx_exit(saved):
    _triton_knobs.runtime.add_stages_inspection_hook = saved[0]
    if saved[1] is _NOT_SET:
        _triton_knobs.cache.__dict__.pop("dir", None)
    else:
        _triton_knobs.cache.__dict__["dir"] = saved[1]


@contextlib.contextmanager
def _ptx_scope():
    """The hook and the cache for a compile outside a launch (kernelwright inspect, the instruction evidence)."""
    saved = _ptx_enter()
    try:
        yield
    finally:
        _ptx_exit(saved)


def _launch_rewritten(kernel):
    def run(*args, **kwargs):
        saved = _ptx_enter()
        try:
            return type(kernel).run(kernel, *args, **kwargs)
        finally:
            _ptx_exit(saved)

    kernel.run = run
    kernel.kernelwright_ptx_scope = _ptx_scope
    kernel.kernelwright_ptx_key = _PTX_KEY


if not hasattr(_triton_knobs.runtime, "add_stages_inspection_hook"):
    raise ImportError("this candidate rewrites its kernels' PTX through triton.knobs.runtime."
                      "add_stages_inspection_hook, which this Triton lacks: use Triton 3.4 or newer")
for _kernel in [v for v in list(globals().values()) if isinstance(v, _JITFunction) or type(v).__name__ ==
                "InterpretedFunction"]:
    _launch_rewritten(_kernel)
'''


def with_ptx_rewrite(source: str, passes: Sequence[str]) -> str:
    """``source`` (a Triton candidate file) with its own kernels' PTX rewritten by ``passes``, in order."""
    unknown = [p for p in passes if p not in PASSES]
    if unknown or not passes:
        raise ValueError(f"no PTX rewrite {', '.join(unknown) or '(none named)'}: use one of {', '.join(PASSES)}")
    if MARK in source:
        raise ValueError("this candidate already rewrites its PTX: rewrite the original instead")
    rules = tuple(PASSES[p] for p in passes)
    digest = hashlib.sha256(repr(rules).encode()).hexdigest()[:16]
    return source.rstrip("\n") + "\n" + _BLOCK.format(
        mark=MARK, names=", ".join(passes), passes=tuple(passes), rules=rules, digest=digest,
        applier=pyinspect.getsource(rewrite_lines))


def rewrite_passes(source: str) -> tuple[str, ...]:
    """The passes a candidate file applies to its PTX (none for a plain one)."""
    import ast

    for line in source.splitlines():
        if line.startswith("_PTX_PASSES = "):
            return tuple(ast.literal_eval(line.split("=", 1)[1].strip()))
    return ()
