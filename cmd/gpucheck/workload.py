#!/usr/bin/env python3
"""GPU memory workload for gpu-check.sh, using only the NVIDIA driver.

Talks to libcuda.so.1 (the CUDA driver API, present wherever the driver is)
through ctypes, so it needs no CUDA toolkit, PyTorch or ONNX Runtime:

  phase 1 (leak):  allocate CHUNK_MIB every STEP_S seconds, never free, and
                   keep the GPU busy with memsets over what it holds;
  phase 2 (free):  free everything but the first chunk, hold;
  then exit.

It prints one JSON line per change: {"t": unix_seconds, "pid": ..., "held_mib": ...},
so compare.py knows what the process held when.
"""
import ctypes
import json
import os
import sys
import time

CHUNK_MIB = int(os.environ.get("GPU_CHECK_CHUNK_MIB", "256"))
STEP_S = float(os.environ.get("GPU_CHECK_STEP_S", "2"))
LEAK_S = float(os.environ.get("GPU_CHECK_LEAK_S", "36"))
HOLD_S = float(os.environ.get("GPU_CHECK_HOLD_S", "14"))
DEVICE = int(os.environ.get("GPU_CHECK_DEVICE", "0"))


def check(ret, what):
    if ret != 0:
        sys.exit(f"workload: {what} failed with CUresult {ret}")


def report(held):
    print(json.dumps({"t": time.time(), "pid": os.getpid(), "held_mib": held}), flush=True)


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), DEVICE), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    size = CHUNK_MIB << 20
    chunks = []
    report(0)
    end = time.time() + LEAK_S
    while time.time() < end:
        ptr = ctypes.c_uint64()
        check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)), "cuMemAlloc")
        chunks.append(ptr)
        report(len(chunks) * CHUNK_MIB)
        step_end = time.time() + STEP_S
        while time.time() < step_end:
            for p in chunks:
                check(cuda.cuMemsetD8_v2(p, 0x5A, ctypes.c_size_t(size)), "cuMemsetD8")
            check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    for p in chunks[1:]:
        check(cuda.cuMemFree_v2(p), "cuMemFree")
    report(CHUNK_MIB)
    time.sleep(HOLD_S)
    check(cuda.cuMemFree_v2(chunks[0]), "cuMemFree")
    check(cuda.cuCtxDestroy_v2(ctx), "cuCtxDestroy")
    report(0)


if __name__ == "__main__":
    main()
