#!/usr/bin/env python3
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
    else:
        sys.exit(f"usage: {sys.argv[0]} make|check DIR")


if __name__ == "__main__":
    main()
