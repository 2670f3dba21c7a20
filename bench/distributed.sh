#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Data-parallel scaling of MLP training (784-256-128-10, Adam, Fashion-MNIST,
# global batch 128) on the CPU: one process against `mpirun -np 2` (each
# rank on half of every batch), every process with one compute thread
# (SWITCHYARD_CPU_THREADS=1, OPENBLAS_NUM_THREADS=1). Runs alternate and
# medians are compared. Prints samples/s, the speed-up, the bytes all-reduced
# per step, and the share of the training time spent waiting on
# communication that was not hidden behind compute. Two ceilings for the
# machine, measured in the same runs: two independent processes at half the
# batch each, side by side with no communication at all; and a bare blocking
# MPI_Allreduce of the step's gradients between two ranks doing nothing else
# (build/bench/bench_allreduce).
#   bash bench/distributed.sh [REPEATS] [BUILD_DIR] [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
build=${2:-build}
limit=${3:-60000}
sy="$build/tools/switchyard"
[[ -x "$sy" ]] || { echo "build first: cmake -S . -B $build && cmake --build $build -j2" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun missing: bash scripts/install-deps.sh" >&2; exit 1; }
export SWITCHYARD_CPU_THREADS=1 OPENBLAS_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 -x SWITCHYARD_CPU_THREADS -x OPENBLAS_NUM_THREADS)
args=(train --device cpu --epochs 1 --limit "$limit" --batch 128 --losses 0 --json)

field() { grep -o "\"$1\": *[0-9.e+-]*" | tail -1 | sed 's/.*: *//'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

half=(train --device cpu --epochs 1 --limit $((limit / 2)) --batch 64 --losses 0 --json)
one=""; two=""; pair=""; bytes=""; exposed=""; comm=""; secs=""
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < reps; r++)); do
  a=$("$sy" "${args[@]}" | tail -1)
  one+=" $(field train_samples_per_s <<<"$a")"
  "$sy" "${half[@]}" >"$tmp/p0" & p0=$!
  "$sy" "${half[@]}" >"$tmp/p1" & p1=$!
  wait $p0
  wait $p1
  pair+=" $(awk -v a="$(field train_samples_per_s <"$tmp/p0")" -v b="$(field train_samples_per_s <"$tmp/p1")" 'BEGIN{print a + b}')"
  b=$("${mpi[@]}" "$sy" "${args[@]}" --distributed | tail -1)
  sps=$(field train_samples_per_s <<<"$b")
  two+=" $sps"
  bytes=$(field bytes_per_step <<<"$b")
  comm+=" $(field comm_s <<<"$b")"
  exposed+=" $(field exposed_comm_s <<<"$b")"
  secs+=" $(awk -v n="$(field train_samples <<<"$b")" -v s="$sps" 'BEGIN{print n / s}')"
done
m1=$(median <<<"$one"); m2=$(median <<<"$two")
printf "MLP 784-256-128-10, global batch 128, %s samples, %s runs each (alternating), medians\n" "$limit" "$reps"
printf "%-28s %10s   runs: %s\n" "1 process, 1 thread" "$m1" "$one"
printf "%-28s %10s   runs: %s\n" "mpirun -np 2, 1 thread each" "$m2" "$two"
awk -v a="$m1" -v b="$m2" 'BEGIN{printf "speed-up %.2fx\n", b / a}'
mp=$(median <<<"$pair")
printf "%-28s %10s   runs: %s\n" "2 processes, no comm, b 64" "$mp" "$pair"
awk -v a="$m1" -v b="$mp" 'BEGIN{printf "ceiling without communication %.2fx\n", b / a}'
printf "all-reduced per step: %s bytes (gradients, plus the global batch size)\n" "$bytes"
if [[ -x "$build/bench/bench_allreduce" ]]; then
  bare=$("${mpi[@]}" "$build/bench/bench_allreduce" "$(awk -v b="$bytes" 'BEGIN{printf "%d", b / 4}')" 2000 | tail -1)
  us=$(field us_per_call <<<"$bare")
  ius=$(field iallreduce_us_per_call <<<"$bare")
  sus=$(field switchyard_us_per_call <<<"$bare")
  awk -v us="$us" -v ius="$ius" -v sus="$sus" -v b="$bytes" -v sps="$m2" \
    'BEGIN{step = 128 / sps * 1e6; printf "bare MPI_Allreduce of %d bytes, 2 ranks doing nothing else: %.0f us, %.1f%% of a %.0f us step (MPI_Iallreduce, polled: %.0f us; switchyard all_reduce of a cpu tensor, its ring plus a copy in and out: %.0f us)\n", b, us, 100 * us / step, step, ius, sus}'
fi
awk -v c="$(median <<<"$comm")" -v e="$(median <<<"$exposed")" -v t="$(median <<<"$secs")" \
  'BEGIN{printf "communication in flight %.3f s, of which waited on (not hidden) %.3f s: %.1f%% of %.2f s of training\n", c, e, 100 * e / t, t}'
