#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the libFuzzer targets of a fuzz build, each for SECONDS, from its seed
# corpus (fuzz/corpus/<target>); new inputs go to a scratch folder, findings
# (crash-*, leak-*, oom-*, timeout-*) to fuzz-findings/. Prints executions per
# target; exits 1 on any finding.
#   bash scripts/fuzz.sh BUILD_DIR [SECONDS=30] [TARGET...]
# Build: CC=clang CXX=clang++ cmake -S . -B build-asan -DSWITCHYARD_FUZZ=ON \
#          -DSWITCHYARD_SANITIZE=address,undefined -DSWITCHYARD_CUDA=OFF
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz.sh BUILD_DIR [SECONDS] [TARGET...]}
secs=${2:-30}
shift $(($# >= 2 ? 2 : 1))
targets=("$@")
((${#targets[@]})) || targets=(fuzz_idx fuzz_device_name fuzz_cli fuzz_safetensors)
findings=$PWD/fuzz-findings
mkdir -p "$findings"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t"
  log=$scratch/$t.log
  # close_fd_mask=3: the CLI's help and error text would flood the log.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -close_fd_mask=3 -artifact_prefix="$findings/$t-" \
    "$scratch/$t" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if [[ $rc -ne 0 ]]; then
    echo "fuzz: $t: FINDING after ${execs:-?} executions (exit $rc):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20
    status=1
  else
    echo "fuzz: $t: ${execs:-?} executions in ${secs} s, 0 findings"
  fi
done
exit $status
