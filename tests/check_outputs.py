#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks what `switchyard bench` and the profiler write, with Python's own
JSON, CSV and XML parsers:

  check_outputs.py bench EXE DIR          bench --quick on every available device:
                                          JSON and CSV well-formed and complete,
                                          SVG valid with one bar per device and workload
  check_outputs.py trace EXE DEVICE DIR   train --profile --trace: valid Chrome trace
                                          whose kernel events are the launches the
                                          device counted, on separate tracks
  check_outputs.py env EXE DIR            SWITCHYARD_PROFILE=1 / SWITCHYARD_TRACE for
                                          a program that does not ask for profiling
Exits non-zero with the reason on the first failed check.
"""
import collections
import csv
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(cmd, env=None):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, **(env or {})))
    sys.stdout.write(p.stdout[-6000:])
    sys.stdout.write(p.stderr[-3000:])
    check(p.returncode == 0, "%s exited with %d" % (cmd[0], p.returncode))
    # Only the end of stderr is echoed above, so the Vulkan validation layer's
    # reports are looked for here, in all of it.
    bad = [l for l in p.stderr.splitlines() if "[vulkan validation]" in l]
    check(not bad, "%s: the validation layer reported: %s" % (cmd[0], "\n".join(bad[:5])))
    return p


def available_devices(exe):
    out = run([exe, "devices", "--json"]).stdout
    return [d["device"] for d in json.loads(out) if d.get("available")]


def check_bench(exe, out):
    devices = available_devices(exe)
    check("cpu" in devices, "cpu is always available")
    j, c, s = (os.path.join(out, "bench." + e) for e in ("json", "csv", "svg"))
    for f in (j, c, s):
        if os.path.exists(f):
            os.remove(f)
    run([exe, "bench", "--quick", "--json", j, "--csv", c, "--svg", s])

    # JSON: well-formed, every device, every workload on every device it applies to.
    r = json.load(open(j))
    check([d["device"] for d in r["devices"]] == devices,
          "bench devices %s, expected every available device %s" % ([d["device"] for d in r["devices"]], devices))
    check(r["baseline"] == "cpu", "baseline cpu")
    for d in r["devices"]:
        for k in ("gemm_gflops", "copy_gbs"):
            check(d["ceilings"][k] > 0, "%s ceiling %s measured" % (d["device"], k))
    results = r["results"]
    groups = {x["group"] for x in results}
    for g in ("gemm", "conv", "elementwise", "reduce", "softmax", "optim", "transfer", "model"):
        check(g in groups, "group %s present" % g)
    workloads = collections.OrderedDict()
    for x in results:
        workloads.setdefault(x["workload"], x["group"])
    for n in r["not_measured"]:
        check(n["workload"] in workloads, "%s refused on every device" % n["workload"])
    pairs = collections.Counter((x["workload"], x["device"]) for x in results)
    # A workload past a GPU driver's limit is listed with the error, never
    # given a figure: on lavapipe, the 1.6M-row cross-entropy (one
    # workgroup's loops past llvmpipe's 65535 iterations). Only that: the CPU
    # and the model, GEMM and convolution workloads always run.
    refused = {(n["workload"], n["device"]): n["reason"] for n in r["not_measured"]}
    for (w, d), why in refused.items():
        check((w, d) not in pairs, "%s on %s both measured and refused" % (w, d))
        check(d != "cpu", "%s refused on the cpu: %s" % (w, d))
        check(why.startswith("[") and ("loop iterations" in why or "maxStorageBufferRange" in why),
              "%s on %s: a device limit naming the operation, found %r" % (w, d, why))
        check(not w.startswith(("gemm", "fwd", "mlp", "cnn", "vit")), "%s refused on %s: %s" % (w, d, why))
    check(max(pairs.values()) == 1, "one figure per workload and device")
    gpus = [d for d in devices if not d.startswith("cpu")]
    for w, g in workloads.items():
        want = gpus if g == "transfer" else devices  # transfers are host <-> device
        if g == "transfer" and "staging" in w:
            want = [d for d in gpus if any(x["workload"] == w and x["device"] == d for x in results)]
            check(want, "%s measured somewhere" % w)
        for d in want:
            check((w, d) in pairs or (w, d) in refused, "%s on %s missing" % (w, d))
    for x in results:
        name = "%s on %s" % (x["workload"], x["device"])
        for k in ("median", "min", "max", "wall_ms"):
            check(isinstance(x[k], (int, float)) and math.isfinite(x[k]) and x[k] > 0, "%s: %s=%r" % (name, k, x[k]))
        check(x["min"] <= x["median"] <= x["max"], "%s: min <= median <= max" % name)
        check(x["runs"] >= 3, "%s: at least 3 runs after warm-up" % name)
        check(x["device_median"] is not None and x["device_median"] > 0 and x["device_ms"] > 0,
              "%s: device time measured" % name)
        check(x["ceiling_share"] is not None and x["ceiling_share"] > 0, "%s: share of a ceiling" % name)
        check(x["unit"] in ("GFLOP/s", "GB/s", "samples/s"), "%s: unit %s" % (name, x["unit"]))
        if x["device"] == "cpu":
            check(x["speedup"] is not None and abs(x["speedup"] - 1) < 1e-9,
                  "%s: the baseline's speed-up is 1" % name)
        elif x["group"] != "transfer":
            check(x["speedup"] is not None and x["speedup"] > 0, "%s: speed-up against cpu" % name)

    # CSV: the same figures.
    rows = list(csv.DictReader(open(c)))
    check(len(rows) == len(results), "CSV has %d rows, JSON %d results" % (len(rows), len(results)))
    check(list(rows[0].keys()) == ["group", "workload", "unit", "device", "median", "min", "max", "spread_pct",
                                   "device_median", "wall_ms", "device_ms", "runs", "ceiling_share", "speedup"],
          "CSV header")
    for row, x in zip(rows, results):
        check((row["workload"], row["device"]) == (x["workload"], x["device"]), "CSV row order")
        check(math.isclose(float(row["median"]), x["median"], rel_tol=1e-4), "CSV median of %s" % x["workload"])

    # SVG: valid XML, one bar per device and workload.
    root = ET.parse(s).getroot()
    check(root.tag == "{http://www.w3.org/2000/svg}svg", "an <svg> root")
    bars = [e for e in root.iter("{http://www.w3.org/2000/svg}rect") if e.get("class") == "bar"]
    bar_pairs = collections.Counter((b.get("data-workload"), b.get("data-device")) for b in bars)
    check(bar_pairs == pairs, "one bar per device and workload: %d bars, %d figures, difference %s" %
          (len(bars), len(pairs), set(bar_pairs) ^ set(pairs)))
    for b in bars:
        check(float(b.get("width")) > 0, "bar width")
    print("bench: %d figures, %d workloads, %d devices, %.1f s" % (len(results), len(workloads), len(devices),
                                                                     r["seconds"]))

    # One device named two ways ("vulkan" is "vulkan:0") is measured once,
    # and a baseline named either way is that device.
    for gpu in gpus[:1]:
        alias = gpu.split(":")[0]
        r = json.loads(run([exe, "bench", "--quick", "--ops", "gemm", "--sizes", "64", "--devices",
                            alias + "," + gpu, "--baseline", alias, "--json", "-"]).stdout)
        check([d["device"] for d in r["devices"]] == [gpu], "%s,%s is one device: %s" % (alias, gpu, r["devices"]))
        check(r["baseline"] == gpu, "baseline %s is %s, found %s" % (alias, gpu, r["baseline"]))
        check(r["results"] and all(x["speedup"] is not None and abs(x["speedup"] - 1) < 1e-9 for x in r["results"]),
              "the baseline's speed-up is 1")


def check_trace_file(path, device, launches):
    t = json.load(open(path))
    ev = t["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    for e in xs:
        check(e["ts"] >= 0 and e["dur"] >= 0, "non-negative times: %r" % e)
    # Tracks: named, and separate for planning, submissions, transfers, kernels.
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks = {(e["pid"], e["tid"]) for e in xs}
    for tr in tracks:
        check(tr in names, "track %r has a name" % (tr,))
    by_cat = collections.defaultdict(set)
    for e in xs:
        by_cat[e["cat"]].add((e["pid"], e["tid"]))
    for cat in ("planning", "submissions", "transfers", "kernels"):
        check(by_cat[cat], "events of kind %s" % cat)
    for a in by_cat:
        for b in by_cat:
            if a != b:
                check(not (by_cat[a] & by_cat[b]), "%s and %s on separate tracks" % (a, b))
    # Device tracks: slices follow one another.
    per_track = collections.defaultdict(list)
    for e in xs:
        if e["cat"] in ("kernels", "transfers"):
            per_track[(e["pid"], e["tid"])].append(e)
    for tr, es in per_track.items():
        es.sort(key=lambda e: e["ts"])
        for a, b in zip(es, es[1:]):
            check(b["ts"] >= a["ts"] + a["dur"] - 1e-3, "slices on %s overlap: %r %r" % (names[tr], a, b))
    if launches is not None:
        kernels = collections.Counter(e["name"] for e in xs if e["cat"] == "kernels" and e["args"]["device"] == device)
        check(dict(kernels) == launches, "kernel events on %s %s, launches counted by the device %s" %
              (device, dict(kernels), launches))
    return xs


def check_trace(exe, device, out):
    path = os.path.join(out, "trace_%s.json" % device.replace(":", "_"))
    if os.path.exists(path):
        os.remove(path)
    p = run([exe, "train", "--device", device, "--epochs", "1", "--limit", "1024", "--profile", "--trace", path])
    check("device time per kernel and transfer kind" in p.stdout, "the per-kernel table is printed")
    check("% of step" in p.stdout and "gemm" in p.stdout, "rows with shares of the step")
    last = json.loads(p.stdout.strip().splitlines()[-1])
    launches = last["kernel_launches"]
    check(launches.get("gemm", 0) > 0, "gemm ran")
    # Per step after warm-up: launches and the bytes the kernels' arguments
    # span; per kernel, the achieved rates.
    check(last["launches_per_step"] > 0 and last["kernel_mb_per_step"] > 0,
          "launches and kernel bytes per step reported: %r" % last)
    check("kernel rates on %s" % device in p.stdout and "GFLOP/s" in p.stdout,
          "the per-kernel rates table is printed")
    xs = check_trace_file(path, device, launches)
    print("trace: %d slices, kernels match %d launches on %s" % (len(xs), sum(launches.values()), device))


def check_env(exe, out):
    path = os.path.join(out, "trace_env.json")
    if os.path.exists(path):
        os.remove(path)
    p = run([exe, "train", "--device", "cpu", "--epochs", "1", "--limit", "512", "--json"],
            env={"SWITCHYARD_PROFILE": "1", "SWITCHYARD_TRACE": path})
    check("profile: device time per kernel and transfer kind" in p.stderr, "the table at exit, on stderr")
    check_trace_file(path, "cpu", None)
    # train --json --profile: stdout stays JSON lines, the table goes to stderr.
    p = run([exe, "train", "--device", "cpu", "--epochs", "1", "--limit", "512", "--json", "--profile"])
    for line in p.stdout.splitlines():
        try:
            json.loads(line)
        except ValueError:
            fail("train --json --profile: a stdout line that is not JSON: %r" % line)
    check("profile: device time per kernel and transfer kind" in p.stderr, "--json --profile: the table on stderr")
    print("env: table printed at exit, trace written; --json --profile keeps stdout JSON")


def main():
    if len(sys.argv) < 4:
        fail(__doc__)
    what, exe = sys.argv[1], sys.argv[2]
    if what == "bench":
        check_bench(exe, sys.argv[3])
    elif what == "trace":
        check_trace(exe, sys.argv[3], sys.argv[4])
    elif what == "env":
        check_env(exe, sys.argv[3])
    else:
        fail(__doc__)
    print("ok")


main()
