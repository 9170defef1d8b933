// MixedWorkload is the benchmark's application: a small service-like program
// whose G1 `profile` recording holds a realistic mix of event types rather
// than one type dominating. Usage: java MixedWorkload.java MILLIS
//
// What it does, and the events it is there for:
//   - worker threads handle "requests" through call paths of varying depth
//     (ExecutionSample, ObjectAllocationSample, NativeMethodSample with many
//     distinct stack traces), keeping part of what they build in an LRU
//     cache so objects survive, get promoted and fill the old generation
//     (young and mixed collections, concurrent cycles, PLAB promotion,
//     GCPhaseParallel, GCPhaseConcurrent, TenuringDistribution, heap
//     summaries); an occasional System.gc() adds full collections;
//   - a shared monitor held for more than 10 ms, Object.wait, Thread.sleep,
//     a ReentrantLock and LockSupport.parkNanos (JavaMonitorEnter,
//     JavaMonitorWait, ThreadSleep, ThreadPark, JavaMonitorInflate);
//   - a loopback server that answers after a delay, and file writes, forces
//     and large reads (SocketRead, SocketWrite, FileRead, FileWrite,
//     FileForce);
//   - thrown Errors and exceptions (JavaErrorThrow, ExceptionStatistics);
//   - proxy classes defined in throwaway class loaders (class loading and
//     unloading statistics, ClassLoaderStatistics), short-lived threads
//     (ThreadStart, ThreadEnd), direct buffers, and the JIT compiling and
//     deoptimizing the varied code paths.
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

public class MixedWorkload {
    static volatile long end;
    static volatile Object sink;
    static final Object monitor = new Object();
    static final ReentrantLock lock = new ReentrantLock();
    static final AtomicLong handled = new AtomicLong();

    // LRU caches shared by the workers (striped to keep contention modest):
    // what survives here is promoted.
    static final List<Map<Integer, Object>> caches = new ArrayList<>();
    static {
        for (int i = 0; i < 16; i++) {
            caches.add(new LinkedHashMap<>(1 << 12, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<Integer, Object> e) {
                    return size() > 8_000;
                }
            });
        }
    }

    static final class AppError extends Error {
        AppError(String m) { super(m); }
    }

    public static void main(String[] args) throws Exception {
        long millis = args.length > 0 ? Long.parseLong(args[0]) : 10_000;
        end = System.currentTimeMillis() + millis;
        List<Thread> threads = new ArrayList<>();
        ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        threads.add(start("server", () -> serve(server)));
        for (int i = 0; i < 6; i++) {
            int id = i;
            threads.add(start("worker-" + i, () -> work(id)));
        }
        for (int i = 0; i < 6; i++) {
            threads.add(start("client-" + i, () -> client(server.getLocalPort())));
        }
        // An executor's idle threads: they poll a queue with a timeout.
        for (int i = 0; i < 24; i++) {
            threads.add(start("pool-" + i, MixedWorkload::poll));
        }
        for (int i = 0; i < 8; i++) {
            int id = i;
            threads.add(start("timer-" + i, () -> tick(id)));
        }
        threads.add(start("files", MixedWorkload::files));
        threads.add(start("holder", MixedWorkload::holdMonitor));
        threads.add(start("classes", MixedWorkload::classes));
        long nextFull = System.currentTimeMillis() + 5_000;
        List<ByteBuffer> direct = new ArrayList<>();
        while (System.currentTimeMillis() < end) {
            // Short-lived threads, as a pool that grows and shrinks would make.
            Thread t = start("task-" + handled.get() % 1000, () -> sink = compute(3, 200));
            t.join();
            if (direct.size() < 256) {
                direct.add(ByteBuffer.allocateDirect(16 * 1024));
            }
            if (System.currentTimeMillis() > nextFull) {
                System.gc();
                nextFull = System.currentTimeMillis() + 7_000;
            }
            Thread.sleep(15);
        }
        server.close();
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("handled " + handled.get() + " buffers " + direct.size());
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(() -> {
            try {
                r.run();
            } catch (Throwable e) {
                if (System.currentTimeMillis() < end) {
                    e.printStackTrace();
                }
            }
        }, name);
        t.start();
        return t;
    }

    static boolean running() { return System.currentTimeMillis() < end; }

    static final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();

    // poll is an idle executor thread: it parks on the queue's condition
    // with a timeout, and handles what it gets.
    static void poll() {
        try {
            while (running()) {
                Object o = queue.poll(10 + ThreadLocalRandom.current().nextInt(20), TimeUnit.MILLISECONDS);
                if (o != null) {
                    sink = String.valueOf(o);
                }
            }
        } catch (InterruptedException e) {
            // done
        }
    }

    // tick is a periodic task: it sleeps, then does a little work and
    // hands some to the pool.
    static void tick(int id) {
        Random rnd = new Random(100 + id);
        try {
            while (running()) {
                Thread.sleep(10 + rnd.nextInt(10));
                sink = compute(rnd.nextInt(8), 16);
                if (rnd.nextInt(4) == 0) {
                    queue.offer(rnd.nextInt());
                }
            }
        } catch (InterruptedException e) {
            // done
        }
    }

    // work handles requests: varied call depths and shapes, allocation that
    // partly survives in the cache, contention now and then.
    static void work(int id) {
        Random rnd = new Random(id);
        while (running()) {
            int kind = rnd.nextInt(100);
            int depth = 1 + rnd.nextInt(12);
            Object r;
            if (kind < 35) {
                r = compute(depth, 50 + rnd.nextInt(400));
            } else if (kind < 60) {
                r = render(depth, rnd);
            } else if (kind < 80) {
                r = index(depth, rnd);
            } else if (kind < 85) {
                r = parse(depth, rnd);
            } else if (kind < 97) {
                r = fail(depth, rnd);
            } else {
                r = contend(rnd);
            }
            int key = rnd.nextInt(1_000_000);
            Map<Integer, Object> cache = caches.get(key & 15);
            synchronized (cache) {
                cache.put(key, r);
            }
            if (handled.incrementAndGet() % 64 == 0) {
                LockSupport.parkNanos(1_000_000L + rnd.nextInt(14_000_000));
            }
        }
    }

    static Object compute(int depth, int n) {
        if (depth > 0) {
            return depth % 2 == 0 ? compute(depth - 1, n) : computeOdd(depth - 1, n);
        }
        long[] a = new long[n];
        for (int i = 0; i < n; i++) {
            a[i] = (long) i * i ^ (a[Math.max(0, i - 1)] >>> 3);
        }
        return a;
    }

    static Object computeOdd(int depth, int n) {
        return compute(depth, n + 1);
    }

    static Object render(int depth, Random rnd) {
        if (depth > 0) {
            return render(depth - 1, rnd);
        }
        StringBuilder sb = new StringBuilder();
        int n = 5 + rnd.nextInt(60);
        for (int i = 0; i < n; i++) {
            sb.append("<li id=\"").append(rnd.nextInt()).append("\">item ").append(i).append("</li>");
        }
        return sb.toString();
    }

    static Object index(int depth, Random rnd) {
        if (depth > 0) {
            return index(depth - 1, rnd);
        }
        Map<String, List<Integer>> m = new HashMap<>();
        int n = 20 + rnd.nextInt(200);
        for (int i = 0; i < n; i++) {
            m.computeIfAbsent("k" + (i % 37), k -> new ArrayList<>()).add(i);
        }
        return m;
    }

    static Object parse(int depth, Random rnd) {
        if (depth > 0) {
            return parse(depth - 1, rnd);
        }
        String text = Long.toString(rnd.nextLong(), 36) + "," + rnd.nextInt() + ",x" + rnd.nextDouble();
        List<Object> out = new ArrayList<>();
        for (String p : text.split(",")) {
            try {
                out.add(Long.parseLong(p, 36));
            } catch (NumberFormatException e) {
                out.add(p.hashCode()); // an exception, counted by ExceptionStatistics
            }
        }
        return out;
    }

    static Object fail(int depth, Random rnd) {
        try {
            if (depth > 0) {
                return fail(depth - 1, rnd);
            }
            throw new AppError("request " + rnd.nextInt(1000) + " failed");
        } catch (AppError e) {
            return e.getMessage();
        }
    }

    static Object contend(Random rnd) {
        if (rnd.nextBoolean()) {
            synchronized (monitor) {
                return new int[64];
            }
        }
        lock.lock();
        try {
            LockSupport.parkNanos(200_000);
            return new int[32];
        } finally {
            lock.unlock();
        }
    }

    // holdMonitor keeps the shared monitor and the lock for more than 10 ms
    // at a time, so that workers block on them; and waits on the monitor.
    static void holdMonitor() {
        Random rnd = new Random(42);
        while (running()) {
            synchronized (monitor) {
                busy(11 + rnd.nextInt(10));
                try {
                    monitor.wait(12);
                } catch (InterruptedException e) {
                    return;
                }
            }
            lock.lock();
            try {
                busy(11 + rnd.nextInt(5));
            } finally {
                lock.unlock();
            }
            try {
                Thread.sleep(20 + rnd.nextInt(30));
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static void busy(long ms) {
        long until = System.nanoTime() + ms * 1_000_000L;
        long x = 0;
        while (System.nanoTime() < until) {
            x += System.identityHashCode(new Object());
        }
        sink = x;
    }

    // serve answers each request after a delay, so client reads block.
    static void serve(ServerSocket server) {
        while (running()) {
            try {
                Socket s = server.accept();
                start("conn-" + s.getPort(), () -> answer(s));
            } catch (Exception e) {
                if (!running()) {
                    return;
                }
            }
        }
    }

    static void answer(Socket s) {
        try (s) {
            InputStream in = s.getInputStream();
            OutputStream out = s.getOutputStream();
            byte[] buf = new byte[4096];
            while (running()) {
                int n = in.read(buf);
                if (n <= 0) {
                    break;
                }
                Thread.sleep(11 + ThreadLocalRandom.current().nextInt(8));
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (Exception e) {
            // the client went away
        }
    }

    static void client(int port) {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            byte[] req = new byte[512];
            byte[] buf = new byte[4096];
            while (running()) {
                out.write(req);
                out.flush();
                int got = 0;
                while (got < req.length) {
                    int n = in.read(buf);
                    if (n <= 0) {
                        return;
                    }
                    got += n;
                }
            }
        } catch (Exception e) {
            if (running()) {
                throw new RuntimeException(e);
            }
        }
    }

    // files writes, forces and reads a scratch file in large blocks.
    static void files() {
        try {
            File f = File.createTempFile("mixedworkload", ".dat");
            f.deleteOnExit();
            byte[] block = new byte[8 << 20];
            new Random(7).nextBytes(block);
            while (running()) {
                try (FileOutputStream out = new FileOutputStream(f)) {
                    for (int i = 0; i < 4; i++) {
                        out.write(block);
                    }
                    out.getFD().sync();
                }
                try (FileInputStream in = new FileInputStream(f)) {
                    byte[] all = new byte[32 << 20];
                    int off = 0, n;
                    while ((n = in.read(all, off, all.length - off)) > 0) {
                        off += n;
                    }
                    sink = all.length;
                }
                Thread.sleep(100);
            }
            f.delete();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    public interface Handler {
        Object handle(Object in);
    }

    // classes defines proxy classes in throwaway loaders, which the
    // collector later unloads.
    static void classes() {
        int n = 0;
        while (running()) {
            ClassLoader cl = new ClassLoader(MixedWorkload.class.getClassLoader()) {};
            Handler h = (Handler) Proxy.newProxyInstance(cl, new Class<?>[] {Handler.class},
                    (p, m, a) -> a == null ? null : String.valueOf(a[0]));
            sink = h.handle(n++);
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                return;
            }
        }
    }
}
