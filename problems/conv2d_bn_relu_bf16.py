"""3x3 convolution (no bias) + BatchNorm in inference mode + ReLU (a ResNet basic-block stage).

Family: convolution with a folded-normalisation epilogue. dtype: bfloat16.
Shapes: x [32, 128, 64, 64] (32 MiB), weight [128, 128, 3, 3], out [32, 128, 64, 64].
FLOPs: 2 * 32 * 128 * 64^2 * 128 * 9 = 39 GFLOP. Bytes: 67 MB.
The BatchNorm statistics and affine are random and always used in eval form (running statistics), whatever
mode the module is in, so the folded scale/shift is not the identity.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 128
height = 64
width = 64


class Model(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False, dtype=torch.bfloat16)
        self.bn_weight = nn.Parameter(1.0 + 0.3 * torch.randn(channels, dtype=torch.bfloat16))
        self.bn_bias = nn.Parameter(0.3 * torch.randn(channels, dtype=torch.bfloat16))
        self.register_buffer("running_mean", 0.2 * torch.randn(channels, dtype=torch.bfloat16))
        self.register_buffer("running_var", 0.5 + torch.rand(channels, dtype=torch.bfloat16))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = F.batch_norm(
            y, self.running_mean, self.running_var, self.bn_weight, self.bn_bias, training=False, eps=self.eps
        )
        return torch.relu(y)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs():
    return [channels, 1e-5]
