#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Whatever sits at the Vulkan pipeline cache's path never stops vulkan:0 from
# training, never hangs it and never costs more than the cache's size: a
# directory, a FIFO, a link to /dev/zero, a corrupt or foreign file, a full
# disk while saving (the old file stays whole), temporaries left by a killed
# run (removed). Usage: pipeline_cache.sh SWITCHYARD_CLI
set -uo pipefail
cli=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
train() {  # train PATH [shell prefix...]: one short run with the cache at PATH
  local path=$1
  shift
  SWITCHYARD_VK_PIPELINE_CACHE=$path timeout 120 "$@" "$cli" train --device vulkan:0 --epochs 1 \
    --limit 256 --json 2>&1 | cat >"$work/out"  # a pipe: no file-size limit on it
  local rc=${PIPESTATUS[0]}
  if [[ $rc -ne 0 ]] || ! grep -q '"test_acc"' "$work/out"; then
    echo "FAIL: cache at $path: exit $rc"
    cat "$work/out"
    fail=1
    return 1
  fi
}
is_cache() { [[ -f $1 && ! -L $1 && $(head -c 8 "$1") == SYVKPC01 ]]; }

# Nothing there: trains and writes a valid cache; a second run reads it.
train "$work/fresh.bin" && is_cache "$work/fresh.bin" || { echo "FAIL: no valid cache written"; fail=1; }
train "$work/fresh.bin" || true

# A directory and a FIFO stay what they are; the run neither fails nor hangs.
mkdir "$work/dir.bin"
train "$work/dir.bin" && [[ -d $work/dir.bin ]] || { echo "FAIL: directory"; fail=1; }
mkfifo "$work/fifo.bin"
train "$work/fifo.bin" && [[ -p $work/fifo.bin ]] || { echo "FAIL: fifo"; fail=1; }

# A link to /dev/zero is not read (it never ends) and not written; a link to
# a regular file is followed: the file is replaced, the link stays.
ln -s /dev/zero "$work/zero.bin"
train "$work/zero.bin" && [[ -L $work/zero.bin ]] || { echo "FAIL: /dev/zero link"; fail=1; }
ln -s "$work/fresh.bin" "$work/link.bin"
rm "$work/fresh.bin"
train "$work/link.bin" && [[ -L $work/link.bin ]] && is_cache "$work/fresh.bin" ||
  { echo "FAIL: link to a regular file"; fail=1; }

# Corrupt (our header, bad hash), truncated and foreign files are ignored and
# replaced by a valid cache.
cp "$work/fresh.bin" "$work/corrupt.bin"
printf 'XXXXXXXX' | dd of="$work/corrupt.bin" bs=1 seek=100 conv=notrunc status=none
head -c 50 "$work/fresh.bin" >"$work/cut.bin"
head -c 4096 /dev/urandom >"$work/foreign.bin"
for f in corrupt cut foreign; do
  train "$work/$f.bin" && is_cache "$work/$f.bin" || { echo "FAIL: $f file"; fail=1; }
done

# A full disk while saving (a 20-byte file-size limit, smaller than any
# cache; SIGXFSZ ignored so write() fails with EFBIG): the run succeeds and
# the old file is unchanged.
printf 'the previous file' >"$work/full.bin"
train "$work/full.bin" bash -c 'trap "" XFSZ; exec prlimit --fsize=20:20 "$@"' sh
[[ $(cat "$work/full.bin") == "the previous file" ]] ||
  { echo "FAIL: full disk replaced the file"; fail=1; }
ls "$work" | grep -q 'full.bin.tmp' && { echo "FAIL: full disk left a temporary"; fail=1; }

# Temporaries of a killed run (a process that is gone) are removed; those of
# a live process are left alone.
sh -c 'exit 0' &
dead=$!
wait $dead
touch "$work/fresh.bin.tmp.$dead.0" "$work/fresh.bin.tmp.$$.0"
train "$work/fresh.bin"
[[ ! -e $work/fresh.bin.tmp.$dead.0 ]] || { echo "FAIL: stale temporary kept"; fail=1; }
[[ -e $work/fresh.bin.tmp.$$.0 ]] || { echo "FAIL: a live process's temporary was removed"; fail=1; }

[[ $fail -eq 0 ]] && echo ok
exit $fail
