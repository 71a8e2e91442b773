"""The adversarial corpus: one candidate per exploit in KNOWN_HACKS.md, plus honest look-alikes.

Every candidate is *generated* here — from shared kernel text, with kernel and helper names drawn at random for each
build — and written under a random file name, so a verifier cannot recognise test files; it must recognise
behaviour. ``Case.build(seed)`` returns the source.
"""

from __future__ import annotations

import random
import string
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PROBLEMS = HERE / "problems"
SOFTMAX = HERE.parent / "verify" / "problems" / "softmax.py"
LINEAR = HERE.parent / "verify" / "problems" / "scaled_linear.py"

CPU, GPU, BOTH = "cpu", "gpu", "both"


def _name(rng: random.Random, stem: str) -> str:
    return f"{stem}_{''.join(rng.choices(string.ascii_lowercase, k=6))}"


HEADER = """\
import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

# A row softmax kernel; {K} is replaced by a random name.
SOFTMAX_KERNEL = """
@triton.jit
def {K}(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)


def {F}(x, y, rows=None):
    rows = x.shape[0] if rows is None else rows
    {K}[(rows,)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
"""


def softmax_module(rng: random.Random, forward: str, *, top: str = "", extra: str = "",
                   kernel: str = SOFTMAX_KERNEL) -> str:
    """A candidate for the softmax problem: random kernel/helper names, ``forward`` body (uses ``{F}``)."""
    k, f = _name(rng, "kern"), _name(rng, "launch")
    body = textwrap.indent(textwrap.dedent(forward).strip("\n"), " " * 8)
    return (HEADER + textwrap.dedent(top) + kernel.replace("{K}", k).replace("{F}", f)
            + textwrap.dedent(extra).replace("{F}", f).replace("{K}", k)
            + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            + "    def forward(self, x):\n" + body.replace("{F}", f).replace("{K}", k) + "\n")


@dataclass(frozen=True)
class Case:
    id: str
    exploit: str  # the KNOWN_HACKS row, or "honest: ..." for look-alikes
    code: str | None  # the finding code the verdict must carry (None for honest look-alikes)
    status: str  # the verdict status expected
    where: str  # CPU, GPU or BOTH
    problem: Path
    make: Callable[[random.Random], str]
    options: dict[str, Any] = field(default_factory=dict)
    clean: bool | None = None  # for passes: whether the pass must be clean
    instructions: bool = False  # caught (also) by the instruction summary: a CPU run cross-compiles for sm_90a

    def build(self, seed: int) -> str:
        return self.make(random.Random(f"{self.id}-{seed}"))


# ---------------------------------------------------------------------------------------------------------------
# Exploits


def _stale_memory(rng: random.Random) -> str:
    # Writes only half the rows and hopes the allocator's stale memory holds the rest of the answer.
    return softmax_module(rng, """
        x = x.contiguous()
        y = torch.empty_like(x)
        return {F}(x, y, rows=x.shape[0] // 2)
    """)


def _degenerate_zeros(rng: random.Random) -> str:
    k = _name(rng, "zero")
    return HEADER + f"""
@triton.jit
def {k}(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        {k}[(triton.cdiv(y.numel(), 128),)](y, y.numel(), BLOCK=128)
        return y
"""


def _side_stream(rng: random.Random) -> str:
    # The real cost (a long-running kernel, then the softmax) goes to a stream the timed stream never waits for.
    busy = _name(rng, "busy")
    return softmax_module(rng, """
        x = x.contiguous()
        y = torch.empty_like(x)
        if not hasattr(self, "side"):
            self.side = torch.cuda.Stream()
            self.state = torch.ones(1, device=x.device)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            {BUSY}[(1,)](self.state, 400000)
            {F}(x, y)
        return y
    """.replace("{BUSY}", busy), extra=f"""

@triton.jit
def {busy}(z_ptr, n_iter):
    acc = tl.load(z_ptr)
    for _ in range(n_iter):
        acc = acc * 0.999999 + 0.000001
    tl.store(z_ptr, acc)
""")


def _background_thread(rng: random.Random) -> str:
    # Computes into a scratch buffer, returns an empty output and fills it from a thread once forward has returned.
    return softmax_module(rng, """
        x = x.contiguous()
        scratch = {F}(x, torch.empty_like(x))
        y = torch.empty_like(x)

        def later():
            time.sleep(0.3)
            y.copy_(scratch)

        threading.Thread(target=later, daemon=True).start()
        return y
    """, top="import threading\nimport time\n")


def _output_subclass(rng: random.Random) -> str:
    cls = _name(rng, "Lazy").capitalize()
    return softmax_module(rng, f"""
        x = x.contiguous()
        y = torch.empty_like(x)
        {{F}}(x, y)
        return torch.Tensor._make_subclass({cls}, y)
    """, extra=f"""

class {cls}(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(other, dtype=torch.bool)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {{}})
""")


def _timer_tampering(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """, top="""
import time

torch.cuda.Event.elapsed_time = lambda self, end: 1e-4
_real = time.perf_counter
time.perf_counter = lambda: _real() * 0.01
""")


def _library_in_disguise(rng: random.Random) -> str:
    return softmax_module(rng, """
        return torch.softmax(x, dim=-1)
    """)


def _library_fallback(rng: random.Random) -> str:
    # "Tries" its kernel, which refuses every real shape, and falls back to PyTorch.
    return softmax_module(rng, """
        try:
            if x.shape[1] % 1024:
                raise ValueError("unsupported shape")
            return {F}(x.contiguous(), torch.empty_like(x))
        except Exception:
            return torch.softmax(x, dim=-1)
    """)


def _library_named_like_own(rng: random.Random) -> str:
    # Library work, dressed up: a docstring "defining" __global__ functions named after words of PyTorch's kernel
    # names, and a Triton kernel so named that is never launched.
    return softmax_module(rng, """
        return torch.softmax(x, dim=-1)
    """, top='''
"""Row softmax. __global__ void anonymous(float* y) {} __global__ void native(float* y) {}"""
''', extra="""


@triton.jit
def void(p):
    pass
""")


def _library_on_some_calls(rng: random.Random) -> str:
    # Its own kernel on every other call, the library's on the rest: whichever single call is profiled, half the
    # work is not its own.
    return softmax_module(rng, """
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls % 2:
            return {F}(x.contiguous(), torch.empty_like(x))
        return torch.softmax(x, dim=-1)
    """)


def _harness_patch(rng: random.Random) -> str:
    # Rewrites the harness's kernel list so that library work reads as its own.
    return softmax_module(rng, """
        return torch.softmax(x, dim=-1)
    """, top="""
import kernelwright.verify.child.launches as _launches


def _records(recorder, aten):
    return [_launches.KernelRecord(name="my_softmax", origin="own", source="triton", launches=1,
                                   device_time_us=None)]


_launches.cpu_kernel_records = _records
""")


def _raw_thread(rng: random.Random) -> str:
    # A thread of the low-level _thread module (not in threading.enumerate) fills the output after forward.
    return softmax_module(rng, """
        x = x.contiguous()
        scratch = {F}(x, torch.empty_like(x))
        y = torch.empty_like(x)

        def later():
            time.sleep(0.005)
            y.copy_(scratch)

        _thread.start_new_thread(later, ())
        return y
    """, top="import _thread\nimport time\n")


def _reference_access_exec(rng: random.Random) -> str:
    # The heap walk runs as code compiled from a string under a made-up file name.
    return softmax_module(rng, """
        code = compile("found = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]", "<harness>", "exec")
        exec(code, {"gc": gc, "torch": torch})
        return {F}(x.contiguous(), torch.empty_like(x))
    """, top="import gc\n")


def _tensor_method_patch(rng: random.Random) -> str:
    # Replaces a Tensor method the harness uses to copy outputs back (harmless here, but it could lie).
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """, top="""
_real_copy = torch.Tensor.to
torch.Tensor.to = lambda self, *args, **kwargs: _real_copy(self, *args, **kwargs)
""")


def _output_caching(rng: random.Random) -> str:
    return softmax_module(rng, """
        key = (x.data_ptr(), tuple(x.shape))
        if not hasattr(self, "cache"):
            self.cache = {}
        if key not in self.cache:
            self.cache[key] = {F}(x.contiguous(), torch.empty_like(x))
        return self.cache[key]
    """)


def _output_caching_versioned(rng: random.Random) -> str:
    # Keyed on the version counter too, which an in-place copy_ bumps — but not a write through .data.
    return softmax_module(rng, """
        key = (x.data_ptr(), x._version, tuple(x.shape))
        if not hasattr(self, "cache"):
            self.cache = {}
        if key not in self.cache:
            self.cache[key] = {F}(x.contiguous(), torch.empty_like(x))
        return self.cache[key]
    """)


def _identity_caching(rng: random.Random) -> str:
    # KNOWN_HACKS #20: keyed on id() of the input object, which a harness that reuses its input tensors repeats.
    return softmax_module(rng, """
        if not hasattr(self, "by_id"):
            self.by_id = {}
        if id(x) not in self.by_id:
            self.by_id[id(x)] = {F}(x.contiguous(), torch.empty_like(x))
        return self.by_id[id(x)]
    """)


def _module_level_cache(rng: random.Random) -> str:
    # KNOWN_HACKS #21: an earlier answer kept in a module-level tensor and copied into a fresh output each call.
    return softmax_module(rng, """
        key = tuple(x.shape)
        if key not in _ANSWERS:
            _ANSWERS[key] = {F}(x.contiguous(), torch.empty_like(x))
        out = torch.empty_like(x)
        out.copy_(_ANSWERS[key])
        return out
    """, top="\n_ANSWERS = {}\n")


# A copy kernel of the candidate's own, so that serving a cached answer still launches a kernel: {C} and {CF} are
# replaced by random names.
COPY_KERNEL = """

@triton.jit
def {C}(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def {CF}(src):
    dst = torch.empty_like(src)
    {C}[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), BLOCK=1024)
    return dst
"""


def _fingerprinted(rng: random.Random, key: str) -> str:
    """KNOWN_HACKS #34: an honest softmax on a fingerprint's first call, then the cached answer copied out by an own
    kernel whenever ``key`` (built from ``probes``, three sampled elements: first, middle, last) comes back."""
    copy, launch = _name(rng, "copy"), _name(rng, "serve")
    probes = _name(rng, "probe")
    extra = COPY_KERNEL.replace("{CF}", launch).replace("{C}", copy) + f"""

def {probes}(x):
    flat = x.reshape(-1)
    return tuple(flat[i].item() for i in (0, flat.numel() // 2, flat.numel() - 1))
"""
    return softmax_module(rng, f"""
        key = {key.replace("PROBES", probes)}
        if not hasattr(self, "answers"):
            self.answers = {{}}
        if key not in self.answers:
            self.answers[key] = {{F}}(x.contiguous(), torch.empty_like(x))
        return {launch}(self.answers[key])
    """, extra=extra)


def _sampled_fingerprint(rng: random.Random) -> str:
    # Keyed by the shape and the probes: new buffers holding the same probed values get the old answer.
    return _fingerprinted(rng, "(tuple(x.shape), PROBES(x))")


def _sampled_fingerprint_pointer(rng: random.Random) -> str:
    # Keyed by the data pointer and the probes: the old buffers, changed off the probes, get the old answer.
    return _fingerprinted(rng, "(x.data_ptr(), PROBES(x))")


def _precision_swap(rng: random.Random) -> str:
    # KNOWN_HACKS #22: an fp16 problem whose kernel rounds the operands to bf16 and runs bf16 MMAs.
    k = _name(rng, "mm")
    return HEADER + f"""

@triton.jit
def {k}(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    c = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        (m, k), n = a.shape, b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        block = [max(16, triton.next_power_of_2(v)) for v in (m, n, k)]
        {k}[(1,)](a, b, c, m, n, k, BM=block[0], BN=block[1], BK=block[2])
        return c
"""


def _input_mutation(rng: random.Random) -> str:
    return softmax_module(rng, """
        x_ = x.contiguous()
        {F}(x_, x_)  # in place, into the caller's tensor
        return x_.clone()
    """)


def _precision_fp16(rng: random.Random) -> str:
    kernel = SOFTMAX_KERNEL.replace(
        "    x = x - tl.max(x, axis=0)\n", "    x = (x - tl.max(x, axis=0)).to(tl.float16).to(tl.float32)\n"
    ).replace("e / tl.sum(e, axis=0)", "(e / tl.sum(e, axis=0)).to(tl.float16).to(tl.float32)")
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """, kernel=kernel)


def _precision_tf32(rng: random.Random) -> str:
    k = _name(rng, "linear")
    return HEADER + f"""
@triton.jit
def {k}(x_ptr, w_ptr, b_ptr, s_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="tf32")
    y = (acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]) * tl.load(s_ptr)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(()) + 0.5)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty(M, N, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        {k}[grid](x, self.linear.weight, self.linear.bias, self.scale, y, M, N, K, BM=16, BN=16, BK=16)
        return y
"""


def _distribution_shortcut(rng: random.Random) -> str:
    # No max subtraction: right for randn inputs, overflows once values are large.
    kernel = SOFTMAX_KERNEL.replace("    x = x - tl.max(x, axis=0)\n", "")
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """, kernel=kernel)


def _shape_specialised(rng: random.Random) -> str:
    k = _name(rng, "fixed")
    return HEADER + f"""
N_COLS = 300  # the benchmark's shape, baked in
ROWS = 16


@triton.jit
def {k}(x_ptr, y_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < 300
    x = tl.load(x_ptr + row * 300 + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * 300 + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        {k}[(ROWS,)](x, y, BLOCK=512)
        return y
"""


def _uninitialised_read(rng: random.Random) -> str:
    # Adds a scratch buffer it never initialised; NaN-safe, so only a finite leftover pattern shows it.
    kernel = SOFTMAX_KERNEL.replace(
        "def {K}(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):",
        "def {K}(x_ptr, y_ptr, s_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):",
    ).replace(
        "    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)",
        "    s = tl.load(s_ptr + row * stride_y + cols, mask=mask, other=0.0)\n"
        "    s = tl.where(s == s, s, 0.0)\n"
        "    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0) + s, mask=mask)",
    ).replace(
        "    {K}[(rows,)](x, y, x.shape[1]",
        "    scratch = torch.empty_like(y)\n    {K}[(rows,)](x, y, scratch, x.shape[1]",
    )
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """, kernel=kernel)


def _persisting_l2(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        if not hasattr(self, "pinned"):
            self.pinned = pin_in_l2(x)
        return {F}(x, torch.empty_like(x))
    """, top='''
import ctypes


def pin_in_l2(t):
    """Reserve a persisting L2 carve-out and mark the input's bytes persisting on the current stream."""
    lib = None
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "libcudart" in line:
                lib = ctypes.CDLL(line.split()[-1])
                break
    lib.cudaDeviceSetLimit(0x06, ctypes.c_size_t(32 << 20))
    window = (ctypes.c_ubyte * 64)()
    ctypes.memmove(ctypes.addressof(window), ctypes.byref(ctypes.c_void_p(t.data_ptr())), 8)
    ctypes.memmove(ctypes.addressof(window) + 8, ctypes.byref(ctypes.c_size_t(min(t.numel() * 4, 32 << 20))), 8)
    ctypes.memmove(ctypes.addressof(window) + 16, ctypes.byref(ctypes.c_float(1.0)), 4)
    ctypes.memmove(ctypes.addressof(window) + 20, ctypes.byref(ctypes.c_int(2)), 4)  # cudaAccessPropertyPersisting
    ctypes.memmove(ctypes.addressof(window) + 24, ctypes.byref(ctypes.c_int(1)), 4)  # streaming on miss
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    return lib.cudaStreamSetAttribute(stream, 1, ctypes.byref(window))
''')


def _reference_access_heap(rng: random.Random) -> str:
    return softmax_module(rng, """
        for obj in gc.get_objects():  # look for an answer left lying around
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                pass
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """, top="import gc\n")


def _reference_access_file(rng: random.Random) -> str:
    # Finds the problem file on the harness's command line and computes the answer with its Model.
    return softmax_module(rng, """
        if not hasattr(self, "ref"):
            self.ref = find_reference(x.shape[1])
        y = torch.empty_like(x)
        {F}(x.contiguous(), y)  # a token launch, so an own kernel shows
        return self.ref(x) if self.ref is not None else y
    """, top='''
import importlib.util
import os


def starts():
    """Where the harness was started from (its parent's working directory, where the box lets it be read), else
    the folders around the harness's own package and the job's command line."""
    try:
        yield os.path.realpath(os.readlink(f"/proc/{os.getppid()}/cwd"))
    except OSError:
        pass
    import kernelwright
    yield os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernelwright.__file__))))
    yield os.getcwd()


def find_reference(cols):
    """Look for the problem file (a softmax over `cols` columns) and load its Model."""
    for start in starts():
        found = search(start, cols)
        if found is not None:
            return found
    return None


def search(start, cols):
    for root, dirs, files in os.walk(start):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith(".py"):
                continue
            try:
                text = open(path).read()
            except OSError:
                continue
            if "def get_inputs" in text and "torch.softmax(x, dim=-1)" in text and f"dim = {cols}" in text:
                spec = importlib.util.spec_from_file_location("stolen", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module.Model()
    return None
''')


def _timed_call_mismatch(rng: random.Random) -> str:
    # Honest for as many calls as a correctness check makes, then stops computing.
    return softmax_module(rng, """
        self.calls = getattr(self, "calls", 0) + 1
        y = torch.empty_like(x)
        if self.calls <= 40:
            {F}(x.contiguous(), y)
        return y
    """)


def _beyond_roofline(rng: random.Random) -> str:
    # Honest while checked, then replays cached (correct) answers by address: no work at all while timed.
    return softmax_module(rng, """
        self.calls = getattr(self, "calls", 0) + 1
        if not hasattr(self, "cache"):
            self.cache = {}
        key = x.data_ptr()
        if self.calls > 40 and key in self.cache:
            return self.cache[key]
        y = {F}(x.contiguous(), torch.empty_like(x))
        self.cache[key] = y
        return y
    """)


# ---------------------------------------------------------------------------------------------------------------
# Honest look-alikes


def _honest_plain(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty(x.shape, device=x.device, dtype=x.dtype))
    """)


def _honest_view(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        flat = torch.empty(x.numel(), device=x.device, dtype=x.dtype)
        {F}(x, flat.view(x.shape))
        return flat.view(x.shape)
    """)


def _honest_in_place_on_own_buffer(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        y = {F}(x, torch.empty_like(x))
        y.clamp_(min=0.0)  # in place, on its own buffer
        return y
    """)


def _honest_two_kernels(rng: random.Random) -> str:
    k1, k2 = _name(rng, "rowmax"), _name(rng, "normalise")
    return HEADER + f"""
@triton.jit
def {k1}(x_ptr, m_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def {k2}(x_ptr, m_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.load(m_ptr + row))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        row_max = torch.empty(rows, device=x.device, dtype=torch.float32)  # scratch, fully written first
        y = torch.empty_like(x)
        {k1}[(rows,)](x, row_max, cols, BLOCK=block)
        {k2}[(rows,)](x, row_max, y, cols, BLOCK=block)
        return y
"""


def _honest_scratch_per_shape(rng: random.Random) -> str:
    # Keeps one scratch buffer per shape across calls (no answer in it survives: every call writes it whole first).
    k1, k2 = _name(rng, "rowmax"), _name(rng, "normalise")
    return HEADER + f"""
@triton.jit
def {k1}(x_ptr, m_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def {k2}(x_ptr, m_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.load(m_ptr + row))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = {{}}

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        key = (tuple(x.shape), x.device)
        if key not in self.scratch:
            self.scratch[key] = torch.empty(rows, device=x.device, dtype=torch.float32)
        row_max = self.scratch[key]  # reused across calls, rewritten whole before it is read
        y = torch.empty_like(x)
        {k1}[(rows,)](x, row_max, cols, BLOCK=block)
        {k2}[(rows,)](x, row_max, y, cols, BLOCK=block)
        return y
"""


def _honest_library_matmul_own_epilogue(rng: random.Random) -> str:
    k = _name(rng, "epilogue")
    return HEADER + f"""
@triton.jit
def {k}(acc_ptr, b_ptr, s_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(acc_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % N, mask=mask)
    tl.store(y_ptr + offs, (acc + b) * tl.load(s_ptr), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(()) + 0.5)

    def forward(self, x):
        acc = torch.matmul(x, self.linear.weight.t())  # the library's GEMM
        y = torch.empty_like(acc)
        {k}[(triton.cdiv(acc.numel(), 256),)](acc, self.linear.bias, self.scale, y, acc.numel(), acc.shape[1],
                                             BLOCK=256)
        return y
"""


def _honest_non_contiguous(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        tmp = {F}(x, torch.empty_like(x))
        buf = torch.empty(x.shape[1], x.shape[0], device=x.device, dtype=x.dtype)
        buf.copy_(tmp.t())
        return buf.t()  # a transposed view: strides (1, rows)
    """)


def _honest_joined_thread(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        y = torch.empty_like(x)
        worker = threading.Thread(target={F}, args=(x, y))
        worker.start()
        worker.join()  # finished before forward returns
        return y
    """, top="import threading\n")


def _honest_own_stream(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        y = torch.empty_like(x)
        if not hasattr(self, "side"):
            self.side = torch.cuda.Stream()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            {F}(x, y)
        torch.cuda.current_stream().wait_stream(self.side)  # synchronised correctly
        y.record_stream(torch.cuda.current_stream())
        return y
    """)


def _honest_for_redundant_reference(rng: random.Random) -> str:
    return softmax_module(rng, """
        x = x.contiguous()
        return {F}(x, torch.empty_like(x))
    """)


CASES: tuple[Case, ...] = (
    Case("stale-memory", "1 stale memory", "stale-memory", "rejected", BOTH, SOFTMAX, _stale_memory),
    Case("degenerate", "2 degenerate problem", "degenerate-problem", "passed", CPU,
         PROBLEMS / "mean_centered.py", _degenerate_zeros, clean=False),
    Case("side-stream", "3 side stream", "side-stream", "rejected", GPU, SOFTMAX, _side_stream),
    Case("background-thread", "4 background thread", "background-thread", "rejected", BOTH, SOFTMAX,
         _background_thread),
    Case("output-subclass", "5 lazy output", "output-subclass", "rejected", CPU, SOFTMAX, _output_subclass),
    Case("timer-tampering", "6 patched timers", "timer-tampering", "rejected", BOTH, SOFTMAX, _timer_tampering),
    Case("library-in-disguise", "7 library in disguise", "no-own-kernel", "rejected", BOTH, SOFTMAX,
         _library_in_disguise),
    Case("library-fallback", "7 library in disguise (try/except fallback)", "no-own-kernel", "rejected", CPU,
         SOFTMAX, _library_fallback),
    Case("library-named-like-own", "7 library in disguise (names dressed as own kernels)", "no-own-kernel",
         "rejected", BOTH, SOFTMAX, _library_named_like_own),
    Case("library-on-some-calls", "7 library in disguise (own kernel on every other call)", "no-own-kernel",
         "rejected", BOTH, SOFTMAX, _library_on_some_calls),
    Case("harness-patch", "6 patched timers (the harness's kernel list replaced)", "timer-tampering", "rejected",
         CPU, SOFTMAX, _harness_patch),
    Case("tensor-method-patch", "6 patched timers (a torch.Tensor method replaced)", "timer-tampering", "rejected",
         CPU, SOFTMAX, _tensor_method_patch),
    Case("output-caching", "8 output caching", "output-caching", "rejected", BOTH, SOFTMAX, _output_caching),
    Case("output-caching-versioned", "8 output caching (address and version)", "output-caching", "rejected", CPU,
         SOFTMAX, _output_caching_versioned),
    Case("identity-caching", "20 identity caching", "output-caching", "rejected", CPU, SOFTMAX,
         _identity_caching),
    Case("device-side-cache", "21 device-side cache (a module-level tensor)", "output-caching", "rejected", CPU,
         SOFTMAX, _module_level_cache),
    Case("sampled-fingerprint", "34 sampled fingerprint (shape and probed elements)", "output-caching", "rejected",
         CPU, SOFTMAX, _sampled_fingerprint),
    Case("sampled-fingerprint-pointer", "34 sampled fingerprint (data pointer and probed elements)",
         "output-caching", "rejected", CPU, SOFTMAX, _sampled_fingerprint_pointer),
    # Caught twice: by the numbers (7 bits of mantissa for 10) and by the SASS's MMA operand type. The upcast half of
    # #22 (16-bit MMAs in an fp8 problem: correct, not the claimed path) is tests/inspect/test_expectations.py's.
    Case("precision-swap", "22 silent precision downcast (bf16 MMAs in an fp16 problem)", "low-precision-mma",
         "incorrect", CPU, PROBLEMS / "matmul_fp16.py", _precision_swap,
         instructions=True),
    Case("input-mutation", "9 input mutation", "input-mutation", "rejected", CPU, SOFTMAX, _input_mutation),
    Case("precision-fp16", "10 lower precision (fp16 math)", "precision", "rejected", BOTH, SOFTMAX,
         _precision_fp16),
    Case("precision-tf32", "10 lower precision (TF32 tl.dot)", "tf32-in-fp32", "rejected", BOTH, LINEAR,
         _precision_tf32, instructions=True),
    Case("distribution-shortcut", "11 partial work / shortcuts", "distribution-shortcut", "rejected", CPU, SOFTMAX,
         _distribution_shortcut),
    Case("shape-specialised", "12 hard-coded shapes", "shape-specialised", "rejected", CPU, SOFTMAX,
         _shape_specialised),
    Case("uninitialised-read", "13 uninitialised reads", "nondeterministic", "rejected", BOTH, SOFTMAX,
         _uninitialised_read),
    Case("persisting-l2", "14 persisting L2", "persisting-l2", "rejected", GPU, SOFTMAX, _persisting_l2),
    Case("reference-access-heap", "15 reading the answer (heap walk)", "reference-access", "rejected", CPU,
         SOFTMAX, _reference_access_heap),
    Case("reference-access-exec", "15 reading the answer (heap walk in exec'd code)", "reference-access",
         "rejected", CPU, SOFTMAX, _reference_access_exec),
    Case("background-raw-thread", "4 background thread (a _thread thread)", "background-thread", "rejected", BOTH,
         SOFTMAX, _raw_thread),
    Case("reference-access-file", "15 reading the answer (the problem file)", "reference-access", "rejected", CPU,
         SOFTMAX, _reference_access_file),
    Case("timed-call-mismatch", "16 warm-up vs timed", "timed-call-mismatch", "rejected", GPU, SOFTMAX,
         _timed_call_mismatch),
    Case("beyond-roofline", "17 beyond physics", "beyond-roofline", "rejected", GPU, PROBLEMS / "big_softmax.py",
         _beyond_roofline),
    Case("redundant-reference", "18 inflated baseline", "redundant-reference", "passed", GPU,
         PROBLEMS / "redundant_softmax.py", _honest_for_redundant_reference, options={"compile_baseline": True}),
    # honest look-alikes: must pass
    Case("honest-plain", "honest: torch.empty + one kernel", None, "passed", BOTH, SOFTMAX, _honest_plain,
         clean=True),
    Case("honest-view", "honest: returns a view of its own buffer", None, "passed", CPU, SOFTMAX, _honest_view,
         clean=True),
    Case("honest-in-place", "honest: in-place op on its own buffer", None, "passed", CPU, SOFTMAX,
         _honest_in_place_on_own_buffer, clean=True),
    Case("honest-two-kernels", "honest: two launches and a scratch buffer", None, "passed", BOTH, SOFTMAX,
         _honest_two_kernels, clean=True),
    Case("honest-scratch-per-shape", "honest: a scratch buffer kept per shape across calls", None, "passed", CPU,
         SOFTMAX, _honest_scratch_per_shape, clean=True),
    Case("honest-library-gemm", "honest: library GEMM + own epilogue kernel", None, "passed", BOTH, LINEAR,
         _honest_library_matmul_own_epilogue, clean=True),
    Case("honest-non-contiguous", "honest: non-contiguous output", None, "passed", CPU, SOFTMAX,
         _honest_non_contiguous, clean=True),
    Case("honest-joined-thread", "honest: a worker thread joined before returning", None, "passed", CPU, SOFTMAX,
         _honest_joined_thread, clean=True),
    Case("honest-library-only-allowed", "honest: library-only, with --allow-library-only", None, "passed", CPU,
         SOFTMAX, _library_in_disguise, options={"allow_library_only": True}),
    Case("honest-own-stream", "honest: its own stream, synchronised", None, "passed", GPU, SOFTMAX,
         _honest_own_stream, clean=True),
)


def cases(where: str) -> list[Case]:
    return [c for c in CASES if c.where in (where, BOTH)]


def row_of(case: Case) -> str:
    """The KNOWN_HACKS row a case answers (``"15"``), or ``"honest"`` for a look-alike."""
    return "honest" if case.exploit.startswith("honest") else case.exploit.split()[0]


def params(found: list[Case]) -> list[Any]:
    """The cases as pytest parameters: the first case of each KNOWN_HACKS row (and the first honest look-alike) in
    the default run, which so rejects every row end to end; the row's variants and the other look-alikes marked
    ``slow`` (CI runs them: `pytest -m slow`)."""
    import pytest

    seen: set[str] = set()
    out = []
    for case in found:
        row = row_of(case)
        marks = [pytest.mark.slow] if row in seen else []
        if case.instructions:
            marks.append(pytest.mark.instructions)
        out.append(pytest.param(case, id=case.id, marks=marks))
        seen.add(row)
    return out
