#!/usr/bin/env python3
"""Compare the nvml receiver's figures with nvidia-smi's (gpu-check.sh).

Reads, from the output directory:
  metrics.jsonl   OTLP JSON lines from gpucheck (or the collector's file exporter)
  logs.jsonl      OTLP JSON lines: events and leak records
  smi-gpu.csv     epoch,uuid,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu
  smi-apps.csv    epoch,pid,gpu_uuid,used_memory
  workload.jsonl  what the workload held when
  nvml-calls.txt  time spent per NVML function (optional)

Pairs each nvidia-smi sample with the receiver's data point nearest in time
(within MAX_SKEW_S), prints the differences, and exits 1 when a figure is out
of tolerance or the workload's leak was not flagged.
"""
import csv
import json
import os
import statistics
import sys

MIB = 1 << 20
MAX_SKEW_S = 3.0


def attrs(kvs):
    out = {}
    for kv in kvs or []:
        v = kv.get("value", {})
        for k in ("stringValue", "intValue", "doubleValue", "boolValue"):
            if k in v:
                out[kv["key"]] = int(v[k]) if k == "intValue" else v[k]
    return out


def points(metric):
    body = metric.get("sum") or metric.get("gauge") or {}
    for dp in body.get("dataPoints", []):
        val = float(dp["asInt"]) if "asInt" in dp else float(dp.get("asDouble", 0))
        yield int(dp["timeUnixNano"]) / 1e9, attrs(dp.get("attributes")), val


def load_metrics(path):
    gpu = {}   # (uuid, series) -> [(t, v)]
    proc = {}  # (pid, hw.id) -> [(t, v)]
    names = {}  # pid -> executable
    scrapes = 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            scrapes += 1
            for rm in json.loads(line).get("resourceMetrics", []):
                res = attrs(rm.get("resource", {}).get("attributes"))
                for sm in rm.get("scopeMetrics", []):
                    for m in sm.get("metrics", []):
                        for t, a, v in points(m):
                            if "process.pid" in res and m["name"] == "gpu.process.memory.usage":
                                proc.setdefault((res["process.pid"], a.get("hw.id")), []).append((t, v))
                                names[res["process.pid"]] = res.get("process.executable.name", "")
                            elif "hw.id" in res:
                                key = m["name"]
                                for extra in ("hw.gpu.task", "error.type"):
                                    if extra in a:
                                        key += "{" + a[extra] + "}"
                                gpu.setdefault((res["hw.id"], key), []).append((t, v))
    return gpu, proc, names, scrapes


def nearest(series, t):
    best = None
    for ts, v in series or []:
        if abs(ts - t) <= MAX_SKEW_S and (best is None or abs(ts - t) < abs(best[0] - t)):
            best = (ts, v)
    return best


def compare(label, pairs, tolerance, unit, failures, judge="worst"):
    """Print the differences; judge the worst one (steady figures) or the
    median (figures that move between two reads a second apart)."""
    if not pairs:
        print(f"  {label:<34} no paired samples")
        failures.append(f"{label}: no paired samples")
        return
    diffs = [ours - smi for smi, ours in pairs]
    worst = max(diffs, key=abs)
    med = statistics.median(abs(d) for d in diffs)
    judged = abs(worst) if judge == "worst" else med
    ok = tolerance is None or judged <= tolerance
    verdict = "info" if tolerance is None else ("ok" if ok else "FAIL")
    print(f"  {label:<34} n={len(pairs):<4} median|diff|={med:10.2f} {unit:<4} worst={worst:+10.2f} {unit:<4} {verdict} ({judge})")
    if not ok:
        failures.append(f"{label}: {judge} difference {judged:.2f} {unit} beyond {tolerance} {unit}")


def main(out):
    gpu, proc, names, scrapes = load_metrics(os.path.join(out, "metrics.jsonl"))
    chunk = int(os.environ.get("GPU_CHECK_CHUNK_MIB", "256"))
    failures = []
    print(f"receiver: {scrapes} scrapes, {len({u for u, _ in gpu})} GPUs, {len({p for p, _ in proc})} processes seen")

    smi = {}
    with open(os.path.join(out, "smi-gpu.csv")) as f:
        for row in csv.reader(f):
            if len(row) < 7:
                continue
            t, uuid = float(row[0]), row[1].strip()
            vals = []
            for x in row[2:7]:
                try:
                    vals.append(float(x))
                except ValueError:
                    vals.append(None)
            smi.setdefault(uuid, []).append((t, *vals))

    for uuid, rows in sorted(smi.items()):
        print(f"GPU {uuid}")
        # Drivers before R535 count reserved memory in nvidia-smi's "used";
        # later ones do not. Compare with whichever of used and
        # used+reserved the driver means.
        used = gpu.get((uuid, "hw.gpu.memory.usage")) or []
        reserved = dict(gpu.get((uuid, "gpu.memory.reserved")) or [])
        with_reserved = [(t, v + reserved.get(t, 0)) for t, v in used]
        pairs_used, pairs_both = [], []
        for r in rows:
            if r[1] is None:
                continue
            a, b = nearest(used, r[0]), nearest(with_reserved, r[0])
            if a and b:
                pairs_used.append((r[1], a[1] / MIB))
                pairs_both.append((r[1], b[1] / MIB))
        med = lambda ps: statistics.median(abs(o - s) for s, o in ps) if ps else float("inf")
        if med(pairs_both) < med(pairs_used):
            compare("memory used+reserved (MiB)", pairs_both, chunk + 64, "MiB", failures)
        else:
            compare("memory used (MiB)", pairs_used, chunk + 64, "MiB", failures)
        checks = {
            "memory total (MiB)": ("hw.gpu.memory.limit", 2, 1 / MIB, 1, "MiB", "worst"),
            "utilization (%)": ("hw.gpu.utilization{general}", 3, 100, None, "%", "median"),
            "power (W)": ("hw.power", 4, 1, 40, "W", "median"),
            "temperature (C)": ("hw.temperature", 5, 1, 3, "C", "median"),
        }
        for label, (series, col, scale, tol, unit, judge) in checks.items():
            pairs = []
            for r in rows:
                if r[col] is None:
                    continue
                near = nearest(gpu.get((uuid, series)), r[0])
                if near:
                    pairs.append((r[col], near[1] * scale))
            compare(label, pairs, tol, unit, failures, judge)

    workload = []
    wpath = os.path.join(out, "workload.jsonl")
    if os.path.exists(wpath):
        with open(wpath) as f:
            workload = [json.loads(l) for l in f if l.strip()]
    wpid = workload[0]["pid"] if workload else None

    apps = {}
    with open(os.path.join(out, "smi-apps.csv")) as f:
        for row in csv.reader(f):
            if len(row) < 4:
                continue
            try:
                apps.setdefault((int(row[1]), row[2].strip()), []).append((float(row[0]), float(row[3])))
            except ValueError:
                continue
    print("Processes")
    for (pid, uuid), rows in sorted(apps.items()):
        pairs = []
        for t, used in rows:
            near = nearest(proc.get((pid, uuid)), t)
            if near:
                pairs.append((used, near[1] / MIB))
        tag = " (workload)" if pid == wpid else ""
        compare(f"pid {pid} {names.get(pid, '?')}{tag}", pairs, chunk + 64, "MiB", failures)
    if wpid is not None and not any(p == wpid for p, _ in proc):
        failures.append(f"workload pid {wpid} never reported by the receiver")

    leaks = []
    lpath = os.path.join(out, "logs.jsonl")
    if os.path.exists(lpath):
        with open(lpath) as f:
            for line in f:
                if not line.strip():
                    continue
                for rl in json.loads(line).get("resourceLogs", []):
                    res = attrs(rl.get("resource", {}).get("attributes"))
                    for sl in rl.get("scopeLogs", []):
                        for lr in sl.get("logRecords", []):
                            if lr.get("eventName") == "gpu.memory.leak_suspected":
                                leaks.append((res.get("process.pid"), attrs(lr.get("attributes"))))
    print("Leak records")
    for pid, a in leaks:
        print(f"  pid {pid} on {a.get('hw.id')}: {a.get('gpu.memory.growth_rate', 0) / MIB:.1f} MiB/s over {a.get('gpu.memory.leak.window')} s")
    if wpid is not None and not any(pid == wpid for pid, _ in leaks):
        failures.append(f"the workload (pid {wpid}) leaked {chunk} MiB per step but no gpu.memory.leak_suspected record named it")

    calls = os.path.join(out, "nvml-calls.txt")
    if os.path.exists(calls):
        with open(calls) as f:
            lines = f.read().splitlines()
        total_ms = 0.0
        for l in lines[1:]:
            parts = l.split()
            if len(parts) >= 4:
                total_ms += float(parts[-3])
        print(f"NVML time: {total_ms:.1f} ms over {scrapes} scrapes = {total_ms / max(scrapes, 1):.2f} ms of NVML calls per scrape (all GPUs, summed; they run in parallel)")
        print("\n".join("  " + l for l in lines[:12]))

    if failures:
        print("\nFAILED:")
        for f in failures:
            print("  - " + f)
        return 1
    print("\nPASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "gpucheck-out"))
