#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CNN's (models/cnn.h) CPU training throughput at batch 128: Switchyard
# against PyTorch's C++ frontend (Debian's libtorch-dev, 1.13) on the same
# layers, Adam 1e-3 and one synthetic batch in memory, the loss read back
# every step. Runs alternate (Switchyard, libtorch 1 thread, libtorch 2
# threads, ...) and the medians are compared, since a shared VM drifts;
# libtorch is compared at its better thread setting.
#   bash scripts/install-deps.sh --bench   # libtorch-dev among others
#   bash bench/compare_libtorch_cnn.sh [REPEATS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
build=${2:-build}
sy="$build/tools/switchyard"
tc="$build/torch_cnn"
[[ -x "$sy" ]] || { echo "build first: cmake -S . -B $build && cmake --build $build -j2" >&2; exit 1; }
inc=/usr/include/torch/csrc/api/include
[[ -d "$inc" ]] || { echo "libtorch-dev missing: bash scripts/install-deps.sh --bench" >&2; exit 1; }
if [[ ! -x "$tc" || bench/torch_cnn.cpp -nt "$tc" ]]; then
  echo "compiling bench/torch_cnn.cpp against libtorch" >&2
  g++ -O2 -std=c++17 bench/torch_cnn.cpp -I"$inc" -o "$tc" -ltorch -ltorch_cpu -lc10
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
field() { grep -o "\"$1\": *[0-9.]*" | tail -1 | sed 's/.*: *//'; }
s_runs="" t1_runs="" t2_runs=""
for ((r = 0; r < reps; r++)); do
  "$sy" bench --devices cpu --ops model --sizes 128 --json "$tmp/sy.json" > /dev/null 2>&1
  s_runs+=" $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(next(x["median"] for x in r if x["workload"]=="cnn train step batch 128"))' "$tmp/sy.json")"
  t1_runs+=" $("$tc" --threads 1 --steps 30 | field samples_per_s)"
  t2_runs+=" $("$tc" --threads 2 --steps 30 | field samples_per_s)"
done
s=$(median <<<"$s_runs"); t1=$(median <<<"$t1_runs"); t2=$(median <<<"$t2_runs")
printf "%-22s %10s   %s\n" impl "median/s" "runs (samples/s)"
printf "%-22s %10s  %s\n" "switchyard cpu" "$s" "$s_runs"
printf "%-22s %10s  %s\n" "libtorch threads=1" "$t1" "$t1_runs"
printf "%-22s %10s  %s\n" "libtorch threads=2" "$t2" "$t2_runs"
awk -v s="$s" -v a="$t1" -v b="$t2" 'BEGIN{best = a > b ? a : b;
  printf "cnn train step, batch 128: switchyard / libtorch (best threads) = %.2fx samples/s (medians)\n", s / best}'
