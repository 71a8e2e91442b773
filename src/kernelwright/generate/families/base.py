"""What every template family provides, and the graph helpers they share.

A family *claims* part of the problem's graph (a :class:`Group`: the nodes one kernel, or one short sequence of
kernels, computes), lists the *configurations* worth trying for it on an arch (its parameter space, pruned by the
hardware knowledge base), and *renders* Python source for one configuration: Triton kernels plus a launcher
function ``launcher(*group.inputs) -> tuple(group.outputs)``. The emitter stitches launchers and the PyTorch
fallback for unclaimed nodes into one readable ``ModelNew`` file.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kernelwright.config import config
from kernelwright.generate import expr
from kernelwright.generate.graph import Node, ProblemGraph, Ref, TensorInfo, node_inputs
from kernelwright.generate.operators import CONSTANTS, ELEMENTWISE_COPIES
from kernelwright.generate.symbols import python_of
from kernelwright.hardware.spec import gpus_for_arch
from kernelwright.records import DEFAULT_POLICY, Policy  # noqa: F401 - the families' precision policy, re-exported


@dataclass(frozen=True, kw_only=True)
class Group:
    family: str
    nodes: tuple[str, ...]  # the nodes it computes, in graph order
    inputs: tuple[str, ...]  # values it reads from outside (placeholders or other nodes' results)
    outputs: tuple[str, ...]  # its values needed outside (by other nodes or as graph outputs)
    anchor: str | None = None  # the node that decided the family (a reduction, a matmul, ...)
    detail: Mapping[str, Any] = field(default_factory=dict)  # facts found when claiming (dims, eps, ...)

    def describe(self) -> str:
        return f"{self.family}({', '.join(self.nodes)})"


@dataclass(frozen=True, kw_only=True)
class Rendered:
    source: str  # kernels and the launcher, ready to paste into a module
    launcher: str  # the launcher's name
    notes: tuple[str, ...] = ()


Config = Mapping[str, Any]




class Family(Protocol):
    name: str

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        """A group anchored at ``node`` (not yet claimed by another family), or None. ``arch`` is the arch the plan
        is for (None: :func:`planning_arch`'s default), for a family that checks its configurations render there."""

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        """Configurations worth timing on ``arch`` under ``policy``; the first is the default (what runs without a
        GPU)."""

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        """Source for one configuration; names it defines start with ``ident``."""


# The SM count assumed for an arch the hardware knowledge base lists no GPU of: the H200's, the part the templates'
# leads were set on (and whose sm_90a is what a plan is made for by default).
FALLBACK_SM_COUNT = 132


def planning_arch(arch: str | None) -> str:
    """The arch a plan is made for: ``arch``, else the configured target (``KERNELWRIGHT_ARCH``, sm_90a unless set)."""
    return arch if arch is not None else config.arch


def next_pow2(n: int) -> int:
    """The least power of two at or above ``n`` (1 for 0 or 1): a block size tl.arange can take."""
    return 1 << max(int(n) - 1, 0).bit_length()


def sm_count(arch: str) -> int:
    """The streaming multiprocessors of the largest GPU of ``arch`` in the hardware knowledge base (132 for sm_90a:
    H100 SXM and H200; 108 for sm_80: A100), or :data:`FALLBACK_SM_COUNT` where it lists no GPU of that arch."""
    return max((gpu.sm_count for gpu in gpus_for_arch(arch)), default=FALLBACK_SM_COUNT)


def has_feature(arch: str, feature: str) -> bool:
    """Whether the knowledge base lists ``feature`` for ``arch`` (gpus.toml's vocabulary: ``tma``, ``tf32``, ...);
    False for an arch it does not know."""
    try:
        from kernelwright.hardware import arch_spec

        return feature in arch_spec(arch).features
    except Exception:  # an arch name the knowledge base does not know
        return False


def has_tma(arch: str) -> bool:
    """Whether ``arch`` has the tensor-memory accelerator (Hopper on): the TMA variants' condition."""
    return has_feature(arch, "tma")


# Generated source (format with ident=...): ``{ident}_sm_count(device, cpu)``, the CUDA device's multiprocessors
# (cached; 132 where fake CUDA tensors trace on a build without CUDA), ``cpu`` for the interpreter's devices — the
# size of a persistent grid or of a grid whose programs must all be resident at once.
SM_COUNT_SOURCE = '''\
{ident}_sm_counts = {{}}


def {ident}_sm_count(device, cpu):
    """The device's multiprocessors (a persistent or all-resident grid's size); ``cpu`` for the interpreter."""
    if device.type != "cuda":
        return cpu
    if device.index not in {ident}_sm_counts:
        try:
            {ident}_sm_counts[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
        except (AssertionError, RuntimeError):  # fake CUDA tensors on a build without CUDA (tracing)
            return 132
    return {ident}_sm_counts[device.index]'''


# Generated source (format with ident=...): ``{ident}_tma_ready(t, transposed_ok=False)`` -> (view, transposed), a
# tensor fit to be a TMA descriptor's base — the GEMM's operands (which may be read through their transpose) and
# attention's q, k, v.
TMA_READY_SOURCE = '''\
def {ident}_tma_ready(t, transposed_ok=False):
    """``(view, transposed)``: ``t`` as a tensor-descriptor base — unit stride last, every other stride a positive
    multiple of 16 bytes, 16-byte aligned start — read in place where it (or, with ``transposed_ok``, its last two
    dimensions swapped) is one; else a copy with rows padded to 16 bytes (a broadcast dimension materialised; the
    pad never read: the descriptor's shape is the tensor's)."""
    step = 16 // t.element_size()

    def ready(v):
        return (v.stride(-1) == 1 and v.storage_offset() % step == 0
                and all(s > 0 and s % step == 0 for s in v.stride()[:-1]))

    if ready(t):
        return t, False
    if transposed_ok and ready(t.mT):
        return t, True
    rows = torch.empty((*t.shape[:-1], -(-t.shape[-1] // step) * step), dtype=t.dtype, device=t.device)
    return rows[..., : t.shape[-1]].copy_(t), False'''


def getitem_items(graph: ProblemGraph, node: Node, claimed: set[str]) -> tuple[tuple[int, str], ...] | None:
    """``(index, name)`` of every ``operator.getitem`` of a multi-output node (a batch norm's, a recurrent layer's),
    sorted; None where the node has a consumer of another kind, a claimed one, or none."""
    items = []
    for user in graph.consumers(node.name):
        if user.target is not operator.getitem or user.name in claimed or not isinstance(user.args[1], int):
            return None
        items.append((user.args[1], user.name))
    return tuple(sorted(items)) or None


def graph_node(graph: ProblemGraph, name: str) -> Node | None:
    """The node that computes ``name``; None for a placeholder (an input, a parameter)."""
    try:
        return graph.node(name)
    except KeyError:
        return None


def group_io(graph: ProblemGraph, names: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The external inputs and the needed outputs of a set of nodes."""
    members = set(names)
    inputs: list[str] = []
    for name in names:
        for value in node_inputs(graph.node(name)):
            if value not in members and value not in inputs and value in graph.values:
                inputs.append(value)
    outputs = [n for n in names
               if n in graph.outputs or any(u not in members for u in graph.users.get(n, []))]
    return tuple(inputs), tuple(outputs)


def make_group(graph: ProblemGraph, family: str, names: Iterable[str], *, anchor: str | None = None,
               **detail: Any) -> Group:
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    ordered = tuple(sorted(set(names), key=order.__getitem__))
    inputs, outputs = group_io(graph, ordered)
    return Group(family=family, nodes=ordered, inputs=inputs, outputs=outputs, anchor=anchor, detail=detail)


def run_time_sizes(graph: ProblemGraph, node: Node) -> tuple[str, ...] | None:
    """The symbolic sizes a node's scalar arguments are (``x / x.shape[0]``: ``sym_size_int_3``), in order, where
    each can be computed from the tensors at run time; None where one cannot. () for a node without any."""
    found: list[str] = []

    def walk(value: Any, direct: bool) -> bool:
        if isinstance(value, (list, tuple)):
            return all(walk(v, direct) for v in value)
        if isinstance(value, dict):
            return all(walk(v, direct) for v in value.values())
        if not isinstance(value, Ref) or value.name not in graph.symbols:
            return True
        symbol = graph.symbols[value.name]  # a number the forward can compute from the tensors (not a truth value)
        if python_of(symbol) is None or isinstance(symbol.hint, bool) or not isinstance(symbol.hint, (int, float)):
            return False
        if direct and value.name not in found:
            found.append(value.name)
        return walk(symbol.args, False)

    return tuple(found) if walk((node.sym_args or (), node.sym_kwargs or {}), True) else None


def fusable_pointwise(node: Node, graph: ProblemGraph | None = None) -> bool:
    """An elementwise node a kernel can compute in registers: pointwise operators, inlined constants, and copies
    that change nothing but the dtype. One whose scalar argument is a run-time size (``x * x.shape[-1]``) only for a
    family that passes the sizes to its kernel (it gives ``graph``): a kernel that took the captured example's
    number would be wrong at any other shape."""
    sized = node.sym_args is not None or node.sym_kwargs is not None
    if sized and (graph is None or not run_time_sizes(graph, node)):
        return False
    if node.op in ELEMENTWISE_COPIES:
        # `device` is where the capture ran (decompositions write `device=x.device`): the candidate keeps
        # every tensor on its inputs' device (the emitter writes captured devices as `_device`).
        return set(node.kwargs) <= {"dtype", "memory_format", "device"} and expr.supported(node)
    return (node.is_pointwise or node.op in CONSTANTS) and expr.supported(node)


def broadcastable(shape: Sequence[int], to: Sequence[int]) -> bool:
    if len(shape) > len(to):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(to)))


def epilogue_chain(graph: ProblemGraph, start: str, claimed: set[str], *, shape: Sequence[int] | None = None
                   ) -> list[str]:
    """Pointwise nodes after ``start`` that can be computed in the same kernel, element by element: each is the
    only consumer of the previous one, its result has the same shape (``shape``, default: ``start``'s), and its
    other operands broadcast to it. Stops at the first node that does not fit."""
    target = tuple(shape if shape is not None else graph.info(start).shape)
    chain: list[str] = []
    current = start
    while True:
        users = graph.users.get(current, [])
        if len(users) != 1 or current in graph.outputs:
            return chain
        node = graph.node(users[0])
        if node.name in claimed or not fusable_pointwise(node) or node.info is None or node.info.shape != target:
            return chain
        others = [v for v in node_inputs(node) if v != current]
        if not all(v in graph.values and broadcastable(graph.info(v).shape, target) for v in others):
            return chain
        chain.append(node.name)
        current = node.name


def prologue_chain(graph: ProblemGraph, value: str, claimed: set[str], *, shape: Sequence[int]) -> list[str]:
    """Pointwise nodes producing ``value`` that can be recomputed while loading it: each has a single consumer
    (inside the chain or the anchor) and operands that broadcast to ``shape``."""
    chain: list[str] = []
    frontier = [value]
    while frontier:
        name = frontier.pop()
        if name not in graph.users or name in claimed or name in graph.outputs:
            continue
        try:
            node = graph.node(name)
        except KeyError:
            continue  # a placeholder
        if len(graph.users.get(name, [])) != 1 or not fusable_pointwise(node) or node.info is None:
            continue
        if tuple(node.info.shape) != tuple(shape) and not broadcastable(node.info.shape, shape):
            continue
        chain.append(name)
        frontier.extend(v for v in node_inputs(node) if v in graph.values)
    return chain


def depends_on(graph: ProblemGraph, value: str, members: set[str], memo: dict[str, bool]) -> bool:
    """Whether ``value`` is computed (transitively) from a member of ``members`` — a node outside a group that
    needs the group and feeds it would make a cycle."""
    # Walked with a stack, not recursion: ResNet-101's graph (level 3 `10`) is deeper than Python's recursion limit.
    stack = [value]
    while stack:
        v = stack[-1]
        if v in memo:
            stack.pop()
            continue
        node = None if v in members else graph.find(v)
        if node is None:  # a member, or a placeholder
            memo[v] = v in members
            stack.pop()
            continue
        inputs = node_inputs(node)
        pending = [u for u in inputs if u not in memo]
        if pending:
            stack.extend(pending)  # v is decided once its inputs are
            continue
        memo[v] = any(memo[u] for u in inputs)
        stack.pop()
    return memo[value]


def epilogue_graph(graph: ProblemGraph, members: Sequence[str], claimed: set[str], shape: Sequence[int]
                   ) -> list[str]:
    """Pointwise nodes of result shape ``shape`` that consume the group's values, in graph order — a DAG, not
    only a chain, so ``x * sigmoid(x)`` (silu as export decomposes it) fuses whole. A node joins when its other
    operands broadcast to ``shape`` and do not themselves depend on the group (no cycle through PyTorch).
    Constants used only by the joined nodes are inlined. Members needed outside become extra outputs."""
    member_set = set(members)
    last = max(i for i, n in enumerate(graph.nodes) if n.name in member_set)
    joined: list[str] = []
    for node in graph.nodes[last + 1:]:
        if node.name in claimed or not fusable_pointwise(node) or node.op in CONSTANTS:
            continue
        if node.info is None or tuple(node.info.shape) != tuple(shape):
            continue
        inputs = node_inputs(node)
        if not any(v in member_set for v in inputs):
            continue
        outside = [v for v in inputs if v not in member_set]
        if any(v in graph.values and not broadcastable(graph.info(v).shape, shape) for v in outside):
            continue
        memo: dict[str, bool] = {}
        if any(depends_on(graph, v, member_set, memo) for v in outside):
            continue
        joined.append(node.name)
        member_set.add(node.name)
    for node in graph.nodes:
        users = graph.users.get(node.name, [])
        if node.op in CONSTANTS and node.name not in claimed and users and \
                all(u in member_set for u in users):
            joined.append(node.name)
            member_set.add(node.name)
    return joined


def operand_mode(info: TensorInfo, shape: Sequence[int]) -> str:
    """How a kernel walking ``shape`` flat reads an operand: ``scalar`` (one element), ``flat`` (contiguous, the
    same shape: ``ptr + offs``) or ``strided`` (broadcast or non-contiguous: per-dimension indices)."""
    if info.numel == 1:
        return "scalar"
    if tuple(info.shape) == tuple(shape) and info.is_contiguous:
        return "flat"
    return "strided"


def live_dims(operand: Sequence[int], shape: Sequence[int]) -> list[int]:
    """Dimensions of ``shape`` an operand's index depends on: all but those it is broadcast along (size 1 where
    the result's is larger). A dimension of size 1 in both stays in: its stride after ``expand`` is right either
    way, should a second shape make it larger."""
    offset = len(shape) - len(operand)
    return [d for d in range(len(shape)) if d >= offset and not (operand[d - offset] == 1 and shape[d] != 1)]


def load_line(name: str, load: str, dtype: torch.dtype) -> tuple[str, expr.Value]:
    """The kernel line ``x_<name> = <load>``, widened to the dtype arithmetic happens in (fp32 for the half types),
    and the value it defines."""
    cdt = expr.compute_dtype(dtype)
    if cdt != dtype:
        load += f".to({expr.TL_DTYPE[cdt]})"
    return f"x_{name} = {load}", expr.Value(f"x_{name}", cdt)


def operand_layout_lines(inputs: Sequence[str], modes: Mapping[str, str]) -> list[str]:
    """Launcher lines that give each operand the layout its :func:`operand_mode` assumed: a *flat* one contiguous
    at the result's ``shape`` (a copy only where it is not), a *strided* one expanded to it."""
    lines = []
    for v in inputs:
        if modes[v] == "flat":
            lines.append(f"    if not ({v}.is_contiguous() and {v}.shape == shape):")
            lines.append(f"        {v} = {v}.expand(shape).contiguous()")
        elif modes[v] == "strided":
            lines.append(f"    {v} = {v}.expand(shape)")
    return lines


def outside_reads(graph: ProblemGraph, group: Group, nodes: Sequence[str]) -> list[str]:
    """The tensors from outside ``group`` that ``nodes`` (its epilogue, its prologue) read, in order."""
    members, reads = set(group.nodes), []
    for name in nodes:
        for v in node_inputs(graph.node(name)):
            if v not in members and v in graph.values and v not in reads:
                reads.append(v)
    return reads


def flat_lanes(count: str) -> list[str]:
    """Kernel lines for a program of ``BLOCK`` consecutive elements of a flat range of ``count``: ``offs`` (64-bit
    when the ``IDX64`` constexpr says the tensors need it) and ``mask``."""
    return [
        "pid = tl.program_id(0)",
        "if IDX64:",
        "    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "else:",
        "    offs = pid * BLOCK + tl.arange(0, BLOCK)",
        f"mask = offs < {count}",
    ]


def strided_args(strided: Sequence[str]) -> list[str]:
    """Launcher arguments for the operands a kernel reads *strided* (:func:`operand_mode`): the result's sizes, then
    each operand's strides (expanded to the result's ``shape`` by :func:`operand_layout_lines`)."""
    return ["*shape", *(f"*{v}.stride()" for v in strided)] if strided else []


def affine(name: str, scale: int = 1, shift: int = 0) -> str:
    """``name * scale + shift`` as short as it can be written (index arithmetic in a kernel's source)."""
    text = name if scale == 1 else f"{name} * {scale}"
    return text if shift == 0 else f"{text} {'+' if shift > 0 else '-'} {abs(shift)}"


def loop_header(var: str, lo: str, hi: str, step: str, config: Config) -> str:
    """A kernel's walk over a long dim: ``range``, or with the configuration's ``stages`` (> 1) Triton's
    software-pipelined ``tl.range``, whose loads of the next tiles are issued while this one is combined (the
    memory-bound reductions and scans hold few bytes in flight otherwise: run 43's min_dim0 partial kernel at 66%
    of DRAM peak). The interpreter runs both the same."""
    stages = int(config.get("stages") or 1)
    if stages > 1:
        return f"for {var} in tl.range({lo}, {hi}, {step}, num_stages={stages}):"
    return f"for {var} in range({lo}, {hi}, {step}):"
