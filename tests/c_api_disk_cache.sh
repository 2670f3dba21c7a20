#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sy_set_disk_cache(0) (switchyard::set_disk_cache(false)): a program that
# compiles Vulkan pipelines leaves no file of Switchyard's in the user's
# cache directory; the same program without the call writes its pipeline
# cache there. (The driver's own cache, such as Mesa's mesa_shader_cache/,
# is the driver's: its variables control it, see docs/environment.md.)
#   usage: c_api_disk_cache.sh TEST_C_API
set -uo pipefail
prog=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset SWITCHYARD_VK_PIPELINE_CACHE SWITCHYARD_VK_NO_PIPELINE_CACHE
export HOME=$tmp/home XDG_CACHE_HOME=$tmp/cache
mkdir -p "$HOME"
XDG_CACHE_HOME=$tmp/off "$prog" --no-disk-cache
rc=$?
[[ $rc -eq 77 ]] && exit 77  # no Vulkan device, and none required
[[ $rc -eq 0 ]] || { echo "FAIL: the program failed"; exit 1; }
if [[ -e $tmp/off/switchyard ]] || [[ -n $(find "$HOME" -mindepth 1 -print -quit) ]]; then
  echo "FAIL: files written with the disk cache off:"; find "$tmp" -mindepth 1; exit 1
fi
SWITCHYARD_DEVICE=vulkan:0 "$prog" --messages drop || { echo "FAIL: the control run failed"; exit 1; }
n=$(find "$XDG_CACHE_HOME/switchyard" -name 'vk_pipelines_*.bin' 2>/dev/null | wc -l)
[[ $n -ge 1 ]] || { echo "FAIL: no pipeline cache written with the disk cache on (the check above proves nothing)"; exit 1; }
echo ok
