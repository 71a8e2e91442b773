"""y = (x @ W^T + b) * scale with learned W, b and a scalar parameter: tests that weights reach ModelNew."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(()) + 0.5)

    def forward(self, x):
        return self.linear(x) * self.scale


batch = 24
in_features = 40
out_features = 20


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
