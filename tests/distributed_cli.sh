#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# switchyard train --distributed under mpirun: a 2-rank run reports what one
# process with the same (global) batch does, to 1e-4 (its first 50 losses,
# the final loss, the test accuracy), with world size and communication in
# its JSON line; and a rank killed mid-run ends the job, non-zero, within 60 s.
#   distributed_cli.sh SWITCHYARD MPIRUN
set -euo pipefail
sy=$1
mpirun=$2
flags=(--allow-run-as-root --oversubscribe -x SWITCHYARD_DIST_TIMEOUT_S=60)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --device cpu --epochs 1 --limit 3200 --batch 64 --losses 50 --json)

"$sy" "${common[@]}" | tail -1 > "$tmp/one.json"
"$mpirun" "${flags[@]}" -np 2 "$sy" "${common[@]}" --distributed > "$tmp/two.out"
grep -c '"world_size"' "$tmp/two.out" | grep -qx 1 || { echo "expected one JSON line (rank 0's)"; cat "$tmp/two.out"; exit 1; }
tail -1 "$tmp/two.out" > "$tmp/two.json"
python3 - "$tmp/one.json" "$tmp/two.json" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
assert two["world_size"] == 2 and one["world_size"] == 1, (one["world_size"], two["world_size"])
assert two["devices"] == ["cpu"], two["devices"]
assert two["bytes_per_step"] > 0 and two["comm_s"] > 0, two
assert 0 <= two["exposed_comm_s"] <= two["comm_s"], two
assert two["train_samples"] == one["train_samples"] == 3200, (one["train_samples"], two["train_samples"])
assert len(one["first_losses"]) == len(two["first_losses"]) == 50
worst = max(abs(a - b) for a, b in zip(one["first_losses"], two["first_losses"]))
assert worst <= 1e-4, f"first 50 losses differ by {worst}"
assert abs(one["final_loss"] - two["final_loss"]) <= 1e-4, (one["final_loss"], two["final_loss"])
assert abs(one["test_acc"] - two["test_acc"]) <= 1e-3, (one["test_acc"], two["test_acc"])
print(f"2 ranks match 1 process: 50 losses within {worst:.2g}, "
      f"{two['bytes_per_step']:.0f} bytes all-reduced per step")
PY

# A rank killed mid-run: the job ends, non-zero, within 60 s.
"$mpirun" "${flags[@]}" -np 2 "$sy" train --device cpu --epochs 50 --limit 20000 --batch 64 \
  --json --distributed > "$tmp/kill.out" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do  # rank 1's process, by its environment
  for pid in $(pgrep -f "switchyard.* train --device cpu --epochs 50" || true); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
      victim=$pid
    fi
  done
  [[ -n $victim ]] && break
  sleep 0.1
done
[[ -n $victim ]] || { echo "rank 1 never started"; kill "$job"; cat "$tmp/kill.out"; exit 1; }
sleep 2  # mid-run
kill -9 "$victim"
start=$SECONDS
rc=0
wait "$job" || rc=$?
took=$((SECONDS - start))
if ((rc == 0)); then echo "expected the job to fail after rank 1 was killed"; cat "$tmp/kill.out"; exit 1; fi
if ((took > 60)); then echo "the job took ${took} s to end after rank 1 died"; exit 1; fi
echo "rank 1 killed: the job ended with status $rc after ${took} s"
grep -i "rank 1\|signal 9\|killed" "$tmp/kill.out" | head -3
