#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The first thing to run on a machine with an NVIDIA GPU, unattended:
#   bash scripts/gpu-check.sh
# 1. installs what is missing (the project's packages; the CUDA toolkit from
#    the distribution when nvcc is nowhere to be found),
# 2. builds everything with the CUDA backend required (build-gpu/),
# 3. runs the whole test suite with CUDA and Vulkan required, so every GPU
#    case runs on cuda:0 and on vulkan:0 (the same card through Vulkan, under
#    the validation layer) and a missing device is a failure, not a skip,
# 4. trains on Fashion-MNIST on cpu, cuda:0 and vulkan:0 and compares
#    accuracy (CUDA must be within 0.5 points of the CPU),
# 5. runs the backend benchmark on all three,
# then prints one summary table. Logs go to build-gpu/gpu-check/. Exit status
# 0 only when every step passed.
#   EPOCHS=5 (training epochs), BUILD_DIR=build-gpu, CUDA_ARCHS (default: the
#   project's list; "native" builds for this card only, faster).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
EPOCHS=${EPOCHS:-5}
LOG=$BUILD_DIR/gpu-check
mkdir -p "$LOG"
declare -a rows=()
status=0
row() { rows+=("$(printf '%-28s %-8s %s' "$1" "$2" "$3")"); [[ "$2" == FAIL ]] && status=1; }
secs() { echo $(( $(date +%s) - $1 )); }

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
  row "nvidia-smi" ok "$gpu"
else
  row "nvidia-smi" FAIL "not found: is the NVIDIA driver installed?"
fi

echo "== dependencies"
t=$(date +%s)
if bash scripts/install-deps.sh >"$LOG/deps.log" 2>&1; then row "dependencies" ok "$(secs "$t") s"; else row "dependencies" FAIL "see $LOG/deps.log"; fi
nvcc=$(command -v nvcc || true)
for c in ${CUDA_PATH:+$CUDA_PATH/bin/nvcc} /usr/local/cuda/bin/nvcc; do [[ -z "$nvcc" && -x "$c" ]] && nvcc=$c; done
if [[ -z "$nvcc" ]]; then
  echo "nvcc not found: installing the distribution's CUDA toolkit (nvidia-cuda-toolkit)"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nvidia-cuda-toolkit; } \
    >>"$LOG/deps.log" 2>&1
  nvcc=$(command -v nvcc || true)
fi
if [[ -n "$nvcc" ]]; then row "CUDA toolkit" ok "$("$nvcc" --version | tail -2 | head -1)"; else row "CUDA toolkit" FAIL "nvcc not found, see $LOG/deps.log"; fi

echo "== build"
t=$(date +%s)
archs=()
[[ -n "${CUDA_ARCHS:-}" ]] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS")
if cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSWITCHYARD_CUDA=ON -DSWITCHYARD_VULKAN=ON \
     ${nvcc:+-DCMAKE_CUDA_COMPILER="$nvcc"} "${archs[@]}" >"$LOG/configure.log" 2>&1 &&
   cmake --build "$BUILD_DIR" -j"$(nproc)" >"$LOG/build.log" 2>&1; then
  row "build (CUDA + Vulkan)" ok "$(secs "$t") s"
else
  row "build (CUDA + Vulkan)" FAIL "see $LOG/configure.log and $LOG/build.log"
  printf '\n== summary\n'; printf '%s\n' "${rows[@]}"; exit 1
fi
cli=$BUILD_DIR/tools/switchyard
"$cli" devices | tee "$LOG/devices.log"
vk_name=$(awk '$1=="vulkan:0"{for(i=5;i<=NF;i++) if ($i ~ /=/) break; else printf "%s ", $i}' "$LOG/devices.log")
cuda_name=$(awk '$1=="cuda:0"{for(i=5;i<=NF;i++) if ($i ~ /=/) break; else printf "%s ", $i}' "$LOG/devices.log")
if grep -q '^cuda:0' "$LOG/devices.log"; then row "cuda:0" ok "$cuda_name"; else row "cuda:0" FAIL "$(grep '^cuda' "$LOG/devices.log")"; fi
if grep -q '^vulkan:0' "$LOG/devices.log"; then row "vulkan:0" ok "$vk_name"; else row "vulkan:0" FAIL "$(grep '^vulkan' "$LOG/devices.log")"; fi

echo "== tests (CUDA and Vulkan required)"
t=$(date +%s)
SWITCHYARD_REQUIRE_CUDA=1 SWITCHYARD_REQUIRE_VULKAN=1 \
  ctest --test-dir "$BUILD_DIR" -j"$(nproc)" --output-on-failure >"$LOG/ctest.log" 2>&1
count() { grep -E "Test +#[0-9]+: .*$1" "$LOG/ctest.log" | grep -c -E "$2" || true; }
for dev in cuda_0 vulkan_0; do
  p=$(count "$dev" " Passed"); f=$(count "$dev" "Failed|\\*\\*\\*Exception|Timeout"); s=$(count "$dev" "Skipped")
  res=ok; { [[ $f -gt 0 || $s -gt 0 || $p -eq 0 ]]; } && res=FAIL
  row "tests on ${dev/_/:}" "$res" "$p passed, $f failed, $s skipped"
done
summary=$(grep -E "tests passed|tests failed" "$LOG/ctest.log" | tail -1)
if grep -q "100% tests passed" "$LOG/ctest.log"; then row "whole suite" ok "$summary ($(secs "$t") s)"; else row "whole suite" FAIL "$summary: see $LOG/ctest.log"; fi

echo "== training (Fashion-MNIST, $EPOCHS epochs)"
declare -A acc=()
for dev in cpu cuda:0 vulkan:0; do
  out="$LOG/train-${dev/:/}.json"
  if "$cli" train --device "$dev" --epochs "$EPOCHS" --batch 128 --opt adam --lr 1e-3 --hidden 256,128 --json \
       >"$out" 2>"$LOG/train-${dev/:/}.err"; then
    line=$(tail -1 "$out")
    a=$(sed -E 's/.*"test_acc":([0-9.]+).*/\1/' <<<"$line")
    sps=$(sed -E 's/.*"train_samples_per_s":([0-9.]+).*/\1/' <<<"$line")
    acc[$dev]=$a
    row "train $dev" ok "test_acc $a, $sps samples/s"
  else
    row "train $dev" FAIL "see $LOG/train-${dev/:/}.err"
  fi
done
if [[ -n "${acc[cpu]:-}" && -n "${acc[cuda:0]:-}" ]]; then
  d=$(awk -v a="${acc[cuda:0]}" -v b="${acc[cpu]}" 'BEGIN{d=(a-b)*100; printf "%.2f", (d<0?-d:d)}')
  res=$(awk -v d="$d" 'BEGIN{print (d<=0.5)?"ok":"FAIL"}')
  row "cuda:0 vs cpu accuracy" "$res" "$d points apart (limit 0.5)"
fi

echo "== benchmark"
t=$(date +%s)
if "$BUILD_DIR/tools/switchyard" bench --devices cpu,cuda:0,vulkan:0 --json "$LOG/bench.json" \
     --csv "$LOG/bench.csv" --svg "$LOG/bench.svg" >"$LOG/bench.txt" 2>&1; then
  row "benchmark" ok "$(secs "$t") s, $LOG/bench.txt, chart $LOG/bench.svg"
  for w in "gemm 1024^3" "add 16M" "mlp train step batch 128"; do
    line=$(python3 - "$LOG/bench.json" "$w" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
xs = [x for x in r["results"] if x["workload"] == sys.argv[2]]
if xs:
    print(", ".join("%s %.4g" % (x["device"], x["median"]) for x in xs) + " " + xs[0]["unit"])
PY
)
    [[ -n "$line" ]] && row "$w" ok "$line"
  done
else
  row "benchmark" FAIL "see $LOG/bench.txt"
fi

printf '\n== summary (logs in %s)\n' "$LOG"
printf '%-28s %-8s %s\n' "check" "result" "detail"
printf '%s\n' "${rows[@]}"
exit $status
