#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite: the README's test command (.ci/run runs exactly this).
#   1. build/: the Release build (GCC); every ctest entry.
#   2. build-asan/: clang with AddressSanitizer and UndefinedBehaviorSanitizer;
#      the library and the CPU and Vulkan suites in SAN_SUITES. Any report in
#      Switchyard's code fails; driver leaks are suppressed by library
#      (tests/sanitizers/lsan.supp, one comment per entry).
#   3. The same build's libFuzzer targets, 30 s each from their seed corpora.
#   4. build-mingw/: Windows, cross-compiled with mingw-w64 (the library with
#      the Vulkan backend, the CLI, the C API test and the CPU suites in
#      WIN_SUITES); the CPU suites and the C API test run under Wine.
#   Before 2: build-shared-clang/, the shared library and the CLI built with
#   clang -Werror, installed and used by the example apps
#   (tests/install_consumer.sh).
# Options: --quick (step 1 only); --tsan (step 1, then a ThreadSanitizer build
# of the thread, scheduler, data, device and files suites in build-tsan/).
# Each step prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
step() { echo "== test.sh: $1 ($(( SECONDS - t0 )) s)"; t0=$SECONDS; }
t0=$SECONDS
if [[ $mode == all ]]; then bash scripts/install-deps.sh --windows; else bash scripts/install-deps.sh; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSWITCHYARD_WERROR=ON
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure
step "Release build and ctest done"
[[ $mode == --quick ]] && exit 0

SAN_SUITES=(test_data test_errors test_scheduler test_threads test_files test_serialize test_autograd test_device
            test_faults test_ops test_grad test_gpu test_vulkan test_vk_debug test_parallel test_custom test_half)
run_suites() {  # run_suites BUILD_DIR: each suite binary whole (one process each)
  for s in "${SAN_SUITES[@]}"; do
    echo "-- $s"
    "$1/tests/$s" --gtest_brief=1 || { echo "test.sh: $s failed under $2" >&2; exit 1; }
  done
}
if [[ $mode == --tsan ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DSWITCHYARD_SANITIZE=thread -DSWITCHYARD_CUDA=OFF
  cmake --build build-tsan -j2 --target "${SAN_SUITES[@]}"
  step "ThreadSanitizer build"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_suites build-tsan ThreadSanitizer
  step "ThreadSanitizer suites"
  exit 0
fi

# The shared library (BUILD_SHARED_LIBS=ON), built with clang and warnings
# as errors (the library with every backend, the CLI and the bench): installed
# to a temporary prefix and used by samples/embed and samples/embed_c; its
# SONAME and exported symbols checked (tests/install_consumer.sh). CUDA's
# kernels for one architecture only: step 1 built them for every one, and
# this build checks the library's shape, not ptxas (a seventh of its nvcc
# time).
CC=clang CXX=clang++ cmake -S . -B build-shared-clang -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DSWITCHYARD_TESTS=OFF -DSWITCHYARD_SAMPLES=OFF -DCMAKE_CXX_FLAGS=-Werror -DCMAKE_C_FLAGS=-Werror \
  -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
cmake --build build-shared-clang -j2
bash tests/install_consumer.sh build-shared-clang .
step "shared library (clang -Werror): build, install, example apps"

# Without libshaderc (SWITCHYARD_SHADERC=OFF): custom GLSL kernels say why
# they are unavailable and everything else works (test_custom checks the
# message; the Release build above runs them).
# Line tables only (-gline-tables-only): the reports keep their file:line
# frames, and compiling and linking take a fifth less (test_ops.cpp 31 s to
# 22 s) than with full debug information.
CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DSWITCHYARD_SANITIZE=address,undefined \
  -DSWITCHYARD_FUZZ=ON -DSWITCHYARD_CUDA=OFF -DSWITCHYARD_SHADERC=OFF
cmake --build build-asan -j2 --target "${SAN_SUITES[@]}" fuzz_idx fuzz_device_name fuzz_cli fuzz_safetensors \
  switchyard_cli test_c_api
step "ASan+UBSan build"
# The Vulkan loader unloads the driver and the layer at exit, before
# LeakSanitizer looks: preloaded, they stay mapped, so their leaks are named
# by library and suppressed (tests/sanitizers/lsan.supp). Vulkan objects we
# fail to destroy are still caught, by the validation layer. Out-of-memory
# tests ask for more than ASan's allocator allows: it returns null instead
# of stopping, as malloc does.
# (awk reads ldconfig's whole output: exiting early would kill ldconfig with
# SIGPIPE, which pipefail turns into a failure of this script.)
preload=""
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
for lib in libvulkan.so.1 libvulkan_lvp.so libVkLayer_khronos_validation.so; do
  p=$("$ldconfig" -p 2>/dev/null | awk -v l="$lib" '!f && $1 == l && /x86-64|x86_64|64bit/ {print $NF; f = 1}' || true)
  if [[ -n $p ]]; then preload=${preload:+$preload:}$p; fi
done
LD_PRELOAD=$preload ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0" \
  run_suites build-asan "ASan+UBSan"
# The C API from C (a small model trained by this build's CLI first).
c_api=$(mktemp -d)
build-asan/tools/switchyard train --device cpu --epochs 1 --limit 1000 --test-limit 1000 \
  --save "$c_api/mlp.safetensors" --json > /dev/null
LD_PRELOAD=$preload ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0" \
  SWITCHYARD_POISON=1 build-asan/tests/test_c_api "$c_api/mlp.safetensors" "$c_api" \
  /usr/share/datasets/fashion-mnist || { echo "test.sh: test_c_api failed under ASan+UBSan" >&2; exit 1; }
rm -rf "$c_api"
# The simulated devices' memory paths: the mobile GPU's shadow copies of
# non-coherent memory (also with the ring in it) and an APU's fallback heap.
for sim in mobile mobile-staging apu; do
  LD_PRELOAD=$preload ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0" \
    SWITCHYARD_VK_SIMULATE=${sim%-staging} SWITCHYARD_VK_FORCE_STAGING=$([[ $sim == *-staging ]] && echo 1 || echo 0) \
    build-asan/tests/test_vulkan --gtest_brief=1 --gtest_filter='Vulkan.*-*LongLoops*' ||
    { echo "test.sh: test_vulkan (simulated $sim) failed under ASan+UBSan" >&2; exit 1; }
done
step "ASan+UBSan suites"
bash scripts/fuzz.sh build-asan 30
step "fuzz smoke runs"

# test_threads is left out: under Wine it hangs in about one run of three
# (EachTrainingItsOwnModelGetsTheSequentialLosses/cpu_2_threads; open).
WIN_SUITES=(test_ops test_grad test_autograd test_layers test_scheduler test_errors test_device test_custom)
cmake -S . -B build-mingw -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake -DCMAKE_BUILD_TYPE=Release \
  -DSWITCHYARD_CUDA=OFF > /dev/null
cmake --build build-mingw -j2 --target switchyard_cli test_c_api "${WIN_SUITES[@]}" test_threads
step "Windows cross-build (mingw-w64)"
# Under Wine there is no Vulkan driver: the CPU (and mock) cases run, the
# Vulkan ones are filtered out rather than reported as skipped.
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
export WINEPREFIX=$PWD/build-mingw/wineprefix WINEDEBUG=-all SWITCHYARD_REQUIRE_VULKAN=0
for s in "${WIN_SUITES[@]}"; do
  echo "-- $s.exe (Wine)"
  timeout 300 "$wine" "build-mingw/tests/$s.exe" --gtest_brief=1 --gtest_filter='-*vulkan*:*Vulkan*' ||
    { echo "test.sh: $s.exe failed under Wine" >&2; exit 1; }
done
timeout 300 "$wine" build-mingw/tools/switchyard.exe train --device cpu --epochs 1 --limit 1000 --test-limit 1000 \
  --save build-mingw/c_api_mlp.safetensors --json | tail -1
timeout 300 "$wine" build-mingw/tests/test_c_api.exe build-mingw/c_api_mlp.safetensors build-mingw \
  /usr/share/datasets/fashion-mnist || { echo "test.sh: test_c_api.exe failed under Wine" >&2; exit 1; }
unset WINEPREFIX WINEDEBUG SWITCHYARD_REQUIRE_VULKAN
step "Windows suites under Wine"
