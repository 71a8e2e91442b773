"""The anchor of a convolution group, ``aten.convolution`` of a kind the family writes, and who is who in a
claimed group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.generate.families.base import Group
from kernelwright.generate.graph import Node, ProblemGraph, Ref

_FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)


def int_pair(value: object) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    return None


def ref_name(value: object) -> str | None:
    return value.name if isinstance(value, Ref) else None


def match_convolution(graph: ProblemGraph, node: Node, claimed: set[str]) -> dict[str, Any] | None:
    """What a 2-D NCHW convolution (groups 1, not transposed, one float type) reads: the group's first facts."""
    if node.name in claimed or node.op != "convolution" or node.info is None or len(node.info.shape) != 4:
        return None
    x, weight = ref_name(node.args[0]), ref_name(node.args[1])
    bias = node.args[2] if len(node.args) > 2 else None
    if x is None or weight is None or (bias is not None and ref_name(bias) is None):
        return None
    stride, padding, dilation = (int_pair(a) for a in node.args[3:6])
    transposed, groups = node.args[6], node.args[8]
    if stride is None or padding is None or dilation is None or transposed or groups != 1:
        return None
    dtype = node.info.dtype
    operands = [x, weight] + ([bias.name] if bias is not None else [])
    if dtype not in _FLOAT_TYPES or any(graph.info(v).dtype != dtype for v in operands):
        return None
    if len(graph.info(x).shape) != 4 or len(graph.info(weight).shape) != 4:
        return None
    return {"conv": node.name, "x": x, "weight": weight, "bias": bias.name if bias is not None else None,
            "stride": stride, "padding": padding, "dilation": dilation, "bn": None}


@dataclass(frozen=True)
class Roles:
    """Who is who in a claimed group (parsed back from ``group.detail``)."""

    conv: str
    x: str
    weight: str
    bias: str | None
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
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
                 padding=tuple(d["padding"]), dilation=tuple(d["dilation"]), bn=d["bn"],
                 bn_weight=d.get("bn_weight"), bn_bias=d.get("bn_bias"), bn_mean=d.get("bn_mean"),
                 bn_var=d.get("bn_var"), bn_eps=float(d.get("bn_eps", 0.0)), pointwise=tuple(d["pointwise"]))
