"""kernelwright's fixes to Triton's interpreter (runtime/interpreter.py), run in a process of their own under
TRITON_INTERPRET=1 (set before triton is imported)."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = r'''
import torch, triton, triton.language as tl
from triton.runtime import interpreter
from kernelwright.runtime.interpreter import install_interpreter_patch_cache

@triton.jit
def _scale(x, s):
    return x * s

@triton.jit
def _row_softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=-float("inf"))
    x = _scale(x - tl.max(x, axis=0), 1.0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n + offs, e / tl.sum(e, axis=0), mask=offs < n)

def run(x):
    y = torch.empty_like(x)
    _row_softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y

x = torch.randn(7, 131)
plain = run(x)
builtins_before = {n for n in dir(tl) if tl.core.is_builtin(getattr(tl, n))}
assert install_interpreter_patch_cache() and install_interpreter_patch_cache()  # once, and again: a no-op
assert interpreter._patch_builtin._kernelwright_cached
cached = [run(x) for _ in range(3)]
assert all(torch.equal(c, plain) for c in cached), "the cache changed what the kernel computes"
torch.testing.assert_close(plain, torch.softmax(x, dim=-1))
# after each launch the language is as it was: every builtin restored, none left patched
assert {n for n in dir(tl) if tl.core.is_builtin(getattr(tl, n))} == builtins_before
print("OK")
'''


def test_the_patch_cache_computes_the_same_and_leaves_the_language_as_it_was() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]
