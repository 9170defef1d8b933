"""GIL workloads that report their own ground truth, for the pythongil tests.

Usage: gilwork.py MODE [args...]

The process prints {"event": "ready", "pid": ...} and waits for a line on
stdin, so that the test can attach its probes first; then it runs MODE and
prints one JSON line with what it did (thread ids, counts, wall-clock and
monotonic times), then waits for stdin to close (or exits at once with
--exit).

Modes:
  sleep N D_MS        one thread calls time.sleep(D_MS/1000) N times (with
                      each call's run delay, as contend)
  hash T N SIZE       T threads each hash a SIZE-byte buffer N times (each
                      call releases the GIL once inside hashlib)
  spin T SECONDS      T pure-Python threads count in a loop for SECONDS
                      from when all of them run: they contend for the GIL
                      and are switched by the switch interval
  gc N                N explicit gc.collect(2) calls over a heap of cycles
  contend N D_MS [S]  one thread calls time.sleep(D_MS/1000) N times while
                      S others (default 1) spin in pure Python: each
                      wake-up waits for a spinner to be forced off by the
                      switch interval; each call's run delay (time
                      runnable, not running) comes with it
  churn RATE N        N hashlib calls on 4 KB buffers, paced at RATE a
                      second (0: as fast as possible); reports the time
                      spent inside the calls
"""
import gc
import hashlib
import json
import os
import resource
import sys
import threading
import time


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_threads(n, target):
    results = [None] * n
    def body(i):
        results[i] = target(i)
    ts = [threading.Thread(target=body, args=(i,), name=f"work-{i}") for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results


def mode_sleep(n, d_ms):
    def work(_):
        tid = threading.get_native_id()
        run_delay = run_delay_reader()
        calls, delays = [], []
        for _ in range(n):
            d0 = run_delay()
            w0, m0 = time.time_ns(), time.monotonic_ns()
            time.sleep(d_ms / 1000)
            m1, w1 = time.monotonic_ns(), time.time_ns()
            calls.append([w0, w1, m0, m1])
            delays.append(run_delay() - d0)
        return {"tid": tid, "calls": calls, "run_delays_ns": delays}
    r = run_threads(1, work)[0]
    return {"tid": r["tid"], "n": n, "d_ns": d_ms * 1_000_000, "calls": r["calls"],
            "run_delays_ns": r["run_delays_ns"]}


def mode_hash(t, n, size):
    buf = b"x" * size
    def work(_):
        tid = threading.get_native_id()
        for _ in range(n):
            hashlib.sha256(buf)
        return tid
    return {"tids": run_threads(t, work), "n": n}


def mode_spin(t, seconds):
    # The clock starts once every thread runs (the barrier's action), so
    # that they all contend for the whole time: on a loaded host a thread
    # started late could otherwise find the others gone and never be
    # forced off.
    deadline = [0.0]
    def start():
        deadline[0] = time.monotonic() + seconds
    barrier = threading.Barrier(t, action=start)
    def work(_):
        tid = threading.get_native_id()
        barrier.wait()
        c0 = time.thread_time_ns()
        i = 0
        while time.monotonic() < deadline[0]:
            i += 1
        return {"tid": tid, "cpu_ns": time.thread_time_ns() - c0}
    m0 = time.monotonic_ns()
    r = run_threads(t, work)
    return {"threads": r, "wall_ns": time.monotonic_ns() - m0, "switch_interval_s": sys.getswitchinterval()}


class Node:
    def __init__(self):
        self.ref = self


def mode_gc(n):
    gc.disable()
    tid = threading.get_native_id()
    keep = [Node() for _ in range(200_000)]
    calls = []
    for _ in range(n):
        m0 = time.monotonic_ns()
        gc.collect(2)
        calls.append([m0, time.monotonic_ns()])
    del keep
    return {"tid": tid, "n": n, "calls": calls}


def mode_contend(n, d_ms, spinners=1):
    done = threading.Event()
    def spin():
        while not done.is_set():
            pass
    spinning = [threading.Thread(target=spin, name=f"spinner-{i}") for i in range(spinners)]
    run_delay = run_delay_reader()
    for s in spinning:
        s.start()
    tid = threading.get_native_id()
    calls, wall, delays = [], [], []
    for _ in range(n):
        d0 = run_delay()
        w0, m0 = time.time_ns(), time.monotonic_ns()
        time.sleep(d_ms / 1000)
        m1, w1 = time.monotonic_ns(), time.time_ns()
        calls.append([m0, m1])
        wall.append([w0, w1])
        delays.append(run_delay() - d0)
    done.set()
    for s in spinning:
        s.join()
    return {"tid": tid, "n": n, "calls": calls, "wall_calls": wall, "run_delays_ns": delays,
            "switch_interval_s": sys.getswitchinterval()}


def run_delay_reader():
    """A function returning the calling thread's time spent runnable but not
    running, in ns (schedstat's second field; 0 where the kernel keeps
    none): a thread preempted between taking the GIL and reading the clock
    has that much more between the two. It reads with libc's pread through
    ctypes.PyDLL, which keeps the GIL: a read that let go of it would be
    one more contended take for the spinner to win."""
    try:
        import ctypes
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        pread = ctypes.PyDLL(None).pread
        pread.restype = ctypes.c_ssize_t
        pread.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
        buf = ctypes.create_string_buffer(128)
    except (OSError, ImportError, AttributeError):
        return lambda: 0

    def read():
        n = pread(fd, buf, len(buf), 0)
        try:
            return int(buf.raw[:max(n, 0)].split()[1])
        except (IndexError, ValueError):
            return 0
    return read


def mode_churn(rate, n):
    """n hashlib calls on 4 KB buffers (one GIL release each), as fast as
    possible (rate 0) or paced at rate calls a second. busy_s is the thread's
    CPU time (user + system, where uprobe traps land) inside the calls:
    unlike wall time it does not grow when other processes take the CPU.
    sys_s is the thread's system time over the whole loop: uprobe traps are
    kernel time, and hashing makes no system calls."""
    buf = b"x" * 4096
    sys0 = resource.getrusage(resource.RUSAGE_THREAD).ru_stime
    tid = threading.get_native_id()
    sha = hashlib.sha256
    cpu = time.thread_time
    busy = 0.0
    t0 = time.perf_counter()
    if rate <= 0:
        c0 = cpu()
        for _ in range(n):
            sha(buf)
        busy = cpu() - c0
    else:
        period = 1.0 / rate
        clock = time.perf_counter
        next_at = t0
        for _ in range(n):
            while clock() < next_at:
                pass
            c0 = cpu()
            sha(buf)
            busy += cpu() - c0
            next_at += period
    elapsed = time.perf_counter() - t0
    sys_s = resource.getrusage(resource.RUSAGE_THREAD).ru_stime - sys0
    return {"tid": tid, "calls": n, "elapsed_s": elapsed, "busy_s": busy, "sys_s": sys_s}


def main():
    args = sys.argv[1:]
    exit_now = "--exit" in args
    args = [a for a in args if a != "--exit"]
    mode, rest = args[0], args[1:]
    out({"event": "ready", "pid": os.getpid(), "main_tid": threading.get_native_id()})
    sys.stdin.readline()
    if mode == "sleep":
        res = mode_sleep(int(rest[0]), int(rest[1]))
    elif mode == "hash":
        res = mode_hash(int(rest[0]), int(rest[1]), int(rest[2]))
    elif mode == "spin":
        res = mode_spin(int(rest[0]), float(rest[1]))
    elif mode == "gc":
        res = mode_gc(int(rest[0]))
    elif mode == "contend":
        res = mode_contend(*(int(a) for a in rest[:3]))
    elif mode == "churn":
        res = mode_churn(int(rest[0]), int(rest[1]))
    else:
        raise SystemExit(f"unknown mode {mode}")
    res["event"] = "done"
    out(res)
    if not exit_now:
        sys.stdin.read()


if __name__ == "__main__":
    main()
