import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

// The test workload of package leaktest: every 100 ms it leaks, or does and
// undoes, one tick's worth of native memory, JNI global references or
// direct buffers, and makes heap garbage so that collections happen. Each
// second it prints what it has leaked so far:
// "leaked <native bytes> <global refs> <direct bytes>".
//
// Arguments: <library> <mode: native, direct, healthy, threads> <bytes per
// tick> <refs per tick> <ticks to leak, 0: all along> [threads]. After its
// ticks a leaking mode goes on making heap garbage only.
public class LeakWorkload {
    static native void leak(int bytes, int refs);
    static native void work(int bytes, int refs);

    static Object sink;

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        String mode = args[1];
        int bytes = Integer.parseInt(args[2]);
        int refs = Integer.parseInt(args[3]);
        long leakTicks = Long.parseLong(args[4]);
        if (mode.equals("threads")) {
            // Idle threads, parked: a JVM of that many threads for the
            // thread dump's cost.
            int n = Integer.parseInt(args[5]);
            for (int i = 0; i < n; i++) {
                Thread t = new Thread(() -> {
                    try { Thread.sleep(Long.MAX_VALUE); } catch (InterruptedException e) { }
                }, "idle-" + i);
                t.setDaemon(true);
                t.start();
            }
        }
        List<ByteBuffer> kept = new ArrayList<>();
        long nativeLeaked = 0, refsLeaked = 0, directLeaked = 0;
        long next = System.nanoTime();
        for (long tick = 0; ; tick++) {
            if (leakTicks > 0 && tick == leakTicks) {
                mode = "done";
            }
            switch (mode) {
                case "native":
                    leak(bytes, refs);
                    nativeLeaked += bytes;
                    refsLeaked += refs;
                    break;
                case "direct":
                    kept.add(ByteBuffer.allocateDirect(bytes));
                    directLeaked += bytes;
                    break;
                case "healthy":
                    work(bytes, refs);
                    ByteBuffer b = ByteBuffer.allocateDirect(bytes);
                    b.put(0, (byte) 1);
                    break;
                default:
                    break;
            }
            for (int i = 0; i < 100; i++) {
                sink = new byte[10240];
            }
            if (tick % 10 == 0) {
                System.out.println("leaked " + nativeLeaked + " " + refsLeaked + " " + directLeaked);
            }
            next += 100_000_000L;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
            }
        }
    }
}
