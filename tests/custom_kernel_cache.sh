#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The custom-kernel disk cache across processes: the first process compiles
# the kernel and writes the entry; a second process loads it (no compile);
# a corrupted or truncated entry is counted, compiled again and replaced.
#   custom_kernel_cache.sh PROBE [DEVICE]
set -euo pipefail
probe=$1
device=${2:-vulkan:0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SWITCHYARD_KERNEL_CACHE=$dir/kernels

run() {  # run LABEL EXPECTED: one process; its counters must contain EXPECTED
  local out
  out=$("$probe" "$device")
  echo "$1: $out"
  if [[ $out != *"$2"* ]]; then
    echo "custom_kernel_cache.sh: expected '$2' in the $1's counters" >&2
    exit 1
  fi
}
run "first process" "compiles=1 disk_hits=0 corrupt=0 disk_writes=1"
entry=$(ls "$dir"/kernels/bias_silu-*.spv)
run "second process" "compiles=0 disk_hits=1 corrupt=0 disk_writes=0"
# One byte of the SPIR-V flipped: the entry's hash no longer matches.
size=$(stat -c %s "$entry")
printf '\xa5' | dd of="$entry" bs=1 seek=$((size - 9)) conv=notrunc status=none
run "after a flipped byte" "compiles=1 disk_hits=0 corrupt=1 disk_writes=1"
run "after the rewrite" "compiles=0 disk_hits=1 corrupt=0"
truncate -s 20 "$entry"
run "after truncation" "compiles=1 disk_hits=0 corrupt=1 disk_writes=1"
echo "custom_kernel_cache.sh: ok"
