"""The recurrent family: LSTM, GRU and plain RNN layer stacks as scans over time, proven under the interpreter
against PyTorch's own layers (several layers, both directions, batch-first or not, biases or none)."""

from __future__ import annotations

import pytest

from kernelwright.records import Status


def _families(the_plan) -> list[str]:
    return [g.family for g in the_plan.groups]


_CASES = {
    # A 2-layer batch-first LSTM given its states, the last step through a linear layer, and h_n and c_n returned.
    "lstm": """
        class Model(nn.Module):
            def __init__(self, input_size, hidden_size, layers):
                super().__init__()
                self.lstm = nn.LSTM(input_size, hidden_size, layers, batch_first=True)
                self.fc = nn.Linear(hidden_size, 5)

            def forward(self, x, h0, c0):
                out, (h, c) = self.lstm(x, (h0, c0))
                return self.fc(out[:, -1, :]), h, c

        def get_inputs():
            return [torch.rand(3, 6, 7), torch.rand(2, 3, 20), torch.rand(2, 3, 20)]

        def get_init_inputs():
            return [7, 20, 2]
    """,
    # A bidirectional 2-layer GRU, time-major, its initial state zero (not given): the output and h_n.
    "gru_bidirectional": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(9, 17, 2, bidirectional=True)

            def forward(self, x):
                out, h = self.gru(x)
                return out, h

        def get_inputs():
            return [torch.rand(5, 4, 9)]

        def get_init_inputs():
            return []
    """,
    # Plain RNNs: tanh without biases, then ReLU with them, one feeding the other.
    "rnn": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.RNN(6, 16, 1, bias=False, batch_first=True)
                self.b = nn.RNN(16, 12, 2, nonlinearity="relu", batch_first=True)

            def forward(self, x, h0):
                y, _ = self.a(x, h0)
                z, h = self.b(y)
                return z, h

        def get_inputs():
            return [torch.rand(2, 7, 6), torch.rand(1, 2, 16)]

        def get_init_inputs():
            return []
    """,
    # Level 3's 35_LSTM's form: the initial states drawn in forward at the input's batch size (left to PyTorch,
    # with the same random numbers), which must follow the run-time batch: the second-shape trial changes it.
    "lstm_random_states": """
        batch_size = 3
        steps = 6

        class Model(nn.Module):
            def __init__(self, input_size, hidden_size, layers):
                super().__init__()
                self.layers, self.hidden = layers, hidden_size
                self.lstm = nn.LSTM(input_size, hidden_size, layers, batch_first=True)
                self.fc = nn.Linear(hidden_size, 4)

            def forward(self, x):
                h0 = torch.randn(self.layers, x.size(0), self.hidden, device=x.device)
                c0 = torch.randn(self.layers, x.size(0), self.hidden, device=x.device)
                out, _ = self.lstm(x, (h0, c0))
                return self.fc(out[:, -1, :])

        def get_inputs():
            return [torch.rand(batch_size, steps, 7)]

        def get_init_inputs():
            return [7, 20, 2]
    """,
}


# One stack in the default run (a plain RNN); the LSTM and GRU stacks are marked slow.
@pytest.mark.instructions  # the sm_90a code's barrier, below
@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c == "rnn" else pytest.mark.slow) for c in _CASES])
def test_recurrent_stacks_pass_the_verifier(check, case: str) -> None:
    the_plan, verdict = check(f"rnn_{case}", _CASES[case], distribution_trials=False)
    assert "recurrent" in _families(the_plan)
    left = [the_plan.graph.node(n).op for n in the_plan.uncovered]
    assert set(left) <= {"randn"}, left  # random numbers stay PyTorch's (the reference's draws)
    assert verdict.status is Status.PASSED, verdict.message
    # Captured with symbolic sizes (the recurrent layers opaque to tracing, generate/graph.py), so what the forward
    # makes from a size follows it: the second-shape trial ran and passed wherever the problem has a size to change.
    assert the_plan.graph.dynamic
    if "batch_size" in _CASES[case]:
        assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials), verdict.trials
    # The default configuration splits a batch block's hidden units over programs that meet after every step; the
    # CPU runs it unsplit (one program), but its sm_90a code must hold the barrier: a release add, acquire polls.
    scans = [k for k in verdict.instructions if k.arch == "sm_90a" and "scan_kernel" in k.name]
    assert scans and all(any(op.startswith("ATOM") or op.startswith("RED") for op in k.histogram_by_opcode)
                         for k in scans), [sorted(k.histogram_by_opcode) for k in scans]
