#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A binary built with the CUDA backend, run where no CUDA toolkit exists: in a
# private mount namespace with an empty /usr/local (where the toolkit lives),
# `switchyard devices` still lists the devices and says why CUDA is
# unavailable, and training on the CPU works. Exit 77 (a skip) where this
# sandbox cannot make a mount namespace.
set -uo pipefail
cli="$1"
if ! unshare -rm true 2>/dev/null; then
  echo "SKIP: unshare -rm (user and mount namespaces) is not permitted here"
  exit 77
fi
exec unshare -rm bash -c '
  set -e
  mount -t tmpfs none /usr/local
  for f in /usr/local/cuda/lib64/libcublas.so.* /usr/local/cuda/lib64/libcudart.so.*; do
    [[ -e "$f" ]] && { echo "toolkit still visible: $f"; exit 1; }
  done
  echo "--- devices (no /usr/local)"
  "$0" devices
  echo "--- train on cpu (no /usr/local)"
  "$0" train --device cpu --epochs 1 --limit 2000 --json
' "$cli"
