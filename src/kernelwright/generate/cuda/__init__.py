"""The CUDA C++ back end of the template generator: kernels written in CUDA C++ with inline PTX (mma.sync, cp.async
and ldmatrix on Ampere; wgmma, TMA and mbarrier on Hopper), built at first use with
``torch.utils.cpp_extension.load_inline`` and judged by the same verifier as the Triton candidates.

- :mod:`.pointwise`: C++ expressions for the pointwise aten operators of an epilogue (the Triton emitter's twin).
- :mod:`.build`: the generated files' build helper (a build directory per source hash, a stale lock cleared, the
  compiler's first error line in the exception).
- :mod:`.gemm`: the GEMM kernels' sources (``mma_sync`` for sm_80 and later, ``wgmma`` for sm_90a).
"""

BACKENDS = ("triton", "cuda", "all")


def config_backend(config: object) -> str:
    """The back end a family configuration renders with: ``"cuda"`` where it says so, else ``"triton"``."""
    return "cuda" if getattr(config, "get", lambda *_: None)("backend") == "cuda" else "triton"


def on_backend(configs: list, backend: str) -> list:
    """``configs`` a search may try under ``--backend``: ``all`` every one (the CUDA ones where the family placed
    them), ``triton`` none of the CUDA ones, ``cuda`` the CUDA ones first (a family without any keeps its Triton
    configurations: the problem must still be covered)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "all":
        return configs
    cuda = [c for c in configs if config_backend(c) == "cuda"]
    triton = [c for c in configs if config_backend(c) != "cuda"]
    if backend == "triton":
        return triton
    return cuda or triton
