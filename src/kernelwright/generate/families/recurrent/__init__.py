"""Recurrent layers — ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` (tanh or ReLU), any number of layers, one or both
directions, batch-first or not, with or without biases — computed as a scan over time, not an unrolled graph.

The capture keeps each layer stack as one ``aten.lstm`` / ``aten.gru`` / ``aten.rnn_tanh`` / ``aten.rnn_relu``
node (:data:`~kernelwright.generate.graph.RECURRENT_OPS`). Per layer and direction, two kernels:

- **input projection**: every time step's ``x_t @ W_ih^T + b_ih`` at once, one tiled ``tl.dot`` GEMM over the
  ``T * B`` rows (read through the input's strides: a batch-first input or the previous layer's output in place);
- **scan**: one program per block of batch rows walks the time steps in order (backwards for the reverse
  direction); each step multiplies the previous hidden state by ``W_hh^T`` for every gate, applies the cell (the
  LSTM's four gates and cell state, the GRU's reset/update/new gates, the plain RNN's activation) and writes the
  step's output. Batch rows never depend on each other, so the recurrence needs no grid-wide synchronisation:
  a barrier inside the program orders each step's writes before the next step's reads. The hidden and cell states
  are carried in fp32 whatever the input dtype.

Modules: :mod:`.matching` (the node and its parameter list), :mod:`.writing` (the kernels and the launcher),
:mod:`.family` (:class:`RecurrentFamily`).
"""

from kernelwright.generate.families.recurrent.family import NAME, RecurrentFamily

__all__ = ["NAME", "RecurrentFamily"]
