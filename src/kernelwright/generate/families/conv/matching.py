"""The anchor of a convolution group, ``aten.convolution`` of a kind the family writes, and who is who in a
claimed group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.generate.families.base import Group
from kernelwright.generate.graph import Node, ProblemGraph, Ref

_FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)


def int_tuple(value: object, rank: int) -> tuple[int, ...] | None:
    """``value`` as ``rank`` plain ints (a stride, padding or dilation list), else None."""
    if isinstance(value, (list, tuple)) and len(value) == rank and all(type(v) is int for v in value):
        return tuple(int(v) for v in value)
    return None


def ref_name(value: object) -> str | None:
    return value.name if isinstance(value, Ref) else None


def match_convolution(graph: ProblemGraph, node: Node, claimed: set[str]) -> dict[str, Any] | None:
    """What a 1-D, 2-D or 3-D convolution (NCL, NCHW or NCDHW; any groups; transposed or not; one float type)
    reads: the group's first facts. ``groups`` is recorded as captured; a direct convolution's launchers read it back
    from the tensors (``in_channels // weight.shape[1]``), so a second shape that changes the channels (a depthwise
    convolution's groups follow them) stays right. A transposed convolution's filter (``[C_in, C_out / groups,
    *taps]``) does not say its groups: they are the captured number."""
    if node.name in claimed or node.op != "convolution" or node.info is None or len(node.args) < 9:
        return None
    rank = len(node.info.shape) - 2
    if rank not in (1, 2, 3):
        return None
    x, weight = ref_name(node.args[0]), ref_name(node.args[1])
    bias = node.args[2]
    if x is None or weight is None or (bias is not None and ref_name(bias) is None):
        return None
    stride, padding, dilation = (int_tuple(a, rank) for a in node.args[3:6])
    transposed, output_padding, groups = node.args[6], int_tuple(node.args[7], rank), node.args[8]
    if stride is None or padding is None or dilation is None or type(transposed) is not bool:
        return None
    if output_padding is None or (not transposed and any(output_padding)):
        return None
    if type(groups) is not int or groups < 1:
        return None
    dtype = node.info.dtype
    operands = [x, weight] + ([bias.name] if bias is not None else [])
    if dtype not in _FLOAT_TYPES or any(graph.info(v).dtype != dtype for v in operands):
        return None
    if len(graph.info(x).shape) != rank + 2 or len(graph.info(weight).shape) != rank + 2:
        return None
    return {"conv": node.name, "x": x, "weight": weight, "bias": bias.name if bias is not None else None,
            "stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "bn": None,
            "transposed": transposed, "output_padding": output_padding}


@dataclass(frozen=True)
class Roles:
    """Who is who in a claimed group (parsed back from ``group.detail``)."""

    conv: str
    x: str
    weight: str
    bias: str | None
    stride: tuple[int, ...]  # one per spatial dimension (1, 2 or 3 of them)
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int  # as captured: > 1 selects the grouped kernels
    transposed: bool  # a transposed convolution (the gradient of a direct one with respect to its input)
    output_padding: tuple[int, ...]  # a transposed convolution's extra output rows at the end (zeros otherwise)
    bn: str | None  # the getitem holding the batch norm's result
    bn_weight: str | None
    bn_bias: str | None
    bn_mean: str | None
    bn_var: str | None
    bn_eps: float
    pointwise: tuple[str, ...]  # epilogue nodes after the convolution (and batch norm), in graph order


def roles(group: Group) -> Roles:
    d = group.detail
    return Roles(conv=d["conv"], x=d["x"], weight=d["weight"], bias=d["bias"], stride=tuple(d["stride"]),
                 padding=tuple(d["padding"]), dilation=tuple(d["dilation"]), groups=int(d.get("groups", 1)),
                 transposed=bool(d.get("transposed", False)),
                 output_padding=tuple(d.get("output_padding", (0,) * len(d["stride"]))),
                 bn=d["bn"], bn_weight=d.get("bn_weight"), bn_bias=d.get("bn_bias"), bn_mean=d.get("bn_mean"),
                 bn_var=d.get("bn_var"), bn_eps=float(d.get("bn_eps", 0.0)), pointwise=tuple(d["pointwise"]))
