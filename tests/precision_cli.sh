#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# switchyard train --precision on one device: bf16 and fp16 runs report
# their precision and peak device memory and end near the fp32 run's
# accuracy (within 3 points after this short run; the full runs' figures
# are in docs/precision.md); fp16 reports its loss scale; a bf16 model file
# is half the f32 one and evaluates to the same accuracy (within 0.5
# points); an fp16 run resumes from its checkpoints (the GradScaler's state
# in them) and repeats the uninterrupted run's accuracy.
#   precision_cli.sh SWITCHYARD DEVICE
set -euo pipefail
sy=$1
dev=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --device "$dev" --limit 3000 --batch 100 --json)
for p in fp32 bf16 fp16; do
  "$sy" "${common[@]}" --epochs 2 --precision "$p" --save "$tmp/$p.safetensors" --save-dtype \
    "$([[ $p == fp32 ]] && echo f32 || echo bf16)" | tail -1 > "$tmp/$p.json"
done
"$sy" eval --device "$dev" --model "$tmp/bf16.safetensors" --json | tail -1 > "$tmp/eval.json"
"$sy" "${common[@]}" --epochs 1 --precision fp16 --save "$tmp/ckpt" > /dev/null
"$sy" "${common[@]}" --epochs 2 --precision fp16 --resume "$tmp/ckpt" | tail -1 > "$tmp/resumed.json"
# DataParallel under autocast and the scaler: the CPU beside a GPU device.
dp=()
if [[ $dev != cpu ]]; then
  "$sy" train --devices "cpu,$dev" --limit 3000 --batch 100 --json --epochs 2 --precision fp16 |
    tail -1 > "$tmp/dp.json"
  dp=("$tmp/dp.json")
fi
python3 - "$tmp" <<'PY'
import json, os, sys
d = sys.argv[1]
r = {p: json.load(open(f"{d}/{p}.json")) for p in ("fp32", "bf16", "fp16")}
for p, j in r.items():
    assert j["precision"] == p, (p, j["precision"])
    assert j["peak_device_mb"] > 0, j
    assert abs(j["test_acc"] - r["fp32"]["test_acc"]) <= 0.03, (p, j["test_acc"], r["fp32"]["test_acc"])
assert "loss_scale" in r["fp16"] and "skipped_steps" in r["fp16"], r["fp16"]
assert "loss_scale" not in r["fp32"] and "loss_scale" not in r["bf16"], (r["fp32"], r["bf16"])
ratio = os.path.getsize(f"{d}/bf16.safetensors") / os.path.getsize(f"{d}/fp32.safetensors")
assert 0.49 < ratio < 0.51, ratio
e = json.load(open(f"{d}/eval.json"))
assert abs(e["test_acc"] - r["bf16"]["test_acc"]) <= 0.005, (e["test_acc"], r["bf16"]["test_acc"])
res = json.load(open(f"{d}/resumed.json"))
assert res["first_epoch"] == 2 and res["test_acc"] == r["fp16"]["test_acc"], (res, r["fp16"])
if os.path.exists(f"{d}/dp.json"):
    dp = json.load(open(f"{d}/dp.json"))
    assert dp["precision"] == "fp16" and len(dp["devices"]) == 2 and "loss_scale" in dp, dp
    assert abs(dp["test_acc"] - r["fp32"]["test_acc"]) <= 0.03, (dp["test_acc"], r["fp32"]["test_acc"])
    print("DataParallel fp16:", dp["test_acc"], dp["devices"])
print("precision:", {p: (j["test_acc"], j["peak_device_mb"]) for p, j in r.items()},
      "bf16 file ratio", round(ratio, 4), "eval", e["test_acc"], "fp16 resumed", res["test_acc"])
print("ok")
PY
