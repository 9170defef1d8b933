import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.Random;

/**
 * A GC-heavy workload for the zero-touch recording's overhead
 * (receiver/jfrreceiver BenchmarkZeroTouchOverhead): allocation churn with
 * a survivor set, so that young collections are frequent and some objects
 * are promoted. Usage: java GCBench.java WARMUP_MS MEASURE_MS. It warms up,
 * prints "warm", waits for a line on stdin, then measures for MEASURE_MS
 * and prints allocation operations per second and the collectors' pause
 * count and time over the measurement (GarbageCollectorMXBean; concurrent
 * cycles left out).
 */
public class GCBench {
    static volatile Object sink;

    public static void main(String[] args) throws Exception {
        long warm = Long.parseLong(args[0]);
        long measure = Long.parseLong(args[1]);
        Object[] keep = new Object[8192];
        Random random = new Random(42);
        churn(warm, keep, random);
        System.out.println("warm");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        long count0 = gcCount(), time0 = gcMillis();
        long start = System.nanoTime();
        long ops = churn(measure, keep, random);
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.printf("ops_per_s=%.1f gc_count=%d gc_ms=%d%n", ops / seconds, gcCount() - count0, gcMillis() - time0);
    }

    static long churn(long millis, Object[] keep, Random random) {
        long ops = 0;
        long end = System.currentTimeMillis() + millis;
        while (System.currentTimeMillis() < end) {
            for (int i = 0; i < 1000; i++) {
                byte[] b = new byte[64 + random.nextInt(4096)];
                if ((i & 7) == 0) {
                    keep[random.nextInt(keep.length)] = b;
                }
                if ((i & 511) == 0) {
                    keep[random.nextInt(keep.length)] = new long[32768];
                }
                sink = b;
            }
            ops += 1000;
        }
        return ops;
    }

    static boolean isPause(GarbageCollectorMXBean gc) {
        return !gc.getName().contains("Concurrent") && !gc.getName().contains("Cycles");
    }

    static long gcCount() {
        long n = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (isPause(gc)) {
                n += gc.getCollectionCount();
            }
        }
        return n;
    }

    static long gcMillis() {
        long n = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (isPause(gc)) {
                n += gc.getCollectionTime();
            }
        }
        return n;
    }
}
