#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that the C++ and CUDA sources follow .clang-format (what CI runs as
# the ctest entry format:check). With --fix, reformats them in place.
#   bash scripts/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (bash scripts/install-deps.sh installs it)" >&2
  exit 77
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' '*.c' '*.cu' '*.cuh')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check-format: the files above do not follow .clang-format; run: bash scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format ($(clang-format --version))"
