// Workload gives the JVM something to record: allocation churn that keeps
// the collector busy, explicit GCs, direct buffers, contended and parked
// threads. Usage: java Workload.java MILLIS [rotate]
// With "rotate", a second recording starts and stops midway: each start and
// stop makes the JVM begin a new chunk, so the file gets several chunks.
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

public class Workload {
    static volatile Object sink;
    static final Object lock = new Object();

    public static void main(String[] args) throws Exception {
        long millis = args.length > 0 ? Long.parseLong(args[0]) : 2000;
        long end = System.currentTimeMillis() + millis;
        Thread churn = new Thread(() -> {
            while (System.currentTimeMillis() < end) {
                sink = new byte[512 + (int) (System.nanoTime() & 1023)];
            }
        }, "churn-\u00e9\u4e2d");
        Thread parker = new Thread(() -> {
            while (System.currentTimeMillis() < end) {
                LockSupport.parkNanos(20_000_000L);
                synchronized (lock) {
                    sink = Thread.currentThread().getName();
                }
            }
        }, "parker");
        churn.start();
        parker.start();
        List<Object> live = new ArrayList<>();
        List<ByteBuffer> direct = new ArrayList<>();
        long nextGC = System.currentTimeMillis() + 300;
        boolean rotate = args.length > 1 && args[1].equals("rotate");
        long rotateAt = System.currentTimeMillis() + millis / 3;
        jdk.jfr.Recording second = null;
        int i = 0;
        while (System.currentTimeMillis() < end) {
            live.add(new long[128 + (i & 255)]);
            if (live.size() > 10_000) {
                live.clear();
            }
            if (++i % 20_000 == 0) {
                direct.add(ByteBuffer.allocateDirect(8192));
                synchronized (lock) {
                    sink = String.valueOf(i);
                }
            }
            if (rotate && second == null && System.currentTimeMillis() > rotateAt) {
                second = new jdk.jfr.Recording();
                second.start();
                rotateAt = System.currentTimeMillis() + millis / 3;
            } else if (second != null && rotate && System.currentTimeMillis() > rotateAt) {
                second.stop();
                second.close();
                rotate = false;
            }
            if (System.currentTimeMillis() > nextGC) {
                System.gc();
                nextGC = System.currentTimeMillis() + 700;
            }
        }
        if (rotate) { // a loaded machine can end the loop before the rotation's times came
            if (second == null) {
                second = new jdk.jfr.Recording();
                second.start();
            }
            second.stop();
            second.close();
        }
        churn.join();
        parker.join();
        System.out.println("buffers " + direct.size());
    }
}
