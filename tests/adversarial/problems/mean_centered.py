"""A degenerate problem: the mean of mean-centred rows is zero up to rounding, so zeros pass any tolerance."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x - x.mean(dim=-1, keepdim=True)).mean(dim=-1)


rows = 32
cols = 257


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
