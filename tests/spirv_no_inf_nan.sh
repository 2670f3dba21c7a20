#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The compiled shaders hold no infinite or NaN float constant: a driver
# without shaderSignedZeroInfNanPreserveFloat32 may assume there are none
# (shaders/common.glsl says what they use instead). spirv-dis prints such
# constants as hexadecimal floats with the exponent p+128 (0x1p+128 is
# infinity, 0x1.8p+128 a quiet NaN).
#   spirv_no_inf_nan.sh SPIRV_DIS SPV_DIR
set -uo pipefail
shopt -s nullglob
dis=$1 dir=$2
n=0 bad=0
for f in "$dir"/*.spv; do
  n=$((n + 1))
  if ! text=$("$dis" "$f"); then
    echo "$(basename "$f"): spirv-dis failed"
    bad=1
    continue
  fi
  hits=$(grep -E 'OpConstant %(float|v[0-9]float) .*p\+128' <<<"$text" || true)
  if [[ -n $hits ]]; then
    echo "$(basename "$f"): infinite or NaN constant: $hits"
    bad=1
  fi
done
[[ $n -gt 0 ]] || { echo "no .spv files in $dir"; exit 1; }
echo "$n shaders checked"
exit $bad
