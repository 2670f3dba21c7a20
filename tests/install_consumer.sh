#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The installed package, used as an app developer uses it (issue: an app
# embeds Switchyard from an install, never from its build tree):
#   1. cmake --install to a temporary prefix; the layout (headers, library,
#      CMake package, pkg-config file, the CLI) and no loose shader files;
#   2. samples/embed built in its own directory with find_package against
#      that prefix only, run on a model file the installed CLI trained: its
#      test accuracy equals `switchyard eval`'s, and it times every device;
#   3. the same app built with g++ and `pkg-config --cflags --libs`, and the
#      C example (samples/embed_c, the C API) with gcc -std=c99 -Wall
#      -Werror and pkg-config: the same accuracy;
#   4. Switchyard as a subdirectory of another project: the parent's build
#      type stays as it was, and no test, sample or bench target is made.
# A shared build (BUILD_SHARED_LIBS=ON) also has its SONAME and exported
# symbols checked.
#   usage: install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(readlink -f "$1") src=$(readlink -f "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run LOG CMD...: the command's output goes to LOG, shown if it fails
  local log=$1; shift
  "$@" > "$log" 2>&1 || { cat "$log"; fail "$*"; }
}

echo "--- 1. install"
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
libdir=${libdir:-lib}
run "$tmp/install.log" cmake --install "$build" --prefix "$tmp/prefix"
p="$tmp/prefix"
shared=0
[[ -e "$p/$libdir/libswitchyard.so" ]] && shared=1
lib="$p/$libdir/libswitchyard.a"
((shared)) && lib=$(readlink -f "$p/$libdir/libswitchyard.so")
for f in include/switchyard/switchyard.h include/switchyard/version.h include/switchyard/switchyard_c.h \
         include/switchyard/backend/program.h "${lib#"$p/"}" \
         "$libdir/cmake/Switchyard/SwitchyardConfig.cmake" "$libdir/cmake/Switchyard/SwitchyardConfigVersion.cmake" \
         "$libdir/cmake/Switchyard/SwitchyardTargets.cmake" "$libdir/pkgconfig/switchyard.pc" bin/switchyard \
         share/doc/switchyard/LICENSE; do
  [[ -e "$p/$f" ]] || fail "$f not installed"
done
if find "$p" -name '*.spv' -o -name '*.comp' -o -name '*.glsl' | grep -q .; then
  fail "loose shader files installed: the SPIR-V belongs in the library"
fi
grep -q "SWITCHYARD_VERSION \"" "$p/include/switchyard/version.h" || fail "version.h has no version"
# Relocatable: no path of this build or source tree, nor of a system library
# directory, in the package files.
if grep -nE "$build|$src|/usr/lib|/usr/local/lib" "$p/$libdir/cmake/Switchyard/"*.cmake "$p/$libdir/pkgconfig/switchyard.pc"; then
  fail "absolute paths of this machine in the installed package files"
fi
echo "installed: $(find "$p" -type f | wc -l) files, library $(du -k "$lib" | cut -f1) KiB, CLI $(du -k "$p/bin/switchyard" | cut -f1) KiB"
if ((shared)); then
  # The shared library exports namespace switchyard (by mangled name) and
  # sy_* C functions, nothing of OpenBLAS, the CUDA runtime or the STL.
  readelf -d "$lib" | grep -q "SONAME.*libswitchyard\.so\.[0-9]*\.[0-9]*\]" || fail "no versioned SONAME"
  nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' > "$tmp/exports"
  others=$(grep -Ev '^(_ZN10switchyard|_ZNK10switchyard|_ZT[VIST]N10switchyard|_ZTTN10switchyard|_ZTh.*_N10switchyard|_ZTv.*_N10switchyard|_ZGVN10switchyard|_ZZN10switchyard|_ZZNK10switchyard|sy_)' "$tmp/exports" || true)
  [[ -z "$others" ]] || fail "exported outside namespace switchyard: $(head -5 <<< "$others")"
  echo "exports: $(wc -l < "$tmp/exports") symbols, all in namespace switchyard or sy_*"
fi

echo "--- 2. samples/embed with find_package, against the prefix only"
run "$tmp/embed-configure.log" cmake -S "$src/samples/embed" -B "$tmp/embed" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$p" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
grep -q "$p/$libdir/cmake/Switchyard" "$tmp/embed/CMakeCache.txt" || fail "Switchyard not found in the prefix"
run "$tmp/embed-build.log" cmake --build "$tmp/embed"
run "$tmp/train.log" "$p/bin/switchyard" train --device cpu --epochs 1 --limit 5000 \
    --save "$tmp/model.safetensors" --json
eval_acc=$("$p/bin/switchyard" eval --model "$tmp/model.safetensors" --device cpu --json |
           sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p')
# The app's best device is the cpu here (SWITCHYARD_DEVICE), as the eval's.
SWITCHYARD_DEVICE=cpu "$tmp/embed/classify" "$tmp/model.safetensors" /usr/share/datasets/fashion-mnist 50 |
  tee "$tmp/classify.out"
app_acc=$(sed -n 's/^test accuracy on cpu: \([0-9.]*\) .*/\1/p' "$tmp/classify.out")
[[ -n "$eval_acc" && -n "$app_acc" ]] || fail "no accuracy printed"
python3 -c "import sys; sys.exit(abs($eval_acc - $app_acc) > 1e-4)" ||
  fail "classify's accuracy $app_acc differs from switchyard eval's $eval_acc"
grep -q "^latency on cpu: " "$tmp/classify.out" || fail "no cpu latency"
echo "example app: $(du -k "$tmp/embed/classify" | cut -f1) KiB"
"$p/bin/switchyard" devices --json > "$tmp/devices.json" || fail "switchyard devices"
available=$(python3 -c 'import json, sys
print(" ".join(d["device"] for d in json.load(open(sys.argv[1])) if d.get("available")))' "$tmp/devices.json")
for d in $available; do
  grep -q "^latency on $d: " "$tmp/classify.out" || fail "no latency on $d"
done

echo "--- 3. the same app with pkg-config"
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++20 -O2 "$src/samples/embed/classify.cpp" -o "$tmp/classify_pc" \
    $(pkg-config --cflags --libs switchyard)
SWITCHYARD_DEVICE=cpu LD_LIBRARY_PATH="$p/$libdir" \
  "$tmp/classify_pc" "$tmp/model.safetensors" /usr/share/datasets/fashion-mnist 5 |
  grep "^test accuracy on cpu: $app_acc " ||
  fail "the pkg-config build gives another accuracy"

echo "--- 3b. the C example: gcc -std=c99 -Wall -Werror with pkg-config"
# shellcheck disable=SC2046
run "$tmp/embed_c-build.log" gcc -std=c99 -Wall -Werror "$src/samples/embed_c/classify.c" \
    -o "$tmp/classify_c" $(pkg-config --cflags --libs switchyard)
SWITCHYARD_DEVICE=cpu LD_LIBRARY_PATH="$p/$libdir" \
  "$tmp/classify_c" "$tmp/model.safetensors" /usr/share/datasets/fashion-mnist 20 | tee "$tmp/classify_c.out"
grep -q "^test accuracy on cpu: $app_acc " "$tmp/classify_c.out" ||
  fail "the C example gives another accuracy than switchyard eval ($eval_acc)"
for d in $available; do
  grep -q "^latency on $d: " "$tmp/classify_c.out" || fail "the C example: no latency on $d"
done
echo "C example app: $(du -k "$tmp/classify_c" | cut -f1) KiB"

echo "--- 4. as a subdirectory of another project"
mkdir -p "$tmp/parent"
cat > "$tmp/parent/CMakeLists.txt" <<PARENT
cmake_minimum_required(VERSION 3.25)
project(parent LANGUAGES CXX)
add_subdirectory("$src" switchyard)
message(STATUS "parent build type: [\${CMAKE_BUILD_TYPE}]")
add_executable(app "$src/samples/embed/classify.cpp")
target_link_libraries(app PRIVATE Switchyard::switchyard)
PARENT
run "$tmp/parent.log" env -u CMAKE_BUILD_TYPE cmake -S "$tmp/parent" -B "$tmp/parent-build"
grep -q "parent build type: \[\]" "$tmp/parent.log" || fail "the parent's build type was changed"
targets=$(cmake --build "$tmp/parent-build" --target help)
for t in test_ops test_conformance sample_01_pick_device switchyard_cli bench_files_io switchyard_models; do
  if grep -qw "$t" <<< "$targets"; then fail "target $t made in a parent project"; fi
done
grep -qw switchyard <<< "$targets" || fail "no switchyard library target"
echo ok
