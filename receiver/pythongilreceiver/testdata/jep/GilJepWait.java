// Java threads that wait for the GIL where Jep enters Python
// (PyEval_AcquireThread), the way request threads of a Java service calling
// Python do. Each round, a holder thread runs a pure-Python loop (the switch
// interval is set to 1 s, so it is not forced off), and WAITERS fresh Java
// threads, each with its own SharedInterpreter made beforehand, wait until
// the holder is in its loop, read System.nanoTime() (CLOCK_MONOTONIC), mark
// that they asked and enter Python, where the first statement reads
// time.monotonic_ns(); the holder reads it around its loop, which lasts
// until SPIN_MS after every waiter asked. The holder's loop and the waiters
// meet through a small shared file mapping that each side reads without
// the GIL's help (Jep lets go of the GIL while Python calls Java): on a
// loaded host a waiter may run late or early, never outside the loop. Each
// waiter's wait lies between its two readings and ends after the loop,
// just before the second reading (unless the thread is preempted as it
// wakes). Each waiter then leaves Python and enters it again uncontended
// once (the wait must not stretch over that), and exits.
//
// Protocol (gilwork.py's): a ready line once libpython is loaded; then, for
// each line on stdin, ROUNDS rounds and a result line with each waiter's
// native thread id and its two readings; exits when stdin closes.
//
// Usage: java -cp jep.jar:. GilJepWait ROUNDS WAITERS SPIN_MS
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CountDownLatch;
import jep.SharedInterpreter;

public class GilJepWait {
    // The shared mapping's ints: LOOPING is set by the holder once in its
    // loop, ASKED + i by waiter i once it read its first clock.
    static final int LOOPING = 0;
    static final int ASKED = 1;
    static final VarHandle INTS = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.nativeOrder());

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        int waiters = Integer.parseInt(args[1]);
        int spinMs = Integer.parseInt(args[2]);
        try (SharedInterpreter warm = new SharedInterpreter()) {
            warm.exec("import sys, time");
            warm.exec("sys.setswitchinterval(1.0)");
        }
        System.out.println("{\"event\":\"ready\",\"pid\":" + ProcessHandle.current().pid() + "}");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (in.readLine() != null) {
            StringBuilder sb = new StringBuilder("{\"event\":\"done\",\"waits\":[");
            boolean first = true;
            for (int r = 0; r < rounds; r++) {
                for (String w : round(waiters, spinMs)) {
                    sb.append(first ? "" : ",").append(w);
                    first = false;
                }
            }
            System.out.println(sb.append("]}"));
            System.out.flush();
        }
    }

    // round runs one holder and the waiters; it returns each waiter's
    // {"tid":..,"before":..,"entered":..,"spin":[start,end]}, spin being the
    // holder's loop (time.monotonic_ns() at its start and end).
    static String[] round(int waiters, int spinMs) throws Exception {
        Path shmPath = Files.createTempFile("giljepwait", ".shm");
        ByteBuffer shm;
        try (FileChannel ch = FileChannel.open(shmPath, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            shm = ch.map(FileChannel.MapMode.READ_WRITE, 0, 4 * (ASKED + waiters));
        }
        try {
            return round(waiters, spinMs, shm, shmPath);
        } finally {
            Files.delete(shmPath);
        }
    }

    static String[] round(int waiters, int spinMs, ByteBuffer shm, Path shmPath) throws Exception {
        CountDownLatch ready = new CountDownLatch(waiters);
        String[] out = new String[waiters];
        long[] spin = new long[2];
        Throwable[] errors = new Throwable[waiters + 1];
        Thread[] ts = new Thread[waiters + 1];
        for (int i = 0; i < waiters; i++) {
            final int idx = i;
            ts[i] = new Thread(() -> {
                try (SharedInterpreter py = new SharedInterpreter()) {
                    py.exec("import threading, time");
                    ready.countDown();
                    while ((int) INTS.getVolatile(shm, 4 * LOOPING) == 0) {
                        Thread.sleep(1);
                    }
                    long before = System.nanoTime();
                    INTS.setVolatile(shm, 4 * (ASKED + idx), 1);
                    py.exec("entered = time.monotonic_ns()");
                    long entered = ((Number) py.getValue("entered")).longValue();
                    long tid = ((Number) py.getValue("threading.get_native_id()")).longValue();
                    out[idx] = "\"tid\":" + tid + ",\"before\":" + before + ",\"entered\":" + entered;
                } catch (Throwable t) {
                    errors[idx] = t;
                }
            }, "jep-waiter-" + i);
            ts[i].start();
        }
        ready.await();
        ts[waiters] = new Thread(() -> {
            try (SharedInterpreter py = new SharedInterpreter()) {
                py.set("shm_path", shmPath.toString());
                // Gives up 10 s in if some waiter never asks (its reading
                // then falls outside the loop, which the test reports).
                py.exec("import mmap, os, struct, time\n"
                        + "fd = os.open(shm_path, os.O_RDWR)\n"
                        + "shm = mmap.mmap(fd, " + 4 * (ASKED + waiters) + ")\n"
                        + "os.close(fd)\n"
                        + "want = (1,) * " + waiters + "\n"
                        + "start = time.monotonic_ns()\n"
                        + "struct.pack_into('=i', shm, " + 4 * LOOPING + ", 1)\n"
                        + "asked = 0\n"
                        + "while True:\n"
                        + "    now = time.monotonic_ns()\n"
                        + "    if not asked and struct.unpack_from('=" + waiters + "i', shm, " + 4 * ASKED + ") == want:\n"
                        + "        asked = now\n"
                        + "    if asked and now >= asked + " + spinMs + " * 1000000 or now >= start + 10 * 10**9:\n"
                        + "        break\n"
                        + "end = time.monotonic_ns()\n"
                        + "shm.close()\n");
                spin[0] = ((Number) py.getValue("start")).longValue();
                spin[1] = ((Number) py.getValue("end")).longValue();
            } catch (Throwable t) {
                errors[waiters] = t;
            }
        }, "jep-holder");
        ts[waiters].start();
        for (Thread t : ts) {
            t.join();
        }
        for (Throwable t : errors) {
            if (t != null) {
                throw new RuntimeException(t);
            }
        }
        for (int i = 0; i < waiters; i++) {
            out[i] = "{" + out[i] + ",\"spin\":[" + spin[0] + "," + spin[1] + "]}";
        }
        return out;
    }
}
