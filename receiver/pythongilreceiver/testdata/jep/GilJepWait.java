// Java threads that wait for the GIL where Jep enters Python
// (PyEval_AcquireThread), the way request threads of a Java service calling
// Python do. Each round, a holder thread runs a pure-Python loop for SPIN_MS
// (the switch interval is set to 1 s, so it is not forced off); once it holds
// the GIL it releases a latch from Python, and WAITERS fresh Java threads,
// each with its own SharedInterpreter made beforehand, wait 2 ms, read
// System.nanoTime() (CLOCK_MONOTONIC) and enter Python, where the first
// statement reads time.monotonic_ns(); the holder reads it around its loop.
// A waiter whose first reading falls inside the loop waits for the GIL: the
// wait lies between its two readings and ends after the loop, just before
// the second reading (unless the thread is preempted as it wakes). Each waiter then
// leaves Python and enters it again uncontended once (the wait must not
// stretch over that), and exits.
//
// Protocol (gilwork.py's): a ready line once libpython is loaded; then, for
// each line on stdin, ROUNDS rounds and a result line with each waiter's
// native thread id and its two readings; exits when stdin closes.
//
// Usage: java -cp jep.jar:. GilJepWait ROUNDS WAITERS SPIN_MS
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.CountDownLatch;
import jep.SharedInterpreter;

public class GilJepWait {
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
        CountDownLatch ready = new CountDownLatch(waiters);
        CountDownLatch holding = new CountDownLatch(1);
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
                    holding.await();
                    // Jep lets go of the GIL while Python calls Java (the
                    // holder's countDown): give it time to be back in its loop.
                    Thread.sleep(2);
                    long before = System.nanoTime();
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
                py.set("holding", holding);
                py.exec("import time\n"
                        + "holding.countDown()\n"
                        + "start = time.monotonic_ns()\n"
                        + "end = start + " + spinMs + " * 1000000\n"
                        + "while time.monotonic_ns() < end:\n"
                        + "    pass\n"
                        + "end = time.monotonic_ns()\n");
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
