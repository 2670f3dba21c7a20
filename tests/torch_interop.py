#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch side of Switchyard's safetensors interop test (test_serialize).

  torch_interop.py make DIR    trains nothing: a seeded torch.nn.Sequential
                               784-256-128-10; writes its state_dict to
                               DIR/torch_model.safetensors and an input batch
                               with torch's logits to DIR/torch_io.safetensors
  torch_interop.py check DIR   loads DIR/switchyard_model.safetensors (saved by
                               Switchyard) into the same torch architecture,
                               strictly, and checks its logits on the input in
                               DIR/switchyard_io.safetensors against the
                               logits Switchyard computed
  torch_interop.py cnn DIR     a small CNN (conv, batch norm, pooling) from
                               Switchyard's state: one training-mode step and
                               an evaluation must match Switchyard's logits,
                               gradients and running statistics (check_cnn)
  torch_interop.py vit DIR     a small vision transformer (patches, attention,
                               LayerNorm, GELU): its logits and gradients
                               (check_vit)

The files are written and read with the format's own layout (a little-endian
u64 header length, a JSON header, the raw data), as safetensors.torch does, so
that the test needs only Debian's python3-torch.
"""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}
NAMES = {v: k for k, v in DTYPES.items()}


def save(path, tensors, metadata=None):
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        raw = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[b:e]), dtype=DTYPES[info["dtype"]]) if e > b else \
            torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out, meta


def model():
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def cnn():
    """The small CNN of test_serialize's TorchInterop.ACnn... test."""
    nn = torch.nn
    return nn.Sequential(
        nn.Unflatten(1, (1, 12, 12)),
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, bias=False), nn.BatchNorm2d(6),
        nn.ReLU(), nn.AvgPool2d(2, stride=1), nn.Flatten(), nn.BatchNorm1d(24), nn.Linear(24, 5))


def check_cnn(d):
    """Switchyard's state before a training-mode step, the batch, and what
    Switchyard computed: torch, from the same state and in float64, must
    compute the same logits, gradients and running statistics, then the same
    evaluation-mode logits."""
    io, _ = load(f"{d}/cnn_io.safetensors")
    before, _ = load(f"{d}/cnn_before.safetensors")
    after, _ = load(f"{d}/cnn_after.safetensors")
    # torch in float64: the reference, so the bound is on Switchyard's own
    # rounding and not on the difference between two float32 summation orders
    m = cnn()
    m.load_state_dict(before, strict=True)
    m.double()
    m.train()
    logits = m(io["input"].double())
    torch.nn.functional.cross_entropy(logits, io["labels"].long()).backward()

    def rel(a, b):  # relative to the largest value, or to 1e-3 for values near
        # zero (conv biases before a batch norm get no gradient, up to rounding)
        return (a.detach().double() - b.double()).abs().max().item() / \
            max(b.double().abs().max().item(), 1e-3)
    errs = {"logits_train": rel(logits, io["logits_train"])}
    for name, p in m.named_parameters():
        errs["grad " + name] = rel(p.grad, io["grad." + name])
    for name, b in m.named_buffers():
        errs[name] = rel(b, after[name])
    m.eval()
    with torch.no_grad():
        errs["logits_eval"] = rel(m(io["input"].double()), io["logits_eval"])
    worst = max(errs, key=errs.get)
    print(f"torch_interop: cnn, {len(errs)} values compared, worst {worst}: "
          f"max relative error {errs[worst]:.3g}")
    return 0 if errs[worst] <= 1e-4 else 1


class PatchEmbedding(torch.nn.Module):
    def __init__(self, patch, dim):
        super().__init__()
        self.proj = torch.nn.Conv2d(1, dim, patch, stride=patch)
        self.pos = torch.nn.Parameter(torch.zeros(1, (28 // patch) ** 2, dim))

    def forward(self, x):
        return self.proj(x.reshape(-1, 1, 28, 28)).flatten(2).transpose(1, 2) + self.pos


class SelfAttention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        n, s, dim = x.shape
        q, k, v = self.qkv(x).reshape(n, s, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-1, -2) / (dim // self.heads) ** 0.5, dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(n, s, dim))


class EncoderBlock(torch.nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.ln1, self.attn = torch.nn.LayerNorm(dim), SelfAttention(dim, heads)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, mlp), torch.nn.Linear(mlp, dim)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        mlp = self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(h)), approximate="tanh"))
        return h + mlp


class MeanTokens(torch.nn.Module):
    def forward(self, x):
        return x.mean(1)


def vit():
    """The small vision transformer of test_serialize's TorchInterop.AVit...
    test (models/vit.h's modules)."""
    return torch.nn.Sequential(PatchEmbedding(7, 16), EncoderBlock(16, 2, 32),
                               torch.nn.LayerNorm(16), MeanTokens(), torch.nn.Linear(16, 5))


def check_vit(d):
    """Switchyard's initial state, a batch, its logits and gradients: torch in
    float64 from the same state must compute the same."""
    io, _ = load(f"{d}/vit_io.safetensors")
    before, _ = load(f"{d}/vit_before.safetensors")
    m = vit()
    m.load_state_dict(before, strict=True)
    m.double()
    logits = m(io["input"].double())
    torch.nn.functional.cross_entropy(logits, io["labels"].long()).backward()

    def rel(a, b):
        return (a.detach().double() - b.double()).abs().max().item() / \
            max(b.double().abs().max().item(), 1e-3)
    errs = {"logits": rel(logits, io["logits"])}
    for name, p in m.named_parameters():
        errs["grad " + name] = rel(p.grad, io["grad." + name])
    worst = max(errs, key=errs.get)
    print(f"torch_interop: vit, {len(errs)} values compared, worst {worst}: "
          f"max relative error {errs[worst]:.3g}")
    return 0 if errs[worst] <= 1e-4 else 1


def main():
    mode, d = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if mode == "make":
        m = model()
        x = torch.rand(32, 784)
        with torch.no_grad():
            logits = m(x)
        save(f"{d}/torch_model.safetensors", m.state_dict(), {"format": "pt"})
        save(f"{d}/torch_io.safetensors", {"input": x, "logits": logits})
        print("torch_interop: wrote", len(m.state_dict()), "tensors")
    elif mode == "check":
        state, meta = load(f"{d}/switchyard_model.safetensors")
        m = model()
        m.load_state_dict(state, strict=True)
        io, _ = load(f"{d}/switchyard_io.safetensors")
        with torch.no_grad():
            logits = m(io["input"])
        err = (logits - io["logits"]).abs().max().item() / io["logits"].abs().max().item()
        print(f"torch_interop: {len(state)} tensors loaded into torch, metadata {sorted(meta)}, "
              f"logits max relative error {err:.3g}")
        sys.exit(0 if err <= 1e-5 else 1)
    elif mode == "cnn":
        sys.exit(check_cnn(d))
    elif mode == "vit":
        sys.exit(check_vit(d))
    else:
        sys.exit(f"usage: {sys.argv[0]} make|check|cnn|vit DIR")


if __name__ == "__main__":
    main()
