"""Family 4 — GEMM, batched GEMM and linear layers, with the pointwise epilogue fused on the accumulator tile.

Anchors: ``aten.mm``, ``aten.addmm`` (``nn.Linear`` with a bias; ``beta``/``alpha``), ``aten.bmm`` and
``aten.baddbmm`` (export decomposes the latter into ``bmm`` + ``mul`` + ``add``, which the epilogue absorbs).

The group also takes the *glue* export puts around them. Before the matmul, on each operand: the chain of
``permute``/``t``/``transpose``/``view``/``expand``/``unsqueeze``/``clone`` nodes (and one dtype cast) between
a tensor and the matmul — ``x @ W.t()``, ``[B, T, C] -> [B*T, C]`` for a linear on 3-D input, the ``expand`` +
``view`` of a broadcast batched ``matmul``. After it: ``view``s back to the caller's shape and every pointwise
node of the tile's shape that reads the result (bias, activation, scale, residual, cast; a DAG, so
``silu = x * sigmoid(x)`` fuses too), plus the pointwise nodes that only compute such an operand (``beta * c``).

Glue sizes are baked into the graph (``view(x, [15, 16])``), which would pin a candidate to the benchmark's
shape. Every dimension is therefore tracked symbolically, as a product of the group inputs' dimensions
(``x.shape[0] * x.shape[1]``), and the launcher replays the glue with sizes read at run time: permutes as
``permute``, views as ``reshape`` (a view; a copy only where the strides cannot merge), expands as ``expand``.
The kernel reads every operand through its strides, so a transposed weight is read in place, never copied.

Kernel: one program per ``BLOCK_M x BLOCK_N`` output tile (a second grid axis walks the batch) in grouped
("swizzled") order, so ``GROUP_M`` row blocks reuse each column block of B from L2; a ``tl.dot`` K loop with
fp32 accumulation (fp16/bf16 operands: tensor cores, HGMMA on sm_90a; fp32 operands:
``input_precision="ieee"``, SIMT FMA, unless the policy allows TF32); masks on every edge, so any M, N, K
works; 64-bit tile origins, so a matrix may exceed 2**31 elements. The epilogue is computed on the fp32 tile
by :class:`expr.PointwiseEmitter` and rounded once, at the store. What the family cannot do exactly (integer
or fp64 matmuls, glue it cannot read) stays in PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    broadcastable,
    fusable_pointwise,
    make_group,
)
from kernelwright.generate.graph import Node, ProblemGraph, Ref, node_inputs
from kernelwright.generate.operators import CONSTANTS

NAME = "gemm"

_ANCHORS = {"mm": 2, "addmm": 2, "bmm": 3, "baddbmm": 3}  # operator -> rank of its operands
_DOT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_RESHAPES = frozenset({"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze"})
_PERMUTES = frozenset({"permute", "transpose", "t"})
_IDENTITIES = frozenset({"clone", "alias", "detach", "lift_fresh_copy"})  # copies: strides make them free
_CASTS = frozenset({"_to_copy", "convert_element_type"})
_GLUE = _RESHAPES | _PERMUTES | _IDENTITIES | _CASTS | {"expand"}
_GRID_Y_MAX = 65535  # CUDA's limit on the second grid axis (the batch)

# -------------------------------------------------------------------------------------------- configurations
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps), default first. All are leads until timed on the
# H200, where the project measured cuBLAS at ~758 TFLOP/s bf16, ~728 fp16 and ~50 fp32 (IEEE) on large square
# GEMMs. Register counts below are from sm_90a cross-compiles at 4096^3 (triton 3.6 and 3.9).
_HALF_CONFIGS = (
    (128, 128, 64, 8, 4, 8),  # two warpgroups of 64x128 wgmma, 128 KiB of stages; 110-160 registers
    (128, 256, 64, 8, 3, 8),  # Triton's tutorial pick for Hopper; 144 KiB; 222-242 registers (an erf-GELU
    #                           epilogue spills 32 words a thread)
    (256, 128, 64, 8, 3, 8),  # the same, transposed: for N much smaller than M
    (64, 128, 64, 8, 4, 4),  # one warpgroup: more tiles in flight for mid-sized problems
    (128, 64, 64, 8, 4, 4),
    (64, 64, 64, 8, 4, 4),  # small or skinny problems: enough programs for 132 SMs
)
# fp32 without TF32 runs as SIMT FMA (Triton's FMA dot): no tensor cores, smaller K steps, 32-64 accumulators
# a thread to keep the FMA pipes fed. Leads against cuBLAS's ~50 TFLOP/s.
_FP32_CONFIGS = (
    (128, 128, 32, 8, 3, 8),  # cuBLAS's classic SIMT tile (8x8 outputs a thread); 190-248 registers
    (128, 64, 32, 8, 3, 4),
    (64, 128, 32, 8, 3, 4),
    (64, 64, 32, 8, 4, 4),  # 128-162 registers: two or three programs an SM
    (128, 128, 16, 8, 4, 8),
)
# TF32 tensor cores (only with Policy.allow_tf32): the 16-bit tiles with half the K step (4-byte operands).
_TF32_CONFIGS = (
    (128, 128, 32, 8, 4, 8),
    (128, 256, 32, 8, 3, 8),
    (64, 128, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4),
    (64, 64, 32, 8, 4, 4),
)
# Split-precision TF32 (3xTF32: hi*hi + hi*lo + lo*hi) is fp32-accurate by construction, and the verifier's
# SASS check knows it (a note, not a TF32 shortcut); but its numerics show only on a GPU, the interpreter
# computes every dot in exact fp32. Offered last for fp32 problems: a lead for the GPU's numeric check to
# accept or reject.
_TF32X3_CONFIG = (128, 128, 32, 8, 3, 8)
_DEFAULT_SMEM_LIMIT = 48 * 1024  # an arch the knowledge base does not know: what every CUDA GPU allows

# A row stride that is not a multiple of 16 bytes (K = 999, say) rules out 16-byte cp.async: Triton then loads
# 16-bit operands with scalar LDGs, unpipelined, holding prefetched stages in registers (sm_90a cross-compiles
# of a 1000x999x1001 bf16 GEMM: 255 registers and 20-642 spilled words a thread, against 122-222 registers and
# no spills aligned). Above this many multiply-adds the launcher copies such an operand once into rows padded
# to 16 bytes, and the K loop runs at full speed. The threshold is a lead until timed.
_PAD_MIN_MACS = 2**24


def _smem_limit(arch: str) -> int:
    try:
        from kernelwright.hardware import arch_spec

        return arch_spec(arch).shared_memory_per_block_optin_bytes
    except Exception:  # an arch name the knowledge base does not know
        return _DEFAULT_SMEM_LIMIT


def _config(entry: tuple[int, ...], precision: str) -> dict[str, object]:
    bm, bn, bk, group_m, stages, warps = entry
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "num_stages": stages,
            "num_warps": warps, "precision": precision}


def smem_bytes(config: Config, itemsize: int) -> int:
    """Shared memory the K loop's operand stages take: stages x (A tile + B tile)."""
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    return int(config["num_stages"]) * (bm * bk + bk * bn) * itemsize


# ------------------------------------------------------------------------------------------- symbolic shapes
@dataclass(frozen=True)
class Atom:
    """Dimension ``dim`` of the group input ``value``: read from the tensor at run time."""

    value: str
    dim: int
    size: int  # at the traced shape

    def expr(self) -> str:
        return f"{self.value}.shape[{self.dim}]"


@dataclass(frozen=True)
class Bcast:
    """A size an ``expand`` introduced (baked in the graph): resolved to the dimension the matmul pairs it
    with on the other operand, else kept as the traced constant."""

    key: str
    size: int


Factor = Atom | Bcast
Dim = tuple[Factor, ...]  # a product of factors; () is 1


def _size(dim: Dim) -> int:
    return math.prod(f.size for f in dim)


def _split(factors: Sequence[Factor], sizes: Sequence[int]) -> list[Dim] | None:
    """``factors`` (in order) cut into consecutive products equal to ``sizes``; None if no cut fits."""
    pending = [f for f in factors if f.size != 1]
    result: list[Dim] = []
    for size in sizes:
        taken: list[Factor] = []
        while _size(tuple(taken)) < size and pending:
            taken.append(pending.pop(0))
        if _size(tuple(taken)) != size:
            return None
        result.append(tuple(taken))
    return result if not pending else None


def regroup(dims: Sequence[Dim], shape: Sequence[int]) -> list[Dim] | None:
    """The symbolic dimensions of ``reshape(shape)`` of a tensor whose dimensions are ``dims``: merged
    dimensions multiply their factors, split ones cut them at factor boundaries. None where a cut falls inside
    a factor (``view(x, [3, -1])`` of a dimension of 15: which part would vary is unknowable)."""
    sizes = [_size(d) for d in dims]
    if 0 in sizes or 0 in shape:
        return None
    result: list[Dim] = []
    i = j = 0
    while j < len(shape):
        if shape[j] == 1:
            result.append(())
            j += 1
            continue
        while i < len(dims) and sizes[i] == 1:
            i += 1
        if i == len(dims):
            return None
        factors, have = list(dims[i]), sizes[i]
        i += 1
        outs, want = [shape[j]], shape[j]
        j += 1
        while have != want:
            if have < want:
                while i < len(dims) and sizes[i] == 1:
                    i += 1
                if i == len(dims):
                    return None
                factors += dims[i]
                have *= sizes[i]
                i += 1
            else:
                if j == len(shape):
                    return None
                outs.append(shape[j])
                want *= shape[j]
                j += 1
        if len(outs) == 1:
            result.append(tuple(factors))
        else:
            split = _split(factors, outs)
            if split is None:
                return None
            result += split
    if any(s != 1 for s in sizes[i:]):
        return None
    return result


def _expand(dims: Sequence[Dim], shape: Sequence[int], key: str) -> list[Dim] | None:
    offset = len(shape) - len(dims)
    if offset < 0:
        return None
    result: list[Dim] = []
    for k, size in enumerate(shape):
        if k >= offset and _size(dims[k - offset]) == size:
            result.append(dims[k - offset])
        elif size == 1:
            result.append(())
        elif k < offset or _size(dims[k - offset]) == 1:
            result.append((Bcast(f"{key}:{k}", size),))
        else:
            return None
    return result


def _perm(node: Node, rank: int) -> tuple[int, ...] | None:
    if node.op == "permute":
        return tuple(d % rank for d in node.args[1]) if rank else ()
    if node.op == "t":
        return tuple(reversed(range(rank)))
    if node.op == "transpose":
        d0, d1 = (d % rank for d in node.args[1:3])
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return tuple(perm)
    return None


# ----------------------------------------------------------------------------------------- the claimed group
@dataclass(frozen=True)
class Step:
    """One glue operation, replayed by the launcher with run-time sizes."""

    kind: str  # "reshape", "permute" or "expand"
    dims: tuple[Dim, ...] = ()
    perm: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Operand:
    source: str  # the group input it is read from
    steps: tuple[Step, ...]
    dims: tuple[Dim, ...]  # as the matmul sees it: [M, K] / [K, N], with a leading batch dimension for bmm
    load_dtype: torch.dtype  # what memory holds
    dtype: torch.dtype  # what the dot takes (differs where the glue had a cast)


@dataclass(frozen=True, kw_only=True)
class GemmPlan:
    anchor: str
    batched: bool
    a: Operand
    b: Operand
    bias: str | None  # addmm/baddbmm's added tensor (None for mm/bmm, and where beta == 0)
    alpha: float
    beta: float
    epilogue: tuple[str, ...]  # member nodes after the anchor, in graph order: views and pointwise nodes
    producers: tuple[str, ...]  # pointwise nodes computing epilogue operands, recomputed on the tile
    constants: tuple[str, ...]  # constant nodes (full, scalar_tensor) only the epilogue reads: inlined
    levels: Mapping[str, tuple[Dim, ...]]  # symbolic shape of the anchor and of every epilogue value
    operand_levels: Mapping[str, tuple[Dim, ...]]  # epilogue operand -> the shape it is broadcast to
    resolved: Mapping[str, Dim] = field(default_factory=dict)  # Bcast key -> the dimension it stands for


def _glue_chain(graph: ProblemGraph, value: str, claimed: set[str]) -> list[Node]:
    """The glue nodes producing ``value``, source first: each used once, not claimed, not a graph output."""
    chain: list[Node] = []
    current = value
    while current not in graph.outputs and len(graph.users.get(current, [])) == 1:
        try:
            node = graph.node(current)
        except KeyError:
            break  # a placeholder
        if node.name in claimed or node.op not in _GLUE or node.info is None or \
                not node.args or not isinstance(node.args[0], Ref):
            break
        if node.op in _IDENTITIES | _CASTS and not set(node.kwargs) <= {"dtype", "memory_format"}:
            break
        if node.op not in _CASTS and node.info.dtype != graph.info(node.args[0].name).dtype:
            break  # view(x, dtype): a reinterpretation, not glue
        chain.append(node)
        current = node.args[0].name
    chain.reverse()
    return chain


def _trace_operand(graph: ProblemGraph, value: str, claimed: set[str]) -> tuple[Operand, list[str]] | None:
    """The operand and the glue the group takes for it: the longest readable end of the chain."""
    chain = _glue_chain(graph, value, claimed)
    while True:
        operand = _replay(graph, chain, value)
        if operand is not None:
            return operand, [n.name for n in chain]
        if not chain:
            return None
        chain = chain[1:]


def _replay(graph: ProblemGraph, chain: Sequence[Node], value: str) -> Operand | None:
    source = chain[0].args[0].name if chain else value
    info = graph.info(source)
    dims: list[Dim] = [(Atom(source, d, s),) if s != 1 else () for d, s in enumerate(info.shape)]
    dtype = info.dtype
    casts = 0
    steps: list[Step] = []
    for node in chain:
        shape = node.info.shape
        if node.op in _PERMUTES:
            perm = _perm(node, len(dims))
            if perm is None:
                return None
            dims = [dims[p] for p in perm]
            if steps and steps[-1].kind == "permute":  # permute(p).permute(q) is permute(p[q])
                first = steps.pop().perm
                perm = tuple(first[p] for p in perm)
            if perm != tuple(range(len(perm))):
                steps.append(Step("permute", perm=perm))
        elif node.op in _RESHAPES:
            new = regroup(dims, shape)
            if new is None:
                return None
            if new != dims:
                steps.append(Step("reshape", dims=tuple(new)))
            dims = new
        elif node.op == "expand":
            new = _expand(dims, shape, node.name)
            if new is None:
                return None
            if new != dims:
                steps.append(Step("expand", dims=tuple(new)))
            dims = new
        elif node.op in _CASTS and node.info.dtype != dtype:
            casts += 1
            dtype = node.info.dtype
        if tuple(_size(d) for d in dims) != tuple(shape):
            return None  # a reading the traced sizes contradict: leave this glue to PyTorch
    if casts > 1 or dtype not in _DOT_DTYPES or info.dtype not in _DOT_DTYPES:
        return None
    return Operand(source=source, steps=tuple(steps), dims=tuple(dims), load_dtype=info.dtype, dtype=dtype)


def _pair(dim: Dim, reference: Dim, resolved: dict[str, Dim]) -> None:
    """Resolve the expand sizes in ``dim`` from the dimension the matmul pairs it with."""
    if not any(isinstance(f, Bcast) for f in dim) or any(isinstance(f, Bcast) for f in reference):
        return
    if len(dim) == 1:
        resolved[dim[0].key] = reference
    elif len(dim) == len(reference):
        for f, r in zip(dim, reference):
            if isinstance(f, Bcast) and f.size == r.size:
                resolved[f.key] = (r,)


def _depends_on(graph: ProblemGraph, value: str, members: set[str], memo: dict[str, bool]) -> bool:
    if value in memo:
        return memo[value]
    memo[value] = value in members
    if not memo[value] and value in graph.users:
        try:
            node = graph.node(value)
        except KeyError:
            return False
        memo[value] = any(_depends_on(graph, v, members, memo) for v in node_inputs(node))
    return memo[value]


def analyse(graph: ProblemGraph, anchor: Node, claimed: set[str]) -> tuple[GemmPlan, list[str]] | None:
    """What the group computes and its member nodes; None where the anchor is no matmul this family does."""
    rank = _ANCHORS.get(anchor.op)
    if rank is None or anchor.info is None or anchor.info.dtype not in _DOT_DTYPES or 0 in anchor.info.shape:
        return None
    with_bias = anchor.op in ("addmm", "baddbmm")
    refs = anchor.args[1:3] if with_bias else anchor.args[:2]
    if not all(isinstance(r, Ref) for r in refs):
        return None
    traced = [_trace_operand(graph, r.name, claimed) for r in refs]
    if traced[0] is None or traced[1] is None:
        return None
    (a, a_glue), (b, b_glue) = traced
    if len(a.dims) != rank or len(b.dims) != rank or a.dtype != b.dtype:
        return None
    if a.dtype == torch.float32 and a.load_dtype == b.load_dtype and a.load_dtype != torch.float32:
        # An fp32 matmul of values cast up from fp16/bf16 (export's decomposition of a half-precision baddbmm,
        # or x.float() @ w.float()): their products are exact in fp32, so the 16-bit tensor-core dot with fp32
        # accumulation computes the same sums, without the casts.
        a, b = replace(a, dtype=a.load_dtype), replace(b, dtype=b.load_dtype)
    resolved: dict[str, Dim] = {}
    _pair(a.dims[-1], b.dims[-2], resolved)
    _pair(b.dims[-2], a.dims[-1], resolved)
    if rank == 3:
        _pair(a.dims[0], b.dims[0], resolved)
        _pair(b.dims[0], a.dims[0], resolved)
        batch = a.dims[0] if not any(isinstance(f, Bcast) for f in a.dims[0]) else b.dims[0]
        out_dims: tuple[Dim, ...] = (batch, a.dims[1], b.dims[2])
    else:
        out_dims = (a.dims[0], b.dims[1])

    alpha = float(anchor.kwargs.get("alpha", anchor.args[4] if len(anchor.args) > 4 else 1))
    beta = float(anchor.kwargs.get("beta", anchor.args[3] if len(anchor.args) > 3 else 1))
    bias = None
    operand_levels: dict[str, tuple[Dim, ...]] = {}
    if with_bias and beta != 0:  # beta == 0: the added tensor is ignored, NaN and all (PyTorch's rule)
        c = anchor.args[0]
        if not isinstance(c, Ref) or not broadcastable(graph.info(c.name).shape, anchor.info.shape):
            return None
        bias = c.name
        operand_levels[bias] = out_dims

    # The epilogue: views of the result and pointwise nodes of its shape reading it, grown in graph order.
    tile = {anchor.name}
    levels: dict[str, tuple[Dim, ...]] = {anchor.name: out_dims}
    epilogue: list[str] = []
    memo: dict[str, bool] = {}
    for node in graph.nodes[graph.nodes.index(anchor) + 1:]:
        if node.name in claimed or node.info is None:
            continue
        inputs = node_inputs(node)
        inside = [v for v in inputs if v in tile]
        if not inside:
            continue
        if node.op in _RESHAPES and inputs == inside:
            if node.info.dtype != graph.info(inside[0]).dtype:
                continue  # view(x, dtype): a reinterpretation
            new = regroup(levels[inside[0]], node.info.shape)
            if new is None:
                continue
            level = tuple(new)
        elif fusable_pointwise(node) and node.op not in CONSTANTS:
            level = levels[inside[0]]
            if any(levels[v] != level for v in inside) or tuple(_size(d) for d in level) != node.info.shape:
                continue
            outside = [v for v in inputs if v not in tile and v in graph.values]
            if any(not broadcastable(graph.info(v).shape, node.info.shape)
                   or operand_levels.get(v, level) != level or v in a_glue or v in b_glue
                   or _depends_on(graph, v, tile, memo) for v in outside):
                continue
            operand_levels.update((v, level) for v in outside)
        else:
            continue
        tile.add(node.name)
        levels[node.name] = level
        epilogue.append(node.name)
        memo = {}
    producers = _absorb_producers(graph, operand_levels, claimed, tile, keep={bias})
    # Constants only the epilogue reads are inlined rather than loaded.
    readers = tile | set(producers)
    constants = [n.name for n in graph.nodes if n.op in CONSTANTS and n.name not in claimed
                 and n.name in operand_levels and all(u in readers for u in graph.users.get(n.name, []))]
    for name in constants:
        del operand_levels[name]
    plan = GemmPlan(anchor=anchor.name, batched=rank == 3, a=a, b=b, bias=bias, alpha=alpha, beta=beta,
                    epilogue=tuple(epilogue), producers=tuple(producers), constants=tuple(constants),
                    levels=levels, operand_levels=operand_levels, resolved=resolved)
    return plan, [*a_glue, *b_glue, anchor.name, *epilogue, *producers, *constants]


def _absorb_producers(graph: ProblemGraph, operand_levels: dict[str, tuple[Dim, ...]], claimed: set[str],
                      tile: set[str], keep: set[str | None]) -> list[str]:
    """Pointwise nodes that only compute an epilogue operand (``beta * c`` of a decomposed ``baddbmm``, a
    scaled residual) are computed on the tile too, from their own inputs: no kernel or round trip of their
    own."""
    producers: list[str] = []
    grew = True
    while grew:
        grew = False
        for value in list(operand_levels):
            level = operand_levels[value]
            shape = tuple(_size(d) for d in level)
            try:
                node = graph.node(value)
            except KeyError:
                continue  # a placeholder
            if value in keep or node.name in claimed or value in graph.outputs or node.info is None or \
                    not fusable_pointwise(node) or node.op in CONSTANTS or \
                    not all(u in tile for u in graph.users.get(value, [])) or \
                    not broadcastable(node.info.shape, shape):
                continue
            inputs = [v for v in node_inputs(node) if v in graph.values]
            if any(not broadcastable(graph.info(v).shape, shape) or operand_levels.get(v, level) != level
                   or v in tile for v in inputs):
                continue
            del operand_levels[value]
            operand_levels.update((v, level) for v in inputs)
            producers.append(value)
            tile = tile | {value}
            grew = True
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    return sorted(producers, key=order.__getitem__)


# ------------------------------------------------------------------------------------------------ the family
class GemmFamily:
    name = NAME

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str]) -> Group | None:
        if node.name in claimed or node.op not in _ANCHORS:
            return None
        found = analyse(graph, node, claimed)
        if found is None:
            return None
        plan, members = found
        return make_group(graph, NAME, members, anchor=node.name, gemm=plan)

    def space(self, graph: ProblemGraph, group: Group, arch: str,
              policy: Policy = DEFAULT_POLICY) -> list[Config]:
        plan: GemmPlan = group.detail["gemm"]
        if plan.a.dtype != torch.float32:
            configs = [_config(c, "native") for c in _HALF_CONFIGS]
        elif policy.allow_tf32:
            configs = [_config(c, "tf32") for c in _TF32_CONFIGS] + [_config(_FP32_CONFIGS[0], "ieee")]
        else:
            configs = [_config(c, "ieee") for c in _FP32_CONFIGS] + [_config(_TF32X3_CONFIG, "tf32x3")]
        itemsize = max(plan.a.load_dtype.itemsize, plan.b.load_dtype.itemsize, plan.a.dtype.itemsize)
        limit = _smem_limit(arch)
        fitting = [c for c in configs if smem_bytes(c, itemsize) <= limit]
        if fitting:
            return fitting
        smallest = min(configs, key=lambda c: smem_bytes(c, itemsize))
        return [{**smallest, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 2, "num_warps": 4}]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return _Renderer(graph, group, config, ident).render()


# ------------------------------------------------------------------------------------------------- rendering
def _mode(graph: ProblemGraph, value: str, level: Sequence[int],
          anchor: Sequence[int]) -> tuple[str, bool, bool]:
    """How an epilogue operand is read: "scalar", "row" (varies along N only: a bias), "col" (along M only:
    a per-row scale) or "tile"; and whether that assumed a broadcast along M (resp. N) that a traced size of
    1 hides."""
    info = graph.info(value)
    if info.numel == 1:
        return "scalar", False, False
    meta = torch.empty_strided(info.shape, info.stride, device="meta")
    strides = meta.expand(tuple(level)).reshape(tuple(anchor)).stride()
    m, n = anchor[-2], anchor[-1]
    if not (m > 1 and strides[-2] != 0):
        return "row", m == 1, False
    if not (n > 1 and strides[-1] != 0):
        return "col", False, n == 1
    return "tile", False, False


_ALIGNED = '''\
def {ident}_aligned(t):
    """``t`` where its layout allows 16-byte loads along its contiguous dimension, else a copy with rows
    padded to 16 bytes (the padding is never read: the kernel masks M, N and K). Alignment is judged from the
    storage offset (allocations start 16-byte aligned), not ``data_ptr()``, so that torch.compile can trace this
    with fake tensors."""
    step = 16 // t.element_size()
    strides = [s for s, n in zip(t.stride(), t.shape) if n > 1]
    unit = [s for s in strides if s == 1]
    if t.storage_offset() % step == 0 and len(unit) <= 1 and all(s == 1 or s % step == 0 for s in strides):
        return t
    rows = torch.empty((*t.shape[:-1], -(-t.shape[-1] // step) * step), dtype=t.dtype, device=t.device)
    return rows[..., : t.shape[-1]].copy_(t)'''


class _Renderer:
    def __init__(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.plan: GemmPlan = group.detail["gemm"]
        taken = set(group.inputs)
        names = ("mat_a", "mat_b", "M", "N", "K", "batch", "start", "grid")
        self.local = {n: self._fresh(n, taken) for n in names}
        anchor_shape = [_size(d) for d in self.plan.levels[self.plan.anchor]]
        self.operands = list(self.plan.operand_levels)
        self.modes = {v: _mode(graph, v, [_size(d) for d in self.plan.operand_levels[v]], anchor_shape)
                      for v in self.operands}
        self.outputs = list(group.outputs)

    @staticmethod
    def _fresh(name: str, taken: set[str]) -> str:
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    # -- symbolic sizes as Python expressions of the launcher's inputs
    def dim(self, dim: Dim) -> str:
        parts: list[str] = []
        for f in dim:
            if isinstance(f, Atom):
                parts.append(f.expr())
            elif f.key in self.plan.resolved:
                parts.append(self.dim(self.plan.resolved[f.key]))
            else:
                parts.append(str(f.size))  # an expand whose size nothing else carries: the graph's constant
        return " * ".join(parts) or "1"

    def shape(self, dims: Sequence[Dim]) -> str:
        items = [self.dim(d) for d in dims]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def operand(self, op: Operand) -> str:
        text = op.source
        for step in op.steps:
            if step.kind == "permute":
                text += f".permute({', '.join(map(str, step.perm))})"
            else:
                text += f".{step.kind}{self.shape(step.dims)}"
        return text

    def render(self) -> Rendered:
        plan, cfg = self.plan, self.config
        kernel = f"{self.ident}_kernel"
        lines = ["@triton.jit", f"def {kernel}("]
        lines += _wrap(self.kernel_params(), "    ")
        lines += ["    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,",
                  "    GROUP_M: tl.constexpr,",
                  "):"]
        lines += [f"    {line}" for line in (*self.main_loop(), *self.epilogue())]
        lines += ["", "", *_ALIGNED.format(ident=self.ident).splitlines(), "", ""]
        lines += self.launcher(kernel)
        dot = cfg["precision"] if plan.a.dtype == torch.float32 else str(plan.a.dtype).removeprefix("torch.")
        notes = (f"{plan.anchor}: {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} tiles, {dot} dot",)
        return Rendered(source="\n".join(lines), launcher=self.ident, notes=notes)

    def kernel_params(self) -> list[str]:
        plan = self.plan
        params = ["a_ptr", "b_ptr", *(f"in_{v}" for v in self.operands), *(f"out_{o}" for o in self.outputs)]
        params += ["M", "N", "K"]
        if plan.batched:
            params += ["batch0", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk", "stride_bn"]
        else:
            params += ["stride_am", "stride_ak", "stride_bk", "stride_bn"]
        for v in self.operands:
            mode = self.modes[v][0]
            if mode == "scalar":
                continue
            if plan.batched:
                params.append(f"stride_{v}_b")
            params += {"row": [f"stride_{v}_n"], "col": [f"stride_{v}_m"],
                       "tile": [f"stride_{v}_m", f"stride_{v}_n"]}[mode]
        return params

    def main_loop(self) -> list[str]:
        plan = self.plan
        body = [
            "# Grouped program order: GROUP_M row blocks in a row walk the same column blocks of B, so each",
            "# B tile is fetched from DRAM once per group and served from L2 to the rest.",
            "pid = tl.program_id(0)",
            "num_pid_m = tl.cdiv(M, BLOCK_M)",
            "num_pid_n = tl.cdiv(N, BLOCK_N)",
            "num_pid_in_group = GROUP_M * num_pid_n",
            "first_pid_m = (pid // num_pid_in_group) * GROUP_M",
            "group_size_m = min(num_pid_m - first_pid_m, GROUP_M)",
            "pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m",
            "pid_n = (pid % num_pid_in_group) // group_size_m",
            "# Move the base pointers to this tile's origin in 64-bit arithmetic (a matrix may exceed 2**31",
            "# elements); offsets inside the tile stay 32-bit.",
            "row0 = pid_m.to(tl.int64) * BLOCK_M",
            "col0 = pid_n.to(tl.int64) * BLOCK_N",
        ]
        if plan.batched:
            body += ["bid = tl.program_id(1).to(tl.int64) + batch0",
                     "a_ptr += bid * stride_ab + row0 * stride_am",
                     "b_ptr += bid * stride_bb + col0 * stride_bn"]
        else:
            body += ["a_ptr += row0 * stride_am", "b_ptr += col0 * stride_bn"]
        cast_a = "" if plan.a.load_dtype == plan.a.dtype else f".to({expr.TL_DTYPE[plan.a.dtype]})"
        cast_b = "" if plan.b.load_dtype == plan.b.dtype else f".to({expr.TL_DTYPE[plan.b.dtype]})"
        precision = f', input_precision="{self.config["precision"]}"' if plan.a.dtype == torch.float32 else ""
        return body + [
            "rm = tl.arange(0, BLOCK_M)",
            "rn = tl.arange(0, BLOCK_N)",
            "rk = tl.arange(0, BLOCK_K)",
            "mask_m = rm < M - pid_m * BLOCK_M",
            "mask_n = rn < N - pid_n * BLOCK_N",
            "a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak",
            "b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "for k in range(0, K, BLOCK_K):",
            f"    a = tl.load(a_ptrs, mask=mask_m[:, None] & (rk[None, :] < K - k), other=0.0){cast_a}",
            f"    b = tl.load(b_ptrs, mask=(rk[:, None] < K - k) & mask_n[None, :], other=0.0){cast_b}",
            f"    acc = tl.dot(a, b, acc=acc{precision})",
            "    a_ptrs += BLOCK_K * stride_ak",
            "    b_ptrs += BLOCK_K * stride_bk",
        ]

    def epilogue(self) -> list[str]:
        graph, plan = self.graph, self.plan
        ops = [graph.node(n).op for n in (*plan.producers, *plan.epilogue)]
        ops = [op for op in ops if op not in _RESHAPES]
        body = ["# Epilogue on the fp32 accumulator tile" + (f" ({', '.join(ops)})" if ops else "")
                + "; one rounding, at the store.",
                "mask = mask_m[:, None] & mask_n[None, :]"]
        env: dict[str, expr.Value] = {}
        for v in self.operands:
            mode = self.modes[v][0]
            off = f"bid * stride_{v}_b + " if plan.batched else ""
            if mode == "scalar":
                load = f"tl.load(in_{v})"
            elif mode == "row":  # one row broadcast down the tile
                load = f"tl.load(in_{v} + {off}(col0 + rn) * stride_{v}_n, mask=mask_n, other=0)[None, :]"
            elif mode == "col":  # one column broadcast across the tile
                load = f"tl.load(in_{v} + {off}(row0 + rm) * stride_{v}_m, mask=mask_m, other=0)[:, None]"
            else:
                body.append(f"ptrs_{v} = in_{v} + {off}(row0 + rm[:, None]) * stride_{v}_m + "
                            f"(col0 + rn[None, :]) * stride_{v}_n")
                load = f"tl.load(ptrs_{v}, mask=mask, other=0)"
            dtype = graph.info(v).dtype
            cdt = expr.compute_dtype(dtype)
            if cdt != dtype:
                load += f".to({expr.TL_DTYPE[cdt]})"
            body.append(f"x_{v} = {load}")
            env[v] = expr.Value(f"x_{v}", cdt)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all((graph.node(n) for n in (*plan.constants, *plan.producers)), env)
        body += emitter.lines
        emitter.lines = []
        result = "acc" if plan.alpha == 1 else f"acc * {plan.alpha!r}"
        if plan.bias is not None:
            result += f" + x_{plan.bias}" if plan.beta == 1 else f" + x_{plan.bias} * {plan.beta!r}"
        if result != "acc":
            body.append(f"v_{plan.anchor} = {result}")
            result = f"v_{plan.anchor}"
        env[plan.anchor] = expr.Value(result, torch.float32)
        for name in plan.epilogue:
            node = graph.node(name)
            if node.op in _RESHAPES:
                env[name] = env[node.args[0].name]  # a view: the same tile under another shape
            else:
                env[name] = emitter.emit(node, env)
        body += emitter.lines
        batch_offset = "bid * M * N + " if plan.batched else ""
        body.append(f"out_offsets = {batch_offset}(row0 + rm[:, None]) * N + (col0 + rn[None, :])")
        for o in self.outputs:
            value = f"{env[o].expr}.to({expr.TL_DTYPE[graph.info(o).dtype]})"
            body.append(f"tl.store(out_{o} + out_offsets, {value}, mask=mask)")
        return body

    def launcher(self, kernel: str) -> list[str]:
        graph, plan, cfg, L = self.graph, self.plan, self.config, self.local
        a, b, m, n, k, batch = L["mat_a"], L["mat_b"], L["M"], L["N"], L["K"], L["batch"]
        lines = [
            f"def {self.ident}({', '.join(self.group.inputs)}):",
            f'    """{", ".join(graph.node(x).op for x in self.group.nodes)}.',
            "",
            "    One tiled tl.dot kernel, fp32 accumulation, the epilogue computed on the tile. Operands",
            "    are read through their strides (a transposed weight is not copied); sizes come from the",
            '    tensors, so any shape works."""',
            f"    {a} = {self.operand(plan.a)}",
            f"    {b} = {self.operand(plan.b)}",
        ]
        if plan.batched:
            macs = f"{batch} * {m} * {n} * {k}"
            lines += [f"    {batch}, {m}, {k} = {a}.shape",
                      f"    {n} = {b}.shape[2]",
                      f'    assert {b}.shape[:2] == ({batch}, {k}), "bmm: the operand shapes do not match"']
        else:
            macs = f"{m} * {n} * {k}"
            lines += [f"    {m}, {k} = {a}.shape",
                      f"    {n} = {b}.shape[1]",
                      f'    assert {b}.shape[0] == {k}, "mm: the inner dimensions differ"']
        lines += [f"    if {macs} >= {_PAD_MIN_MACS}:  # big enough that copying an unaligned operand pays",
                  f"        {a}, {b} = {self.ident}_aligned({a}), {self.ident}_aligned({b})"]
        tile_shape = f"({batch}, {m}, {n})" if plan.batched else f"({m}, {n})"
        anchor_level = plan.levels[plan.anchor]
        stride_args: list[str] = []
        for v in self.operands:
            mode, assumes_row, assumes_col = self.modes[v]
            if mode == "scalar":
                continue
            level = plan.operand_levels[v]
            local = f"{v}_tile"
            if level == anchor_level:
                lines.append(f"    {local} = {v}.expand{tile_shape}")
            else:
                lines.append(f"    {local} = {v}.expand{self.shape(level)}.reshape{tile_shape}")
            if assumes_row:
                lines.append(f'    assert {m} == 1 or {local}.stride(-2) == 0, "{v}: generated as a row"')
            if assumes_col:
                lines.append(f'    assert {n} == 1 or {local}.stride(-1) == 0, "{v}: generated as a column"')
            if plan.batched:
                stride_args.append(f"{local}.stride(0)")
            stride_args += {"row": [f"{local}.stride(-1)"], "col": [f"{local}.stride(-2)"],
                            "tile": [f"{local}.stride(-2)", f"{local}.stride(-1)"]}[mode]
        for o in self.outputs:
            lines.append(f"    out_{o} = torch.empty({self.shape(plan.levels[o])}, "
                         f"dtype={graph.info(o).dtype}, device={plan.a.source}.device)")
        args = [a, b, *(v if self.modes[v][0] == "scalar" else f"{v}_tile" for v in self.operands),
                *(f"out_{o}" for o in self.outputs), m, n, k]
        if plan.batched:
            args.append(L["start"])
        args += [f"*{a}.stride()", f"*{b}.stride()", *stride_args]
        consts = (f"BLOCK_M={cfg['BLOCK_M']}, BLOCK_N={cfg['BLOCK_N']}, BLOCK_K={cfg['BLOCK_K']}, "
                  f"GROUP_M={cfg['GROUP_M']}, num_warps={cfg['num_warps']}, num_stages={cfg['num_stages']}")
        tiles = f"triton.cdiv({m}, {cfg['BLOCK_M']}) * triton.cdiv({n}, {cfg['BLOCK_N']})"
        if plan.batched:
            start, grid = L["start"], L["grid"]
            lines += [f"    for {start} in range(0, {batch}, {_GRID_Y_MAX}):  # at most 65535 on grid axis 1",
                      f"        {grid} = ({tiles}, min({batch} - {start}, {_GRID_Y_MAX}))",
                      f"        {kernel}[{grid}](",
                      *_wrap(args, "            "),
                      f"            {consts},",
                      "        )"]
        else:
            lines += [f"    {L['grid']} = ({tiles},)",
                      f"    {kernel}[{L['grid']}](",
                      *_wrap(args, "        "),
                      f"        {consts},",
                      "    )"]
        lines.append(f"    return ({', '.join(f'out_{o}' for o in self.outputs)},)")
        return lines


def _wrap(items: Sequence[str], indent: str, width: int = 110) -> list[str]:
    """``items`` as comma-terminated lines of at most ``width`` characters."""
    lines: list[str] = []
    line = indent
    for item in items:
        piece = f"{item}, "
        if len(line) + len(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines
