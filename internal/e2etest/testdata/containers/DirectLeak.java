import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Leaks direct buffers: 256 KiB every 100 ms, kept forever. Prints the pid
 * it sees itself as first (one JSON line), then the MiB leaked every second.
 */
public class DirectLeak {
    public static void main(String[] args) throws Exception {
        System.out.println("{\"PID\": " + ProcessHandle.current().pid() + "}");
        List<ByteBuffer> kept = new ArrayList<>();
        for (long tick = 1; ; tick++) {
            ByteBuffer b = ByteBuffer.allocateDirect(256 << 10);
            b.put(0, (byte) 1);
            kept.add(b);
            if (tick % 10 == 0) {
                System.out.println("{\"LeakedMiB\": " + kept.size() / 4 + "}");
            }
            Thread.sleep(100);
        }
    }
}
