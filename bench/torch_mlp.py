#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch reference for `switchyard train`: the same MLP, optimizer, batch
size and data (Fashion-MNIST from the same IDX files, same normalization).
Prints one JSON line per run with train samples/s, test accuracy and peak RSS.

PyTorch gets its best case: the whole training set is one preloaded tensor
and batches are index slices (no DataLoader workers)."""
import argparse, gzip, json, resource, time
import numpy as np
import torch

def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hidden", default="256,128")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    norm = lambda x: (torch.from_numpy(x.reshape(len(x), -1).astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    xtr = norm(idx(f"{a.data}/train-images-idx3-ubyte.gz"))
    ytr = torch.from_numpy(idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    xte = norm(idx(f"{a.data}/t10k-images-idx3-ubyte.gz"))
    yte = torch.from_numpy(idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    sizes = [784] + [int(h) for h in a.hidden.split(",") if h] + [10]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    lossf = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(a.seed)
    train_time, seen = 0.0, 0
    for _ in range(a.epochs):
        perm = torch.randperm(len(xtr), generator=g)
        t0 = time.perf_counter()
        for s in range(0, len(xtr), a.batch):
            i = perm[s:s + a.batch]
            x, y = xtr[i], ytr[i]
            opt.zero_grad()
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            seen += len(i)
        train_time += time.perf_counter() - t0
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": a.threads,
                      "batch": a.batch, "epochs": a.epochs,
                      "train_samples_per_s": round(seen / train_time, 1), "test_acc": round(acc, 4),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))

if __name__ == "__main__":
    main()
