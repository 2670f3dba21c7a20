#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what Switchyard needs on Debian/Ubuntu, only when it is missing.
#   bash scripts/install-deps.sh          build, tests (python3 checks the bench's and
#                                         the profiler's outputs), Fashion-MNIST, and the Vulkan
#                                         backend: headers, glslc, spirv-val, the
#                                         validation layers and Mesa's drivers
#                                         (lavapipe runs Vulkan on the CPU), and
#                                         libshaderc (custom GLSL kernels)
#   bash scripts/install-deps.sh --bench  also PyTorch (Python and C++), for
#                                         bench/compare_pytorch.sh and compare_libtorch_cnn.sh
#   bash scripts/install-deps.sh --torch  also PyTorch (python3-torch), for the
#                                         safetensors interop tests (TorchInterop.*),
#                                         which skip without it
#   bash scripts/install-deps.sh --windows  also mingw-w64, its zlib, GoogleTest's
#                                         sources and Wine, for the Windows
#                                         cross-build in scripts/test.sh
# Options combine (--bench --windows).
set -euo pipefail

pkgs=(cmake g++ make pkg-config libgtest-dev libopenblas-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
      dataset-fashion-mnist python3 clang-format clang libclang-rt-dev
      libvulkan1 libvulkan-dev glslc spirv-tools vulkan-validationlayers mesa-vulkan-drivers libshaderc-dev
      libopenmpi-dev openmpi-bin)
for opt in "$@"; do
  case $opt in
    --bench) pkgs+=(python3-numpy python3-torch libtorch-dev libopenblas0-pthread) ;;
    --torch) pkgs+=(python3-numpy python3-torch) ;;
    --windows) pkgs+=(g++-mingw-w64-x86-64-posix libz-mingw-w64-dev googletest wine64) ;;
    *) echo "install-deps: unknown option $opt (--bench, --torch, --windows)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: everything is installed"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
