#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that no source file is over 800 lines (a file that grows past it is
# split by concept; what CI runs as the ctest entry sources:size).
#   bash scripts/check-sizes.sh [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-800}
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.cpp' '*.h' '*.cu' '*.cuh' '*.comp' '*.glsl' '*.py' '*.cmake' '*.in' 'CMakeLists.txt' '*/CMakeLists.txt')
over=0
for f in "${files[@]}"; do
  n=$(wc -l < "$f")
  if (( n > limit )); then
    echo "check-sizes: $f has $n lines, over $limit: split it by concept" >&2
    over=1
  fi
done
(( over == 0 )) || exit 1
echo "check-sizes: ${#files[@]} files, none over $limit lines"
