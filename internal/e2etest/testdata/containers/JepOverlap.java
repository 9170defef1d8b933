// A JVM embedding CPython through Jep, for the containers end-to-end test:
// one process whose JVM pauses overlap its own GIL windows. Three Java
// threads, each with its own SharedInterpreter, run pure-Python loops that
// hold the GIL, so the others wait for it; one Java thread allocates short-
// lived arrays into a small heap, so that young collections (and their
// safepoints) come several times a second. Threads in Python are in native
// code, which a safepoint does not stop: their GIL waits go on through the
// pauses.
//
// Prints {"pid":N} once every thread runs, works until a second line on
// stdin or the end of input, then prints {"spans":0,"collections":N}.
//
// Usage: java -cp jep.jar:. -Djava.library.path=<jep dir> JepOverlap
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import jep.SharedInterpreter;

public class JepOverlap {
  static final int PYTHON_THREADS = 3;
  static volatile boolean stopping;
  static volatile long sink;

  public static void main(String[] args) throws Exception {
    AtomicReference<Throwable> failure = new AtomicReference<>();
    CountDownLatch running = new CountDownLatch(PYTHON_THREADS);
    Thread[] threads = new Thread[PYTHON_THREADS + 1];
    for (int i = 0; i < PYTHON_THREADS; i++) {
      threads[i] = new Thread(() -> {
        try (SharedInterpreter py = new SharedInterpreter()) {
          py.exec("def work(n):\n    t = 0\n    for i in range(n):\n        t += i * i % 7\n    return t\n");
          running.countDown();
          while (!stopping) {
            py.exec("work(40000)");
          }
        } catch (Throwable t) {
          failure.compareAndSet(null, t);
          running.countDown();
        }
      }, "jep-python-" + i);
    }
    threads[PYTHON_THREADS] = new Thread(() -> {
      while (!stopping) {
        for (int k = 0; k < 8; k++) {
          sink += new byte[64 * 1024].length;
        }
        try {
          Thread.sleep(1);
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "jep-allocator");
    for (Thread t : threads) {
      t.start();
    }
    running.await();
    if (failure.get() != null) {
      throw new RuntimeException(failure.get());
    }
    System.out.println("{\"pid\":" + ProcessHandle.current().pid() + "}");
    System.out.flush();

    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    if (in.readLine() != null) {
      in.readLine();
    }
    stopping = true;
    for (Thread t : threads) {
      t.join();
    }
    if (failure.get() != null) {
      throw new RuntimeException(failure.get());
    }
    long collections = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      collections += Math.max(0, gc.getCollectionCount());
    }
    System.out.println("{\"spans\":0,\"collections\":" + collections + "}");
    System.out.flush();
  }
}
