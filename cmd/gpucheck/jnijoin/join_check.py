#!/usr/bin/env python3
"""Reads the collector's logs.jsonl (OTLP JSON lines, the file exporter's
format) for gpu-join.sh and says whether the GPU leak records of its two JVMs
are joined as they should be:

  join_check.py LOGS_JSONL JOINED_PID ALONE_PID

- the "joined" JVM (GPU memory and JNI global references leaking together):
  a gpu.memory.leak_suspected record with gpu.memory.leak.jvm_join "joined"
  naming jni_global_refs, and a jvm.memory.leak_suspected record for
  jni_global_refs;
- the "alone" JVM (GPU memory leaking, nothing pinned): a
  gpu.memory.leak_suspected record with gpu.memory.leak.jvm_join "none".

Exit status: 0 when both hold; 1 when a record says otherwise (a wrong join);
3 while a record is still missing. Prints what it found as one JSON line.
"""
import json
import sys


def value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: value(kv.get("value", {})) for kv in v["kvlistValue"].get("values", [])}
    return None


def attrs(lst):
    return {kv["key"]: value(kv.get("value", {})) for kv in lst or []}


def records(path):
    try:
        with open(path) as f:
            lines = f.readlines()
    except FileNotFoundError:
        return
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            batch = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written
        for rl in batch.get("resourceLogs", []):
            res = attrs(rl.get("resource", {}).get("attributes"))
            for sl in rl.get("scopeLogs", []):
                for lr in sl.get("logRecords", []):
                    yield res, lr.get("eventName", ""), attrs(lr.get("attributes")), int(lr.get("timeUnixNano", "0"))


def main():
    path, joined, alone = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    found = {"joined_gpu": None, "joined_jni": None, "alone_gpu": None}
    wrong = []
    for res, name, a, t in records(path):
        pid = res.get("process.pid")
        if name == "gpu.memory.leak_suspected" and pid in (joined, alone):
            join, accounts = a.get("gpu.memory.leak.jvm_join"), a.get("gpu.memory.leak.jvm_accounts") or []
            rec = {"time_unix_ns": t, "jvm_join": join, "jvm_accounts": accounts,
                   "jvm_correlations": a.get("gpu.memory.leak.jvm_correlations")}
            if pid == joined:
                if join == "joined" and "jni_global_refs" in accounts:
                    found["joined_gpu"] = found["joined_gpu"] or rec
                elif join == "joined":
                    wrong.append(("joined JVM joined to other accounts", rec))
            elif join == "none":
                found["alone_gpu"] = found["alone_gpu"] or rec
            elif join == "joined":
                wrong.append(("alone JVM joined", rec))
        if name == "jvm.memory.leak_suspected" and pid == joined and a.get("jvm.memory.leak.source") == "jni_global_refs":
            found["joined_jni"] = found["joined_jni"] or {"time_unix_ns": t}
    print(json.dumps({"found": found, "wrong": wrong}))
    if wrong:
        return 1
    return 0 if all(found.values()) else 3


if __name__ == "__main__":
    sys.exit(main())
