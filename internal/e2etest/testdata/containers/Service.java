import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;

/**
 * A service for the containers end-to-end test. Each request is a span made
 * through the OpenTelemetry API (the Java agent provides the SDK) around work
 * that allocates enough, in a small heap, to make the JVM pause for GC many
 * times a second. It warms up (same work, no spans) until a first line on
 * stdin, serves until a second line or the end of input, then prints how many
 * spans it ended and exits; the agent's shutdown hook flushes them.
 */
public final class Service {
  private static volatile boolean serving;
  private static volatile boolean stopping;
  private static final ArrayDeque<byte[]> retained = new ArrayDeque<>();
  private static long sink;

  public static void main(String[] args) throws Exception {
    Tracer tracer = GlobalOpenTelemetry.getTracer("otelcol-ai.e2e.containers");
    Thread control = new Thread(Service::control, "control");
    control.setDaemon(true);
    control.start();
    System.out.println("{\"pid\":" + ProcessHandle.current().pid() + "}");
    System.out.flush();
    long spans = 0;
    while (!stopping) {
      if (!serving) {
        work(0);
        Thread.sleep(20);
        continue;
      }
      Span span = tracer.spanBuilder("request").startSpan();
      try (Scope scope = span.makeCurrent()) {
        span.setAttribute("request.index", spans);
        work(spans);
      } finally {
        span.end();
      }
      spans++;
      Thread.sleep(3);
    }
    System.out.println("{\"spans\":" + spans + ",\"sink\":" + (sink & 1) + "}");
    System.out.flush();
  }

  private static void control() {
    try (BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      if (in.readLine() != null) {
        serving = true;
        in.readLine();
      }
    } catch (Exception e) {
      e.printStackTrace();
    }
    stopping = true;
  }

  // About 8 MiB allocated per request, a rolling ~12 MiB of it kept alive so
  // that young collections copy and some objects age into the old generation.
  private static void work(long request) {
    for (int i = 0; i < 512; i++) {
      byte[] b = new byte[16 << 10];
      b[i % b.length] = (byte) (request + i);
      sink += b[(i * 31) % b.length];
      if (i % 8 == 0) {
        retained.addLast(b);
        if (retained.size() > 768) {
          retained.removeFirst();
        }
      }
    }
  }
}
