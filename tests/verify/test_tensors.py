"""The tensor plumbing the checks rest on: digests where tensors live, inputs made on a device."""

import types

import pytest
import torch

from kernelwright.verify import inputs, reference, tensors


def test_device_digest_sees_every_kind_of_change(monkeypatch):
    monkeypatch.setattr(tensors, "_CHUNK_WORDS", 64)  # many chunks: the running sum across chunk edges
    x = torch.randn(37, 29)
    base = tensors._device_digest(x)
    assert tensors._device_digest(x.clone()) == base
    swapped = x.clone().reshape(-1)
    swapped[[100, 700]] = swapped[[700, 100]]
    nan_payload = x.clone()
    nan_payload[3, 3] = float("nan")
    other_nan = nan_payload.clone().view(torch.int32)
    other_nan[3, 3] ^= 1  # another NaN: the same under ==, different bytes
    changed = [swapped.reshape(37, 29), nan_payload, other_nan.view(torch.float32), x.t(), x.reshape(29, 37),
               x.to(torch.float64), -x]
    digests = {tensors._device_digest(c) for c in changed}
    assert base not in digests and len(digests) == len(changed)


def test_device_digest_is_of_logical_content_and_odd_sizes():
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert tensors._device_digest(x.t()) == tensors._device_digest(x.t().contiguous())
    for dtype in (torch.float16, torch.int8, torch.bool):
        a = torch.zeros(7, dtype=dtype)
        b = a.clone()
        b[6] = 1
        assert tensors._device_digest(a) != tensors._device_digest(b)  # the last, padded word counts
    assert tensors._device_digest(torch.zeros(7, dtype=torch.int8)) != tensors._device_digest(
        torch.zeros(7, dtype=torch.bool))
    assert tensors._device_digest(torch.empty(0)) != tensors._device_digest(torch.empty(0, 3))


def test_digest_on_cpu_stays_the_byte_hash():
    x = torch.randn(8)
    assert tensors.digest(x) == tensors.digest(x.clone()) != tensors.digest(x + 1)
    assert len(tensors.digest(x)) == 32


def _problem(body):
    module = types.ModuleType("p")
    exec(body, module.__dict__)
    return module


def test_inputs_made_on_the_device_with_a_cpu_fallback():
    plain = _problem("import torch\ndef get_inputs():\n    return [torch.rand(4, 5), 3]\n")
    meta = inputs.make_inputs(plain, 1, "meta")
    assert meta[0].device.type == "meta" and tuple(meta[0].shape) == (4, 5) and meta[1] == 3
    a, b = inputs.make_inputs(plain, 1, "cpu"), inputs.make_inputs(plain, 1)
    assert torch.equal(a[0], b[0])
    numpy_bound = _problem("import torch\ndef get_inputs():\n    return [torch.from_numpy(torch.rand(3).numpy())]\n")
    (x,) = inputs.make_inputs(numpy_bound, 2, "meta")  # .numpy() fails on meta: made on the CPU instead
    assert x.device.type == "cpu" and torch.equal(x, inputs.make_inputs(numpy_bound, 2)[0])
    broken = _problem("def get_inputs():\n    raise ValueError('bad size')\n")
    with pytest.raises(Exception, match="get_inputs.*ValueError: bad size"):
        inputs.make_inputs(broken, 1, "meta")


def test_transform_draws_noise_where_the_inputs_live():
    values = [torch.rand(3, 4), 2]
    out, label = reference._transform(values, reference.trials.HEAVY_TAILED, 5, 0)
    again, _ = reference._transform(values, reference.trials.HEAVY_TAILED, 5, 0)
    assert out[0].device == values[0].device and out[1] == 2 and "exp" in label
    assert torch.equal(out[0], again[0]) and not torch.equal(out[0], values[0])
