"""The GEMM group in CUDA C++ (the ``cuda`` back end): the kernel of :mod:`kernelwright.generate.cuda.gemm` with the
group's epilogue written in C++, its sources carried in the candidate file, and a Python launcher that replays the
operands' glue, makes both operands K-major 16-byte rows (the tiled copy the 3xTF32 kernel uses, K zero-padded to a
multiple of 16), builds the extension at first use and launches it on the current stream.

Offered for unbatched 16-bit GEMMs whose epilogue the C++ emitter covers (:func:`cuda_supported`); a group outside
that gets no CUDA configuration, and its Triton ones compete alone.
"""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.cuda import gemm as cuda_gemm
from kernelwright.generate.cuda import pointwise
from kernelwright.generate.cuda.build import build_source, extension_name
from kernelwright.generate.families.base import SM_COUNT_SOURCE, Group, Rendered, has_feature
from kernelwright.generate.families.gemm.config import GemmConfig
from kernelwright.generate.families.gemm.matching import GLUE_RESHAPES
from kernelwright.generate.families.gemm.model import GemmPlan
from kernelwright.generate.families.gemm.writing import _ALIGNED, _K_MAJOR, _wrap, _Writer
from kernelwright.generate.graph import ProblemGraph

# (variant, BLOCK_M, BLOCK_N, num_stages): leads until timed on the H200. wgmma 128 x 256 in 3 stages (144 KiB)
# is the shape of Triton's measured best half-precision tile; 128 x 128 in 4 (128 KiB) the smaller one. mma.sync
# 128 x 128 in 4 stages of K 32 (80 KiB).
CUDA_TILES = (("wgmma", 128, 256, 3), ("wgmma", 128, 128, 4), ("mma_sync", 128, 128, 4))


def cuda_supported(graph: ProblemGraph, group: Group) -> str | None:
    """Why the group has no CUDA configuration (None: it has)."""
    plan: GemmPlan = group.detail["gemm"]
    if plan.batched:
        return "a batched GEMM (the CUDA kernels are unbatched)"
    if plan.a.dtype not in cuda_gemm.PTX_TYPE or plan.b.dtype != plan.a.dtype:
        return f"{plan.a.dtype} operands (the CUDA kernels take bfloat16 or float16)"
    if plan.a.load_dtype != plan.a.dtype or plan.b.load_dtype != plan.b.dtype:
        return "an operand cast on load"
    if plan.indices:
        return "an epilogue operand computed from the tile's coordinates"
    try:
        probe = GemmConfig(backend="cuda", variant="mma_sync", BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
                           num_stages=2, num_warps=8, precision=str(plan.a.dtype).removeprefix("torch."))
        _CudaWriter(graph, group, probe, "probe").epilogue_cpp()
    except expr.Unsupported as exc:
        return str(exc)
    return None


def cuda_space(graph: ProblemGraph, group: Group, arch: str) -> list[GemmConfig]:
    """The CUDA configurations of the group on ``arch``: wgmma where the arch has it, mma.sync where it has
    cp.async and ldmatrix (sm_80 on); none where :func:`cuda_supported` says why not."""
    if cuda_supported(graph, group) is not None:
        return []
    plan: GemmPlan = group.detail["gemm"]
    configs: list[GemmConfig] = []
    for variant, bm, bn, stages in CUDA_TILES:
        if variant == "wgmma" and not all(has_feature(arch, f) for f in ("wgmma", "tma", "setmaxnreg")):
            continue
        if variant == "mma_sync" and not all(has_feature(arch, f) for f in ("cp.async", "ldmatrix", "bf16")):
            continue
        configs.append(GemmConfig(backend="cuda", variant=variant, BLOCK_M=bm, BLOCK_N=bn,
                                  BLOCK_K=64 if variant == "wgmma" else 32, GROUP_M=8, num_stages=stages,
                                  num_warps=12 if variant == "wgmma" else 8,
                                  precision=str(plan.a.dtype).removeprefix("torch.")))
    return configs


def write_cuda(graph: ProblemGraph, group: Group, config: GemmConfig, ident: str) -> Rendered:
    return _CudaWriter(graph, group, config, ident).render()


class _CudaWriter(_Writer):
    def fields(self) -> tuple[list[str], list[str]]:
        """The kernel parameters' fields: the epilogue operands' and outputs' pointers, the operands' strides."""
        pointers = [*(f"in_{v}" for v in self.operands), *(f"out_{o}" for o in self.outputs)]
        return pointers, self.operand_stride_params()

    def epilogue_cpp(self) -> list[str]:
        """The C++ body of the epilogue at element (m, n): the twin of the Triton writer's ``epilogue``."""
        graph, plan = self.graph, self.plan
        body: list[str] = []
        env: dict[str, expr.Value] = {}
        for v in self.operands:
            mode = self.modes[v][0]
            dtype = graph.info(v).dtype
            ctype = pointwise.C_TYPE.get(dtype)
            if ctype is None:
                raise expr.Unsupported(f"a {dtype} epilogue operand")
            index = {"scalar": "0", "row": f"n * p.stride_{v}_n", "col": f"m * p.stride_{v}_m",
                     "tile": f"m * p.stride_{v}_m + n * p.stride_{v}_n"}[mode]
            body.append(f"const float x_{v} = {pointwise.widen(f'static_cast<const {ctype}*>(p.in_{v})[{index}]', dtype)};")
            env[v] = expr.Value(f"x_{v}", torch.float32)
        emitter = pointwise.CudaPointwiseEmitter()
        emitter.emit_all((graph.node(n) for n in (*plan.constants, *plan.producers)), env)
        result = "acc" if plan.alpha == 1 else f"acc * {pointwise.literal(float(plan.alpha)).expr}"
        if plan.bias is not None:
            scaled = f"x_{plan.bias}" if plan.beta == 1 else f"x_{plan.bias} * {pointwise.literal(float(plan.beta)).expr}"
            result += f" + {scaled}"
        if result != "acc":
            emitter.lines.append(f"const float v_{plan.anchor} = {result};")
            result = f"v_{plan.anchor}"
        env[plan.anchor] = expr.Value(result, torch.float32)
        for name in plan.epilogue:
            node = graph.node(name)
            env[name] = env[node.args[0].name] if node.op in GLUE_RESHAPES else emitter.emit(node, env)
        body += emitter.lines
        for o in self.outputs:
            dtype = graph.info(o).dtype
            value = env[o]
            if value.dtype != torch.float32 or dtype not in pointwise.C_TYPE:
                raise expr.Unsupported(f"a {dtype} output of a CUDA epilogue")
            body.append(f"static_cast<{pointwise.C_TYPE[dtype]}*>(p.out_{o})[m * p.N + n] = "
                        f"{pointwise.narrow(value.expr, dtype)};")
        return body

    def render(self) -> Rendered:
        plan, cfg, ident, L = self.plan, self.config, self.ident, self.local
        variant = str(cfg.variant)
        pointers, ints = self.fields()
        source = cuda_gemm.gemm_source(
            ident, variant=variant, dtype=plan.a.dtype,
            tile=(cfg.BLOCK_M, cfg.BLOCK_N, cfg.num_stages, cfg.GROUP_M),
            pointers=pointers, ints=ints, epilogue=self.epilogue_cpp(), helpers=pointwise.HELPERS)
        for text in (source.cpp, source.cuda):
            if "'''" in text:
                raise ValueError("a CUDA source with ''' cannot be carried in a raw string")
        name = extension_name(source.cpp, source.cuda, source.arch_list)
        a, b, m, n, k = L["mat_a"], L["mat_b"], L["M"], L["N"], L["K"]
        lines = [f"{ident}_CPP = r'''", *source.cpp.splitlines(), "'''", "",
                 f"{ident}_CUDA = r'''", *source.cuda.splitlines(), "'''", "", "",
                 *build_source(ident).splitlines(), "", "",
                 *_ALIGNED.format(ident=ident).splitlines(), "", "",
                 *_K_MAJOR.format(ident=ident).splitlines(), "", "",
                 *SM_COUNT_SOURCE.format(ident=ident).splitlines(), "", ""]
        what = ("wgmma.mma_async on TMA-loaded, mbarrier-pipelined shared memory (sm_90a)" if variant == "wgmma"
                else "mma.sync m16n8k16 fed by ldmatrix from a cp.async ring (sm_80 on)")
        lines += [
            f"def {ident}({', '.join(self.group.inputs)}):",
            f'    """{", ".join(self.graph.node(x).op for x in self.group.nodes)}.',
            "",
            f"    CUDA C++ with inline PTX: {what}.",
            "    fp32 accumulation, the epilogue on the accumulator; both operands read K-major with 16-element",
            '    rows (copied once where they are not)."""',
            f"    {a} = {self.operand(plan.a)}",
            f"    {b} = {self.operand(plan.b)}",
            f"    {m}, {k} = {a}.shape",
            f"    {n} = {b}.shape[1]",
            f'    assert {b}.shape[0] == {k}, "mm: the inner dimensions differ"',
            f"    {a}, {b}, {k} = {ident}_k_major({a}, {b}, pad=True)",
            f"    {b} = {b}.mT  # [N, K], K contiguous",
        ]
        views, stride_args = self.operand_views(f"({m}, {n})")
        lines += views
        for o in self.outputs:
            lines.append(f"    out_{o} = torch.empty({self.shape(plan.levels[o])}, "
                         f"dtype={self.graph.info(o).dtype}, device={plan.a.source}.device)")
        tensors = [*(v if self.modes[v][0] == "scalar" else f"{v}_tile" for v in self.operands),
                   *(f"out_{o}" for o in self.outputs)]
        pointer_args = [f"{t}.data_ptr()" for t in tensors]
        lines += [
            f"    module = {ident}_build({name!r}, {ident}_CPP, {ident}_CUDA, {source.arch_list!r})",
            "    module.run(",
            *_wrap([f"{a}.data_ptr()", f"{b}.data_ptr()", m, n, k, f"{a}.stride(0)", f"{b}.stride(0)",
                    f"[{', '.join(pointer_args)}]", f"[{', '.join(stride_args)}]",
                    f"{ident}_sm_count({a}.device, 1)", f"torch.cuda.current_stream({a}.device).cuda_stream"],
                   "        "),
            "    )",
            f"    return ({', '.join(f'out_{o}' for o in self.outputs)},)",
        ]
        notes = (f"{plan.anchor}: CUDA C++ {variant} {cfg.BLOCK_M}x{cfg.BLOCK_N} tiles, "
                 f"{cfg.num_stages} stages, {cfg.precision} operands K-major",)
        return Rendered(source="\n".join(lines), launcher=ident, notes=notes)
