// A JVM embedding CPython through Jep, the way Java inference services call
// Python: several Java threads, each with its own SharedInterpreter, each
// calling into Python N times; every call sleeps D ms in Python, releasing
// the GIL. Prints a ready line once libpython is loaded, waits for a line on
// stdin, runs, prints each thread's native id and the clock readings around
// its sleeps (as gilwork.py's sleep mode: time.time_ns() before and after,
// time.monotonic_ns() before and after), waits for stdin to close.
//
// Usage: java -cp jep.jar:. GilJep THREADS N D_MS
import java.io.BufferedReader;
import java.io.InputStreamReader;
import jep.SharedInterpreter;

public class GilJep {
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        int n = Integer.parseInt(args[1]);
        int dMs = Integer.parseInt(args[2]);
        // Load libpython before the test attaches.
        try (SharedInterpreter warm = new SharedInterpreter()) {
            warm.exec("import threading, time");
        }
        System.out.println("{\"event\":\"ready\",\"pid\":" + ProcessHandle.current().pid() + "}");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        in.readLine();

        long[] tids = new long[threads];
        String[] calls = new String[threads];
        Throwable[] errors = new Throwable[threads];
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            final int idx = i;
            ts[i] = new Thread(() -> {
                try (SharedInterpreter py = new SharedInterpreter()) {
                    py.exec("import json, threading, time");
                    py.exec("calls = []");
                    for (int k = 0; k < n; k++) {
                        py.exec("w0, m0 = time.time_ns(), time.monotonic_ns(); time.sleep(" + (dMs / 1000.0)
                                + "); m1 = time.monotonic_ns(); calls.append([w0, time.time_ns(), m0, m1])");
                    }
                    tids[idx] = ((Number) py.getValue("threading.get_native_id()")).longValue();
                    calls[idx] = (String) py.getValue("json.dumps(calls)");
                } catch (Throwable t) {
                    errors[idx] = t;
                }
            }, "jep-worker-" + i);
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        for (Throwable t : errors) {
            if (t != null) {
                throw new RuntimeException(t);
            }
        }
        StringBuilder sb = new StringBuilder("{\"event\":\"done\",\"n\":" + n + ",\"d_ns\":" + (dMs * 1000000L) + ",\"threads\":[");
        for (int i = 0; i < threads; i++) {
            sb.append(i == 0 ? "" : ",").append("{\"tid\":").append(tids[i]).append(",\"calls\":").append(calls[i]).append("}");
        }
        System.out.println(sb.append("]}"));
        System.out.flush();
        while (in.readLine() != null) {
        }
    }
}
