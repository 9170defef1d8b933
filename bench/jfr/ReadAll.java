// ReadAll times the JDK's own reader, jdk.jfr.consumer.RecordingFile, reading
// every event of a recording (each RecordedEvent is fully parsed, constants
// resolved). Usage: java ReadAll.java FILE [PASSES [READS]]
// It prints one line per pass and a final line
//   RESULT mode=jdk events=<n> first_ms=<ms> best_ms=<ms> first_cpu_ms=<ms> best_cpu_ms=<ms> events_per_s=<n> mb_per_s=<x> checksum=<n> first_us=<us> best_us=<us> first_cpu_us=<us> best_cpu_us=<us>
// A pass reads the file READS times (default 1) and its times are per read:
// the process CPU time the JDK reports moves in 10 ms steps, so a small file
// is read several times per pass.
// first_* is the first pass in this JVM (JVM start excluded; classes loaded
// and code JIT-compiled during it), best_* the fastest pass. *_ms is wall
// time; *_cpu_ms is the CPU time of the whole process during the pass (the
// reading thread plus the JIT compiler and GC threads that serve it), which
// stays meaningful when the machine is shared. events_per_s and mb_per_s
// are for the best wall time.
import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

public class ReadAll {
    public static void main(String[] args) throws Exception {
        Path path = Path.of(args[0]);
        int passes = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        int reads = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        long size = new File(args[0]).length();
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long best = Long.MAX_VALUE, first = 0, bestCpu = Long.MAX_VALUE, firstCpu = 0, events = 0, checksum = 0;
        for (int p = 0; p < passes; p++) {
            long cpu0 = os.getProcessCpuTime();
            long start = System.nanoTime();
            long n = 0;
            for (int r = 0; r < reads; r++) {
                n = 0;
                try (RecordingFile rf = new RecordingFile(path)) {
                    while (rf.hasMoreEvents()) {
                        RecordedEvent e = rf.readEvent();
                        checksum += e.getStartTime().getNano();
                        n++;
                    }
                }
            }
            long el = (System.nanoTime() - start) / reads;
            long cpu = (os.getProcessCpuTime() - cpu0) / reads;
            if (p == 0) {
                first = el;
                firstCpu = cpu;
            }
            best = Math.min(best, el);
            bestCpu = Math.min(bestCpu, cpu);
            events = n;
            System.out.printf("pass %d: %d events in %d ms (CPU %d ms)%n", p + 1, n, el / 1_000_000, cpu / 1_000_000);
        }
        double secs = best / 1e9;
        System.out.printf("RESULT mode=jdk events=%d first_ms=%d best_ms=%d first_cpu_ms=%d best_cpu_ms=%d events_per_s=%.0f mb_per_s=%.1f checksum=%d first_us=%d best_us=%d first_cpu_us=%d best_cpu_us=%d%n",
                events, first / 1_000_000, best / 1_000_000, firstCpu / 1_000_000, bestCpu / 1_000_000,
                events / secs, size / 1e6 / secs, checksum & 0xff,
                first / 1_000, best / 1_000, firstCpu / 1_000, bestCpu / 1_000);
    }
}
