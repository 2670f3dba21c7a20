#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The short GPU check, for a lent machine with minutes of GPU time (where
# scripts/gpu-check.sh, which builds and runs the whole suite, does not
# fit). Two steps:
#   bash scripts/gpu-quick.sh pack [BUILD_DIR]   on the development machine:
#       strips the CLI, test_conformance, test_gpu and bench_half_matmul of an existing Release
#       build (default build/, CUDA architectures including the lent card's)
#       into build-carry/bins.tar.gz (about 20 MB);
#   bash scripts/gpu-quick.sh run [OUT]          on the GPU machine, with
#       build-carry/ carried over: unpacks the binaries and, each step under
#       a timeout, writes to OUT (default build-carry/out):
#   1. nvidia-smi and `switchyard devices`;
#   2. correctness: the conformance suite on cuda:0, the GEMM cases on
#      vulkan:0 under every GEMM variant (SWITCHYARD_VK_GEMM_VARIANT=large,
#      medium, small, gpu; SWITCHYARD_VK_GEMM_SPLIT_K=3) and the default,
#      and the training step-for-step test on both;
#   3. `switchyard bench --devices cuda:0,vulkan:0 --baseline cuda:0 --ops
#      gemm,model`, then `switchyard tune --device vulkan:0`, then the GEMM
#      bench on vulkan:0 again with the tuned variants;
#   4. the CPU backend's MLP samples/s at 1, 2, 4, 8 and all threads, with
#      the core count and OpenBLAS's core name;
#   5. f32, bf16 and f16 GEMMs of 2048^3 through the ops on vulkan:0 and
#      cuda:0 (bench_half_matmul; docs/precision.md).
# Each step's log is OUT/<step>.log; OUT/summary.txt has one line a step.
# Under 10 minutes on an H100 (the device tool's per-call limit).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case $mode in
  pack)
    b=${2:-build}
    mkdir -p build-carry/bin
    for f in tools/switchyard tests/test_conformance tests/test_gpu bench/bench_half_matmul; do
      strip -o "build-carry/bin/$(basename "$f")" "$b/$f" || exit 1
    done
    tar -C build-carry -czf build-carry/bins.tar.gz bin && rm -rf build-carry/bin
    ls -l build-carry/bins.tar.gz
    exit 0
    ;;
  run) ;;
  *)
    echo "usage: $0 pack [BUILD_DIR] | run [OUT]" >&2
    exit 2
    ;;
esac
out=${2:-build-carry/out}
mkdir -p "$out"
tar -C build-carry -xzf build-carry/bins.tar.gz || exit 1
bin=build-carry/bin
sy=$bin/switchyard
summary=$out/summary.txt
: >"$summary"
step() {  # step NAME TIMEOUT CMD...: runs it, logs it, one summary line
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-36s %-6s %4d s\n' "$name" "$([[ $rc -eq 0 ]] && echo ok || echo "rc=$rc")" \
    $((SECONDS - t0)) | tee -a "$summary"
}
step gpu 20 nvidia-smi
step devices 60 "$sy" devices
step conformance_cuda 240 "$bin/test_conformance" --gtest_filter='*cuda_0*'
step gemm_vulkan_default 120 "$bin/test_conformance" --gtest_filter='*vulkan_0_gemm'
for v in large medium small gpu; do
  step "gemm_vulkan_$v" 120 env SWITCHYARD_VK_GEMM_VARIANT=$v "$bin/test_conformance" \
    --gtest_filter='*vulkan_0_gemm'
done
step gemm_vulkan_split_k 120 env SWITCHYARD_VK_GEMM_SPLIT_K=3 "$bin/test_conformance" \
  --gtest_filter='*vulkan_0_gemm'
step training_step_for_step 240 "$bin/test_gpu" \
  --gtest_filter='*TrainingMatchesTheCpuStepForStep/cuda_0:*TrainingMatchesTheCpuStepForStep/vulkan_0'
step bench 300 "$sy" bench --devices cuda:0,vulkan:0 --baseline cuda:0 --ops gemm,model \
  --json "$out/bench.json"
export SWITCHYARD_VK_GEMM_TUNING=$(cd "$out" && pwd)/vk_gemm_tuning.txt
step tune 300 "$sy" tune --device vulkan:0
step bench_tuned 240 "$sy" bench --devices cuda:0,vulkan:0 --baseline cuda:0 --ops gemm \
  --json "$out/bench_tuned.json"
unset SWITCHYARD_VK_GEMM_TUNING
# The CPU: the bench's model group (synthetic batches: no dataset needed).
{
  echo "cores: $(nproc) logical, $(lscpu -p=core 2>/dev/null | grep -v '^#' | sort -u | wc -l) physical"
  OPENBLAS_VERBOSE=2 "$sy" devices 2>&1 | grep -i "core" | head -2
} >"$out/cpu_facts.log" 2>&1
threads="1 2 4 8"
[[ " $threads " == *" $(nproc) "* ]] || threads="$threads $(nproc)"
for t in $threads; do
  step "cpu_mlp_threads_$t" 180 env SWITCHYARD_CPU_THREADS="$t" "$sy" bench --devices cpu \
    --ops model --quick
  grep -h "mlp train step" "$out/cpu_mlp_threads_$t.log" | sed "s/^/  threads $t: /" >>"$summary"
done
cat "$out/cpu_facts.log" >>"$summary"
for d in vulkan:0 cuda:0; do
  step "half_gemm_${d%:0}" 120 "$bin/bench_half_matmul" "$d" 2048 5
  grep -hE "^  (f32|bf16|f16) " "$out/half_gemm_${d%:0}.log" | sed "s/^/  $d: /" >>"$summary"
done
