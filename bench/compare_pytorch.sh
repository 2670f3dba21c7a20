#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Training throughput and peak memory: Switchyard's CPU backend against
# PyTorch on the same machine, model (784-256-128-10 MLP), optimizer (Adam
# 1e-3), data (Fashion-MNIST) and batch size, in one run. Runs alternate
# (Switchyard, PyTorch, Switchyard, ...) and the medians are compared, since
# a shared VM drifts. PyTorch also runs once at 2 threads to show that
# 1 thread is its best setting on two cores.
#   bash scripts/install-deps.sh --bench   # python3-torch, numpy, OpenBLAS pthread
#   bash bench/compare_pytorch.sh [REPEATS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
build=${2:-build}
sy="$build/tools/switchyard"
[[ -x "$sy" ]] || { echo "build first: cmake -S . -B $build && cmake --build $build -j2" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "PyTorch missing: bash scripts/install-deps.sh --bench" >&2; exit 1; }

field() { grep -o "\"$1\": *[0-9.]*" | tail -1 | sed 's/.*: *//'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "one epoch of Fashion-MNIST per run, $reps runs each, medians"
printf "%-6s %-20s %12s %30s %9s %9s\n" batch impl median/s "runs (samples/s)" test_acc rss_MB
for batch in 128 32; do
  s_runs=""; p_runs=""
  for ((r = 0; r < reps; r++)); do
    s=$("$sy" train --device cpu --epochs 1 --batch "$batch" --opt adam --lr 1e-3 --hidden 256,128 --json | tail -1)
    s_runs+=" $(field train_samples_per_s <<<"$s")"
    p=$(/usr/bin/python3 bench/torch_mlp.py --epochs 1 --batch "$batch" --threads 1)
    p_runs+=" $(field train_samples_per_s <<<"$p")"
  done
  p2=$(/usr/bin/python3 bench/torch_mlp.py --epochs 1 --batch "$batch" --threads 2)
  s_med=$(median <<<"$s_runs"); p_med=$(median <<<"$p_runs")
  printf "%-6s %-20s %12s %30s %9s %9s\n" "$batch" "switchyard cpu" "$s_med" "$s_runs" \
    "$(field test_acc <<<"$s")" "$(field peak_rss_mb <<<"$s")"
  printf "%-6s %-20s %12s %30s %9s %9s\n" "$batch" "pytorch threads=1" "$p_med" "$p_runs" \
    "$(field test_acc <<<"$p")" "$(field peak_rss_mb <<<"$p")"
  printf "%-6s %-20s %12s %30s %9s %9s\n" "$batch" "pytorch threads=2" \
    "$(field train_samples_per_s <<<"$p2")" "" "$(field test_acc <<<"$p2")" "$(field peak_rss_mb <<<"$p2")"
  awk -v s="$s_med" -v p="$p_med" -v b="$batch" \
    'BEGIN{printf "batch %s: switchyard / pytorch = %.2fx samples/s (medians)\n", b, s/p}'
done
