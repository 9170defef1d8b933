import java.util.ArrayList;
import java.util.List;

// A JVM's start-up in miniature, for the fast leak tier's tests: it mallocs
// and touches native memory once (a native library's or a model's load),
// starts idle threads, and loads generated classes G0..G<n-1> spread evenly
// over some seconds, calling each one's methods until they are compiled;
// then it plateaus, doing the leak workload's healthy work (LeakWorkload,
// whose library it shares) for good. It prints "burst <phase>" as each
// phase ends.
//
// Arguments: <library> <native bytes, once> <threads> <classes> <seconds>
// <bytes per tick> <refs per tick> (of the healthy work after).
public class StartupBurst {
    static Object sink;

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        int nativeBytes = Integer.parseInt(args[1]);
        int threads = Integer.parseInt(args[2]);
        int classes = Integer.parseInt(args[3]);
        long seconds = Long.parseLong(args[4]);

        // One allocation, never freed (the leak entry point with no
        // references): memory the process keeps for good.
        LeakWorkload.leak(nativeBytes, 0);
        System.out.println("burst native");

        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> {
                try { Thread.sleep(Long.MAX_VALUE); } catch (InterruptedException e) { }
            }, "burst-idle-" + i);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("burst threads");

        List<Class<?>> loaded = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < classes; i++) {
            Class<?> c = Class.forName("G" + i);
            loaded.add(c);
            long x = 0;
            for (int k = 0; k < 200; k++) {
                x += (Long) c.getMethod("f", long.class).invoke(null, (long) k);
            }
            sink = c.getMethod("g", Object.class).invoke(null, x);
            long due = start + seconds * 1_000_000_000L * (i + 1) / classes;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
            }
        }
        System.out.println("burst classes " + loaded.size());

        LeakWorkload.main(new String[] {args[0], "healthy", args[5], args[6], "0"});
    }
}
