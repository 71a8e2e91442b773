"""The anchor of a recurrent group: which cell, its flags, and the names of its state and parameter tensors."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelwright.generate.families.base import getitem_items
from kernelwright.generate.graph import Node, ProblemGraph, Ref

# The cell of each operator and its gates a step (PyTorch's weight layout: the gates stacked along W's rows).
CELLS = {"lstm": ("lstm", 4), "gru": ("gru", 3), "rnn_tanh": ("tanh", 1), "rnn_relu": ("relu", 1)}
_FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Recurrent:
    node: str
    cell: str  # "lstm", "gru", "tanh" or "relu"
    gates: int
    x: str
    h0: str
    c0: str | None  # the LSTM's initial cell state
    params: tuple[str, ...]  # per layer, per direction: w_ih, w_hh[, b_ih, b_hh]
    has_biases: bool
    layers: int
    directions: int
    batch_first: bool
    items: tuple[tuple[int, str], ...]  # (output index, getitem name): 0 the output, 1 h_n, 2 c_n
    # States the forward did not give (``nn.GRU(x)``): export writes a ``full`` of zeros, made in the launcher at
    # the run's batch size. (state name, fill value).
    fills: tuple[tuple[str, float], ...] = ()

    @property
    def members(self) -> list[str]:
        return [*(name for name, _ in self.fills), self.node, *(name for _, name in self.items)]

    def fill(self, name: str | None) -> float | None:
        return dict(self.fills).get(name)

    def layer_params(self, layer: int, direction: int) -> tuple[str, ...]:
        per = 4 if self.has_biases else 2
        start = (layer * self.directions + direction) * per
        return self.params[start:start + per]


def _name(value: object) -> str | None:
    return value.name if isinstance(value, Ref) else None


def match_recurrent(graph: ProblemGraph, node: Node, claimed: set[str]) -> Recurrent | None:
    """A recurrent layer stack the family computes, else None: a batched 3-D float input, no projection
    (``proj_size``), and no dropout between layers in training mode (its random masks are PyTorch's)."""
    if node.name in claimed or node.op not in CELLS or node.target.overloadpacket is None:
        return None
    if len(node.args) != 9:  # (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return None
    x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = node.args
    cell, gates = CELLS[node.op]
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    if len(states) != (2 if cell == "lstm" else 1) or not isinstance(params, (list, tuple)):
        return None
    names = [_name(v) for v in (x, *states, *params)]
    if any(n is None or n not in graph.values for n in names):
        return None
    if not isinstance(layers, int) or layers < 1 or (dropout and train and layers > 1):
        return None
    directions = 2 if bidirectional else 1
    if len(params) != layers * directions * (4 if has_biases else 2):
        return None  # an LSTM with proj_size has a fifth weight a layer: not covered
    info = graph.info(names[0])
    if len(info.shape) != 3 or info.dtype not in _FLOAT_TYPES or info.numel == 0:
        return None
    if any(graph.info(n).dtype != info.dtype for n in names[1:]):
        return None
    fills = []
    for state in names[1:1 + len(states)]:
        producer = graph.find(state)
        if (producer is not None and producer.op == "full" and state not in claimed
                and isinstance(producer.args[1], (int, float)) and set(graph.users.get(state, [])) == {node.name}):
            fills.append((state, float(producer.args[1])))
    items = getitem_items(graph, node, claimed)
    if items is None:
        return None
    return Recurrent(node=node.name, cell=cell, gates=gates, x=names[0], h0=names[1],
                     c0=names[2] if cell == "lstm" else None, params=tuple(names[1 + len(states):]),
                     has_biases=bool(has_biases), layers=layers, directions=directions,
                     batch_first=bool(batch_first), items=items, fills=tuple(fills))
