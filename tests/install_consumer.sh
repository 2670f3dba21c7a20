#!/usr/bin/env bash
# The installed package, used as an app developer uses it (issue: an app
# embeds Switchyard from an install, never from its build tree):
#   1. cmake --install to a temporary prefix; the layout (headers, library,
#      CMake package, pkg-config file, the CLI) and no loose shader files;
#   2. samples/embed built in its own directory with find_package against
#      that prefix only, run on a model file the installed CLI trained: its
#      test accuracy equals `switchyard eval`'s, and it times every device;
#   3. the same app built with g++ and `pkg-config --cflags --libs`;
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

echo "--- 1. install"
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
p="$tmp/prefix"
shared=0
[[ -e "$p/lib/libswitchyard.so" ]] && shared=1
lib="$p/lib/libswitchyard.a"
((shared)) && lib=$(readlink -f "$p/lib/libswitchyard.so")
for f in include/switchyard/switchyard.h include/switchyard/version.h \
         include/switchyard/backend/program.h "${lib#"$p/"}" \
         lib/cmake/Switchyard/SwitchyardConfig.cmake lib/cmake/Switchyard/SwitchyardConfigVersion.cmake \
         lib/cmake/Switchyard/SwitchyardTargets.cmake lib/pkgconfig/switchyard.pc bin/switchyard; do
  [[ -e "$p/$f" ]] || fail "$f not installed"
done
if find "$p" -name '*.spv' -o -name '*.comp' -o -name '*.glsl' | grep -q .; then
  fail "loose shader files installed: the SPIR-V belongs in the library"
fi
grep -q "SWITCHYARD_VERSION \"" "$p/include/switchyard/version.h" || fail "version.h has no version"
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
cmake -S "$src/samples/embed" -B "$tmp/embed" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$p" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF > "$tmp/embed-configure.log"
grep -q "$p/lib/cmake/Switchyard" "$tmp/embed/CMakeCache.txt" || fail "Switchyard not found in the prefix"
cmake --build "$tmp/embed" > "$tmp/embed-build.log" || { cat "$tmp/embed-build.log"; fail "embed build"; }
"$p/bin/switchyard" train --device cpu --epochs 1 --limit 5000 --save "$tmp/model.safetensors" --json > /dev/null
eval_acc=$("$p/bin/switchyard" eval --model "$tmp/model.safetensors" --device cpu --json |
           sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p')
"$tmp/embed/classify" "$tmp/model.safetensors" /usr/share/datasets/fashion-mnist 50 | tee "$tmp/classify.out"
app_acc=$(sed -n 's/^test accuracy on [^:]*: \([0-9.]*\) .*/\1/p' "$tmp/classify.out")
[[ -n "$eval_acc" && -n "$app_acc" ]] || fail "no accuracy printed"
python3 -c "import sys; sys.exit(abs($eval_acc - $app_acc) > 1e-4)" ||
  fail "classify's accuracy $app_acc differs from switchyard eval's $eval_acc"
grep -q "^latency on cpu: " "$tmp/classify.out" || fail "no cpu latency"
echo "example app: $(du -k "$tmp/embed/classify" | cut -f1) KiB"
for d in $("$p/bin/switchyard" devices | awk 'NR > 1 && $2 != "-" && $1 ~ /:/ {print $1}'); do
  grep -q "^latency on $d: " "$tmp/classify.out" || fail "no latency on $d"
done

echo "--- 3. the same app with pkg-config"
export PKG_CONFIG_PATH="$p/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++20 -O2 "$src/samples/embed/classify.cpp" -o "$tmp/classify_pc" \
    $(pkg-config --cflags --libs switchyard)
LD_LIBRARY_PATH="$p/lib" "$tmp/classify_pc" "$tmp/model.safetensors" /usr/share/datasets/fashion-mnist 5 |
  grep "^test accuracy on cpu: $app_acc " ||
  fail "the pkg-config build gives another accuracy"

echo "--- 4. as a subdirectory of another project"
mkdir -p "$tmp/parent"
cat > "$tmp/parent/CMakeLists.txt" <<PARENT
cmake_minimum_required(VERSION 3.25)
project(parent LANGUAGES CXX)
add_subdirectory("$src" switchyard)
message(STATUS "parent build type: [\${CMAKE_BUILD_TYPE}]")
add_executable(app "$src/samples/embed/classify.cpp")
target_link_libraries(app PRIVATE switchyard)
PARENT
cmake -S "$tmp/parent" -B "$tmp/parent-build" -DSWITCHYARD_CUDA=OFF > "$tmp/parent.log" ||
  { cat "$tmp/parent.log"; fail "configure as a subdirectory"; }
grep -q "parent build type: \[\]" "$tmp/parent.log" || fail "the parent's build type was changed"
targets=$(cmake --build "$tmp/parent-build" --target help)
for t in test_ops test_conformance sample_01_pick_device switchyard_cli bench_files_io; do
  if grep -qw "$t" <<< "$targets"; then fail "target $t made in a parent project"; fi
done
grep -qw switchyard <<< "$targets" || fail "no switchyard library target"
echo ok
