"""The build helper every CUDA C++ candidate carries: its extension built once per process by
``torch.utils.cpp_extension.load_inline`` (what the verifier's launch recorder and its CPU compile-only path watch),
in a build directory named by the source's hash, so a second process (the next trial's child, a bench resumed
tomorrow) loads the built module instead of compiling again.

Two things torch's builder leaves to the caller, done here:
- **a Ctrl-C mid-build**: torch guards a build directory with a ``lock`` file and waits, forever, for it to go; a
  build interrupted before it could remove the lock would hang every later build of the same source. A lock older
  than :data:`STALE_LOCK_S` (no build of these kernels takes that long; the verifier's child limit cuts one before)
  is removed with a note on stderr.
- **the compiler's error**: torch raises ``RuntimeError('Error building extension ...')`` with nvcc's output in the
  message; the helper raises one line naming the extension, the archs and nvcc's first ``error`` line (the
  verifier reports it as the candidate's compile error; the search goes on to the next configuration).

The archs are chosen with ``TORCH_CUDA_ARCH_LIST`` for the build (restored after): ``9.0a`` for the wgmma kernels
(sm_90a's instructions do not assemble for plain sm_90, which is what torch would pick on an H100), ``8.0;9.0`` for
the mma.sync ones.
"""

from __future__ import annotations

import hashlib

STALE_LOCK_S = 900.0


def extension_name(*parts: str) -> str:
    """The extension's (and its build directory's) name: ``kw_`` and 16 hex digits of the sources' SHA-256."""
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"kw_{digest[:16]}"


# Generated source (format with ident=...): ``{ident}_build(name, cpp, cuda, arch_list)`` -> the built module.
BUILD_SOURCE = '''\
{ident}_modules = {{}}


def {ident}_build(name, cpp, cuda, arch_list):
    """The extension ``name`` (its sources' hash), built once per process; the build directory is torch's (per
    name), so another process loads what this one built."""
    if name in {ident}_modules:
        return {ident}_modules[name]
    import os
    import sys
    import time

    import torch.utils.cpp_extension as cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                  "torch_extensions")
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    lock = os.path.join(directory, "lock")
    try:
        if time.time() - os.path.getmtime(lock) > {stale}:  # an interrupted build's: torch would wait forever
            os.remove(lock)
            print(f"kernelwright: removed a stale build lock of {{name}} ({{lock}})", file=sys.stderr)
    except OSError:
        pass
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    try:
        module = cpp_extension.load_inline(
            name, cpp_sources=[cpp], cuda_sources=[cuda], functions=["run"], build_directory=directory,
            extra_cuda_cflags=["-O3", "-std=c++17", "-lineinfo"], verbose=False)
    except RuntimeError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if " error" in line or line.startswith("error")]
        raise RuntimeError(f"CUDA extension {{name}} does not build for {{arch_list}}: "
                           f"{{lines[0] if lines else str(exc).splitlines()[0]}}") from None
    finally:
        if saved is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    {ident}_modules[name] = module
    return module'''


def build_source(ident: str) -> str:
    return BUILD_SOURCE.format(ident=ident, stale=repr(STALE_LOCK_S))
