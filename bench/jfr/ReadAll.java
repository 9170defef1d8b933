// ReadAll times the JDK's own reader, jdk.jfr.consumer.RecordingFile, reading
// every event of a recording (each RecordedEvent is fully parsed, constants
// resolved). Usage: java ReadAll.java FILE [PASSES]
// It prints one line per pass and a final line
//   RESULT mode=jdk events=<n> best_ms=<ms> first_ms=<ms> events_per_s=<n> mb_per_s=<x>
import java.io.File;
import java.nio.file.Path;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

public class ReadAll {
    public static void main(String[] args) throws Exception {
        Path path = Path.of(args[0]);
        int passes = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        long size = new File(args[0]).length();
        long best = Long.MAX_VALUE, first = 0, events = 0, checksum = 0;
        for (int p = 0; p < passes; p++) {
            long start = System.nanoTime();
            long n = 0;
            try (RecordingFile rf = new RecordingFile(path)) {
                while (rf.hasMoreEvents()) {
                    RecordedEvent e = rf.readEvent();
                    checksum += e.getStartTime().getNano();
                    n++;
                }
            }
            long el = System.nanoTime() - start;
            if (p == 0) first = el;
            best = Math.min(best, el);
            events = n;
            System.out.printf("pass %d: %d events in %d ms%n", p + 1, n, el / 1_000_000);
        }
        double secs = best / 1e9;
        System.out.printf("RESULT mode=jdk events=%d best_ms=%d first_ms=%d events_per_s=%.0f mb_per_s=%.1f checksum=%d%n",
                events, best / 1_000_000, first / 1_000_000, events / secs, size / 1e6 / secs, checksum & 0xff);
    }
}
