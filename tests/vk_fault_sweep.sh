#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails each Vulkan call of a short training run in turn, one process per
# call, with VK_ERROR_OUT_OF_DEVICE_MEMORY and with VK_ERROR_DEVICE_LOST
# (only where the specification allows each), in both memory modes
# (zero-copy, and the staging path of discrete GPUs), and checks every outcome
# (VulkanFault.DISABLED_OneFaultDuringTraining in test_faults.cpp) under the
# validation layer. Usage: vk_fault_sweep.sh TEST_FAULTS_BINARY
set -uo pipefail
bin=$1
filter=(--gtest_also_run_disabled_tests --gtest_filter=VulkanFault.*)
fail=0
for mode in zero-copy staging; do
results=(VK_ERROR_OUT_OF_DEVICE_MEMORY VK_ERROR_DEVICE_LOST)
[[ $mode == staging ]] && export SWITCHYARD_VK_FORCE_STAGING=1
for result in "${results[@]}"; do
  total=$(SWITCHYARD_VK_FAULT=$result:0 "$bin" "${filter[@]}" 2>&1 |
    sed -n 's/.*vulkan fault calls: \([0-9]*\).*/\1/p')
  if [[ -z $total || $total -lt 10 ]]; then
    echo "FAIL: $result: could not count the calls (got '$total')"
    fail=1
    continue
  fi
  fired=0
  past=0  # runs that ended before their call n (see below)
  declare -A sites=()
  for ((n = 1; n <= total; n++)); do
    out=$(SWITCHYARD_VK_FAULT=$result:$n timeout 120 "$bin" "${filter[@]}" 2>&1)
    rc=$?
    fn=$(sed -n 's/.*fired: 1 in \(vk[A-Za-z]*\).*/\1/p' <<<"$out")
    [[ -n $fn ]] && fired=$((fired + 1)) && sites[$fn]=1
    # How many vkGetFenceStatus polls a run makes depends on how far the
    # device has got (in the staging mode, with transfers in flight), so a
    # run may end before call n: only then may its fault not fire.
    if [[ -z $fn ]]; then
      calls=$(sed -n 's/.*vulkan fault calls: \([0-9]*\) fired: 0.*/\1/p' <<<"$out")
      if [[ -n $calls && $calls -lt $n ]]; then
        past=$((past + 1))
      else
        echo "FAIL: $result at call $n: the fault did not fire in a run of ${calls:-?} calls"
        fail=1
      fi
    fi
    if [[ $rc -ne 0 ]] || grep -q '\[vulkan validation\]' <<<"$out"; then
      echo "FAIL: $result at call $n (${fn:-not fired}), exit $rc:"
      grep -E 'Failure|error|validation|Expected|Which is|what' <<<"$out" | head -15
      fail=1
    fi
  done
  if [[ $((fired + past)) -ne $total || $past -gt 5 ]]; then
    echo "FAIL: $mode, $result: $fired of $total injected faults fired, $past runs ended first (the run changed?)"
    fail=1
  fi
  echo "$mode, $result: $total calls swept, $fired faults fired ($past runs polled less and ended first), in ${#sites[@]} functions: ${!sites[*]}"
  unset sites
done
done
[[ $fail -eq 0 ]] && echo ok
exit $fail
