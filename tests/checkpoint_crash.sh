#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoints survive kill -9 at any moment: a run saving a checkpoint every
# few milliseconds (--limit 256: tiny epochs) is killed with SIGKILL at a
# random time (within a window set by how long the first run took to write
# its first checkpoint), TRIALS times, each run resuming what the last kill
# left. After each kill the newest checkpoint must read
# back whole (its checksum verified by `switchyard inspect`), and no file but
# checkpoints, model.safetensors and temporaries of dead runs may be there.
# Then a resume from the killed directory finishes the run, and `eval` of the
# saved model prints the accuracy the run reported.
# Usage: checkpoint_crash.sh SWITCHYARD_CLI [TRIALS=60]
set -uo pipefail
cli=$1
trials=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ck=$work/ck
fail=0
killed_mid_write=0
seen_tmp=" "
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
first_ms=0  # how long the first run took to write its first checkpoint
for ((t = 1; t <= trials; t++)); do
  # The first run saves; every later one resumes what the last kill left.
  how=(--save "$ck")
  ls "$ck"/checkpoint-*.safetensors >/dev/null 2>&1 && how=(--resume "$ck")
  start=$(now_ms)
  "$cli" train --device cpu --epochs 100000 --limit 256 --batch 64 --json "${how[@]}" \
    >"$work/run" 2>&1 &
  pid=$!
  if [[ $t -eq 1 ]]; then
    # The first run is killed once its first checkpoint is there: its
    # start-up time (the dataset's decompression, slower on a loaded
    # machine) sets the window for the others.
    while ! ls "$ck"/checkpoint-*.safetensors >/dev/null 2>&1 && kill -0 "$pid" 2>/dev/null &&
      (( $(now_ms) - start < 120000 )); do sleep 0.02; done
    first_ms=$(( $(now_ms) - start ))
  else
    # From 80% of that start-up to 500 ms past it: the start-up, a resume,
    # then anywhere in the epoch/save cycle (which does not slow down with
    # the start-up).
    wait_ms=$(( first_ms * 8 / 10 + (RANDOM * 32768 + RANDOM) % (500 + first_ms / 5) ))
    sleep "$(( wait_ms / 1000 )).$(printf '%03d' $(( wait_ms % 1000 )))"
  fi
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if grep -q "switchyard:" "$work/run"; then
    echo "FAIL: trial $t: the run reported an error before it was killed:"
    cat "$work/run"
    fail=1
  fi
  for f in "$ck"/*.tmp.*; do  # a temporary this kill left (the next run removes it)
    [[ -e $f && $seen_tmp != *" $f "* ]] && killed_mid_write=$((killed_mid_write + 1)) && seen_tmp+="$f "
  done
  newest=$(ls "$ck"/checkpoint-*.safetensors 2>/dev/null | sort | tail -1)
  [[ -z $newest ]] && continue  # killed before the first epoch ended
  if ! "$cli" inspect "$newest" >"$work/inspect" 2>&1 || ! grep -q "checksum verified" "$work/inspect"; then
    echo "FAIL: trial $t: the newest checkpoint $newest does not read back:"
    cat "$work/inspect"
    fail=1
  fi
  for f in "$ck"/*; do
    case $(basename "$f") in
      checkpoint-*.safetensors | model.safetensors | *.tmp.*) ;;
      *) echo "FAIL: trial $t: unexpected file $f"; fail=1 ;;
    esac
  done
done
echo "trials: $trials, first checkpoint after $first_ms ms, kills that left a half-written temporary: $killed_mid_write, newest checkpoint: $(ls "$ck" | grep checkpoint | sort | tail -1)"
# Resume from whatever the last kill left, for 2 more epochs.
last=$(ls "$ck"/checkpoint-*.safetensors 2>/dev/null | sort | tail -1)
if [[ -z $last ]]; then
  echo "FAIL: no checkpoint was written in $trials runs"
  exit 1
fi
epoch=$((10#$(basename "$last" | sed 's/checkpoint-\([0-9]*\).*/\1/')))
out=$("$cli" train --device cpu --epochs $((epoch + 2)) --limit 256 --batch 64 --json --resume "$ck" 2>&1 | tail -1)
echo "$out"
acc=$(echo "$out" | sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p')
[[ -n $acc && $out == *'"first_epoch":'$((epoch + 1))* ]] || { echo "FAIL: resume after the kills"; fail=1; }
ls "$ck"/*.tmp.* >/dev/null 2>&1 && { echo "FAIL: temporaries of killed runs were not removed"; fail=1; }
ev=$("$cli" eval --model "$ck/model.safetensors" --device cpu --json 2>&1)
echo "$ev"
[[ $ev == *"\"test_acc\":$acc"* ]] || { echo "FAIL: eval's accuracy differs from the run's ($acc)"; fail=1; }
[[ $fail -eq 0 ]] && echo ok
exit $fail
