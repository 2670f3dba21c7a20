#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The first thing to run on a machine with an NVIDIA GPU, unattended:
#   bash scripts/gpu-check.sh
# 1. installs what is missing (the project's packages; the CUDA toolkit from
#    the distribution when nvcc is nowhere to be found),
# 2. builds everything with the CUDA backend required (build-gpu/),
# 3. runs the whole test suite with each GPU backend the machine has required
#    (CUDA when cuda:0 is there; Vulkan when vulkan:0 is a GPU, not the
#    llvmpipe CPU driver), so every GPU case runs on cuda:0 and on vulkan:0
#    (the same card through Vulkan, under the validation layer) and a device
#    that vanishes is a failure, not a skip; ctest runs CTEST_J tests at a
#    time (default 4: each test process opens its own CUDA context),
# 4. trains on Fashion-MNIST on cpu and on each GPU device, and compares the
#    first 50 step losses with the CPU's (relative: the first 10 within 1e-5,
#    all 50 within 1e-2: the training's own sensitivity to rounding grows a
#    1e-7 difference to 1e-3 by step 40, measured on an H100 through CUDA
#    and through Vulkan, and in docs/design-choices.md); the
#    test accuracies are reported, not judged (two runs differ by a few
#    tenths of a point),
# 5. runs the backend benchmark on the devices present,
# then prints one summary table. Logs go to build-gpu/gpu-check/. What the
# machine lacks (no NVIDIA driver, no Vulkan GPU: a headless server, or this
# script run on a machine without a GPU) is reported as "not checked" and is
# not a failure; the exit status is non-zero only when something that ran
# failed.
#   EPOCHS=5 (training epochs), BUILD_DIR=build-gpu, CTEST_J=4, CUDA_ARCHS
#   (default: the project's list; "native" builds for this card only,
#   faster), CTEST_ARGS (extra ctest arguments, e.g. "-R cuda" for a subset).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
EPOCHS=${EPOCHS:-5}
CTEST_J=${CTEST_J:-4}
LOG=$BUILD_DIR/gpu-check
mkdir -p "$LOG"
declare -a rows=()
status=0
row() { rows+=("$(printf '%-28s %-12s %s' "$1" "$2" "$3")"); [[ "$2" == FAIL ]] && status=1; }
skip="not checked"
secs() { echo $(( $(date +%s) - $1 )); }

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
  row "nvidia-smi" ok "$gpu"
else
  row "nvidia-smi" "$skip" "not found: no NVIDIA driver, so nothing on CUDA is checked"
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
# The GPU devices to check: cuda:0 when the driver shows it; vulkan:0 when it
# is a GPU (llvmpipe, the CPU driver, is what CI already runs).
gpus=()
if grep -q '^cuda:0' "$LOG/devices.log"; then
  row "cuda:0" ok "$cuda_name"
  gpus+=(cuda:0)
elif command -v nvidia-smi >/dev/null; then
  row "cuda:0" FAIL "nvidia-smi sees a GPU but: $(grep '^cuda' "$LOG/devices.log")"
else
  row "cuda:0" "$skip" "$(grep '^cuda' "$LOG/devices.log")"
fi
if grep -q '^vulkan:0' "$LOG/devices.log" && ! grep -q '^vulkan:0 .*llvmpipe' "$LOG/devices.log"; then
  row "vulkan:0" ok "$vk_name"
  gpus+=(vulkan:0)
else
  if [[ -n $vk_name ]]; then why="vulkan:0 is ${vk_name% }, a CPU driver"; else why=$(grep '^vulkan' "$LOG/devices.log" | head -1 | tr -s ' '); fi
  row "vulkan:0" "$skip" "no Vulkan GPU ($why)"
fi

echo "== tests (${gpus[*]:-no GPU} required)"
t=$(date +%s)
req=(SWITCHYARD_REQUIRE_CUDA=0 SWITCHYARD_REQUIRE_VULKAN=0)
for g in "${gpus[@]}"; do [[ $g == cuda:0 ]] && req[0]=SWITCHYARD_REQUIRE_CUDA=1; [[ $g == vulkan:0 ]] && req[1]=SWITCHYARD_REQUIRE_VULKAN=1; done
# shellcheck disable=SC2086
env "${req[@]}" ctest --test-dir "$BUILD_DIR" -j"$CTEST_J" --output-on-failure ${CTEST_ARGS:-} >"$LOG/ctest.log" 2>&1
count() { grep -E "Test +#[0-9]+: .*$1" "$LOG/ctest.log" | grep -c -E "$2" || true; }
for dev in cuda_0 vulkan_0; do
  if [[ " ${gpus[*]} " != *" ${dev/_/:} "* ]]; then row "tests on ${dev/_/:}" "$skip" "no such GPU here"; continue; fi
  p=$(count "$dev" " Passed"); f=$(count "$dev" "Failed|\\*\\*\\*Exception|Timeout"); s=$(count "$dev" "Skipped")
  res=ok; { [[ $f -gt 0 || $s -gt 0 || $p -eq 0 ]]; } && res=FAIL
  row "tests on ${dev/_/:}" "$res" "$p passed, $f failed, $s skipped"
done
summary=$(grep -E "tests passed|tests failed" "$LOG/ctest.log" | tail -1)
if grep -q "100% tests passed" "$LOG/ctest.log"; then row "whole suite" ok "$summary ($(secs "$t") s)"; else row "whole suite" FAIL "$summary: see $LOG/ctest.log"; fi

echo "== training (Fashion-MNIST, $EPOCHS epochs)"
for dev in cpu "${gpus[@]}"; do
  out="$LOG/train-${dev/:/}.json"
  if "$cli" train --device "$dev" --epochs "$EPOCHS" --batch 128 --opt adam --lr 1e-3 --hidden 256,128 \
       --seed 0 --losses 50 --json >"$out" 2>"$LOG/train-${dev/:/}.err"; then
    line=$(tail -1 "$out")
    a=$(sed -E 's/.*"test_acc":([0-9.]+).*/\1/' <<<"$line")
    sps=$(sed -E 's/.*"train_samples_per_s":([0-9.]+).*/\1/' <<<"$line")
    row "train $dev" ok "test_acc $a, $sps samples/s"
  else
    row "train $dev" FAIL "see $LOG/train-${dev/:/}.err"
  fi
done
# Step for step against the CPU: the first 10 losses within 1e-5, all 50
# within 1e-2 (relative).
for dev in "${gpus[@]}"; do
  [[ -s "$LOG/train-${dev/:/}.json" && -s "$LOG/train-cpu.json" ]] || continue
  cmp=$(python3 - "$LOG/train-cpu.json" "$LOG/train-${dev/:/}.json" <<'PY'
import json, sys
a, b = (json.loads(open(f).read().strip().splitlines()[-1]).get("first_losses", []) for f in sys.argv[1:])
n = min(len(a), len(b))
rel = [abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)]
start, worst = max(rel[:10], default=float("inf")), max(rel, default=float("inf"))
ok = n == 50 and start <= 1e-5 and worst <= 1e-2
print("ok" if ok else "FAIL", "%d losses, worst relative difference %.2e in the first 10 (limit 1e-5), %.2e in all (limit 1e-2)" % (n, start, worst))
PY
)
  res=${cmp%% *} detail=${cmp#* }
  [[ $res == ok ]] || { res=FAIL; [[ -n $cmp ]] || detail="the comparison failed to run (see the JSON files)"; }
  row "$dev vs cpu, 50 steps" "$res" "$detail"
done

echo "== benchmark"
t=$(date +%s)
bench_devs=$(IFS=,; echo "cpu${gpus[*]:+,${gpus[*]}}")
bench_devs=${bench_devs// /,}
if "$BUILD_DIR/tools/switchyard" bench --devices "$bench_devs" --json "$LOG/bench.json" \
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
printf '%-28s %-12s %s\n' "check" "result" "detail"
printf '%s\n' "${rows[@]}"
exit $status
