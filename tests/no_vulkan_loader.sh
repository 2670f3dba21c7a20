#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A binary built with the Vulkan backend, run where no Vulkan loader exists:
# in a private mount namespace whose library directory holds everything but
# libvulkan*, `switchyard devices` still lists the devices and says why
# Vulkan is unavailable, naming the library this platform looks for
# (libvulkan.so.1, not another platform's), and training on the CPU works.
# Exit 77 (a skip) where this sandbox cannot make a mount namespace.
set -uo pipefail
cli="$1"
libdir=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libvulkan\.so\.1 / {print $NF; exit}')")" 2>/dev/null)
if [[ -z "$libdir" || ! -d "$libdir" ]]; then
  echo "SKIP: no libvulkan.so.1 on this machine to hide"
  exit 77
fi
if ! unshare -rm true 2>/dev/null; then
  echo "SKIP: unshare -rm (user and mount namespaces) is not permitted here"
  exit 77
fi
exec unshare -rm bash -c '
  set -e
  libdir="$1" cli="$2"
  # A farm of links to every library but the loader, put over the directory.
  orig=$(mktemp -d) farm=$(mktemp -d)
  mount --bind "$libdir" "$orig"
  mount -t tmpfs none "$farm"
  ln -s "$orig"/* "$farm"/
  rm -f "$farm"/libvulkan*
  mount --bind "$farm" "$libdir"
  [[ -e "$libdir/libvulkan.so.1" ]] && { echo "loader still visible"; exit 1; }
  echo "--- devices (no Vulkan loader)"
  "$cli" devices
  echo "--- train on cpu (no Vulkan loader)"
  "$cli" train --device cpu --epochs 1 --limit 2000 --json
' bash "$libdir" "$cli"
