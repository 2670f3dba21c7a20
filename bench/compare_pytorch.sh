#!/usr/bin/env bash
# Training throughput and peak memory: Switchyard's CPU backend against
# PyTorch on the same machine, model (784-256-128-10 MLP), optimizer (Adam
# 1e-3), data (Fashion-MNIST) and batch size, in one run. PyTorch runs at
# 1 and 2 threads and is credited with its better result.
#   bash scripts/install-deps.sh --bench   # python3-torch, numpy, OpenBLAS pthread
#   bash bench/compare_pytorch.sh [EPOCHS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-2}
build=${2:-build}
sy="$build/tools/switchyard"
[[ -x "$sy" ]] || { echo "build first: cmake -S . -B $build && cmake --build $build -j2" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "PyTorch missing: bash scripts/install-deps.sh --bench" >&2; exit 1; }

field() { grep -o "\"$1\": *[0-9.]*" | tail -1 | sed 's/.*: *//'; }
printf "%-6s %-22s %14s %10s %12s\n" batch impl samples/s test_acc peak_rss_MB
for batch in 128 32; do
  s=$("$sy" train --device cpu --epochs "$epochs" --batch "$batch" --opt adam --lr 1e-3 --hidden 256,128 --json | tail -1)
  s_rate=$(field train_samples_per_s <<<"$s"); s_acc=$(field test_acc <<<"$s"); s_rss=$(field peak_rss_mb <<<"$s")
  printf "%-6s %-22s %14s %10s %12s\n" "$batch" "switchyard cpu" "$s_rate" "$s_acc" "$s_rss"
  best=0; best_rss=0
  for t in 1 2; do
    p=$(/usr/bin/python3 bench/torch_mlp.py --epochs "$epochs" --batch "$batch" --threads "$t")
    p_rate=$(field train_samples_per_s <<<"$p"); p_acc=$(field test_acc <<<"$p"); p_rss=$(field peak_rss_mb <<<"$p")
    printf "%-6s %-22s %14s %10s %12s\n" "$batch" "pytorch threads=$t" "$p_rate" "$p_acc" "$p_rss"
    if awk "BEGIN{exit !($p_rate > $best)}"; then best=$p_rate; best_rss=$p_rss; fi
  done
  awk -v s="$s_rate" -v p="$best" -v sr="$s_rss" -v pr="$best_rss" -v b="$batch" \
    'BEGIN{printf "batch %s: switchyard/pytorch(best) = %.2fx samples/s, peak RSS %.0f MB vs %.0f MB\n", b, s/p, sr, pr}'
done
