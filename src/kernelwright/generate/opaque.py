"""Recurrent layers made opaque to torch.export's tracing, for the capture (generate/graph.py).

Fake tensors run a recurrent layer's decomposition step by step to find its result's shape: with symbolic sizes
that took 65 s for level 3's 6-layer, 512-step LSTM (static: 7 s; torch 2.13, this 2-core machine), and a static
capture bakes the batch size into what the forward makes from it (`35_LSTM`'s `torch.randn(..., x.size(0), ...)`:
rejected shape-specialised). So while a model with recurrent layers is exported, torch.nn's calls of the fused
recurrent functions go to opaque custom operators (same arguments, same computation) whose shapes are given
directly; the graph reads them back as the aten operators (`aten_target`). Dynamic captures on this machine:
36_LSTMHn 65 s -> 0.3 s, 35_LSTM 1.5 s (static: 25 s).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

_OPAQUE: dict[str, Any] = {}
_ATEN_OF: dict[Any, Any] = {}


def _define() -> dict[str, Any]:
    """kernelwright::lstm, ::gru, ::rnn_tanh, ::rnn_relu (defined once, on first use)."""
    if _OPAQUE:
        return _OPAQUE
    from torch import Tensor
    from torch.library import custom_op

    def _output(x: Tensor, h: Tensor, bidirectional: bool) -> Tensor:
        return x.new_empty((x.shape[0], x.shape[1], (2 if bidirectional else 1) * h.shape[-1]))

    args = ("Tensor input, {hx}, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
            "bool bidirectional, bool batch_first")

    def lstm(input: Tensor, hx: list[Tensor], params: list[Tensor], has_biases: bool, num_layers: int,
             dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
        out, h, c = torch.ops.aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train,
                                              bidirectional, batch_first)
        return out, h, c

    def lstm_fake(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # type: ignore[no-untyped-def]
        return _output(input, hx[0], bidirectional), hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)

    op = custom_op("kernelwright::lstm", mutates_args=(),
                   schema=f"({args.format(hx='Tensor[] hx')}) -> (Tensor, Tensor, Tensor)")(lstm)
    op.register_fake(lstm_fake)
    _OPAQUE["lstm"] = op
    _ATEN_OF[torch.ops.kernelwright.lstm.default] = torch.ops.aten.lstm.input
    for name in ("gru", "rnn_tanh", "rnn_relu"):
        aten = getattr(torch.ops.aten, name).input

        def single(input: Tensor, hx: Tensor, params: list[Tensor], has_biases: bool, num_layers: int,
                   dropout: float, train: bool, bidirectional: bool, batch_first: bool, *, _aten: Any = aten
                   ) -> tuple[Tensor, Tensor]:
            out, h = _aten(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
            return out, h

        def fake(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # type: ignore[no-untyped-def]
            return _output(input, hx, bidirectional), hx.new_empty(hx.shape)

        op = custom_op(f"kernelwright::{name}", mutates_args=(),
                       schema=f"({args.format(hx='Tensor hx')}) -> (Tensor, Tensor)")(single)
        op.register_fake(fake)
        _OPAQUE[name] = op
        _ATEN_OF[getattr(torch.ops.kernelwright, name).default] = aten
    return _OPAQUE


@contextlib.contextmanager
def recurrent_layers() -> Iterator[None]:
    """torch.nn's recurrent layers call the opaque operators while this lasts (their packed-sequence forms, and
    anything else, the real functions)."""
    from torch import _VF

    ops = _define()
    real = {name: getattr(_VF, name) for name in ops}

    def route(name: str) -> Any:
        def call(*args: Any) -> Any:
            # the padded form only: (input, hx, params, ...) -- lstm's hx a tuple, the others' params a list
            padded = len(args) == 9 and (not isinstance(args[1], torch.Tensor) if name == "lstm"
                                         else isinstance(args[2], (list, tuple)))
            if not padded:
                return real[name](*args)
            x, hx, params, *rest = args
            return ops[name](x, list(hx) if name == "lstm" else hx, list(params), *rest)
        return call

    for name in ops:
        setattr(_VF, name, route(name))
    try:
        yield
    finally:
        for name in ops:
            with contextlib.suppress(AttributeError):
                delattr(_VF, name)


def aten_target(target: Any) -> Any:
    """The aten operator an opaque one stands for (anything else unchanged)."""
    return _ATEN_OF.get(target, target)
