package ai.otelcol.hybrid;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import jep.DirectNDArray;
import jep.JepConfig;
import jep.MainInterpreter;
import jep.SharedInterpreter;

/**
 * A miniature of the inference services otelcol-ai watches. Each request is
 * one span: Python pre-processing (numpy, which releases the GIL, and a
 * pure-Python loop, which holds it), an ONNX Runtime session run on a direct
 * buffer the Python side filled in place, and Python post-processing. Other
 * threads allocate enough to make the JVM pause for GC.
 *
 * <p>Mode {@code embedded}: CPython runs inside this JVM through Jep, one
 * SharedInterpreter per worker thread, all behind one GIL. Mode
 * {@code sidecar}: a separate CPython process (python/sidecar.py) on the same
 * host does the Python work over loopback HTTP.
 *
 * <p>Settings come from the environment: HYBRID_MODE (embedded), HYBRID_REQUESTS
 * (300), HYBRID_WORKERS (4), HYBRID_ALLOCATORS (2; 0 for a service that
 * is not under allocation pressure), HYBRID_ROWS (64), HYBRID_MODEL (the shipped
 * runtime_overlap model), HYBRID_PYTHON_PATH (colon-separated sys.path
 * additions), HYBRID_JEP_LIBRARY (libjep.so), HYBRID_SIDECAR
 * (http://127.0.0.1:8765), OTEL_EXPORTER_OTLP_ENDPOINT (http://127.0.0.1:4317).
 */
public final class HybridService {
  private static final int COLUMNS = 5;

  private HybridService() {}

  public static void main(String[] args) throws Exception {
    String mode = env("HYBRID_MODE", "embedded");
    int requests = Integer.parseInt(env("HYBRID_REQUESTS", "300"));
    int workers = Integer.parseInt(env("HYBRID_WORKERS", "4"));
    int rows = Integer.parseInt(env("HYBRID_ROWS", "64"));
    int allocatorThreads = Integer.parseInt(env("HYBRID_ALLOCATORS", "2"));
    String model = env("HYBRID_MODEL", "../../models/runtime_overlap/1/model.onnx");
    String endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
    if (!mode.equals("embedded") && !mode.equals("sidecar")) {
      throw new IllegalArgumentException("HYBRID_MODE must be embedded or sidecar, not " + mode);
    }

    // The processor matches spans to windows by host.name and process.pid:
    // name the host as the kernel does, as the collector's receivers do.
    Resource resource = Resource.getDefault().merge(Resource.create(Attributes.builder()
        .put("service.name", "hybrid-inference")
        .put("host.name", Files.readString(Path.of("/proc/sys/kernel/hostname")).trim())
        .put(AttributeKey.longKey("process.pid"), ProcessHandle.current().pid())
        .put("process.runtime.name", "java")
        .put("process.runtime.version", Runtime.version().toString())
        .build()));
    SdkTracerProvider tracerProvider = SdkTracerProvider.builder()
        .setResource(resource)
        .addSpanProcessor(BatchSpanProcessor.builder(
            OtlpGrpcSpanExporter.builder().setEndpoint(endpoint).build()).build())
        .build();
    Tracer tracer = tracerProvider.get("ai.otelcol.hybrid");

    if (mode.equals("embedded")) {
      String jepLibrary = System.getenv("HYBRID_JEP_LIBRARY");
      if (jepLibrary != null) {
        MainInterpreter.setJepLibraryPath(jepLibrary);
      }
      JepConfig config = new JepConfig();
      for (String p : env("HYBRID_PYTHON_PATH", "python").split(":")) {
        config.addIncludePaths(p);
      }
      SharedInterpreter.setConfig(config);
    }

    AtomicBoolean running = new AtomicBoolean(true);
    List<Thread> allocators = startAllocators(allocatorThreads, running);
    OrtEnvironment ortEnv = OrtEnvironment.getEnvironment();
    AtomicInteger next = new AtomicInteger();
    AtomicInteger failed = new AtomicInteger();
    try (OrtSession session = ortEnv.createSession(model, new OrtSession.SessionOptions())) {
      ExecutorService pool = Executors.newFixedThreadPool(workers);
      for (int w = 0; w < workers; w++) {
        pool.submit(() -> {
          try (PythonSide python = mode.equals("embedded") ? new EmbeddedPython() : new SidecarPython()) {
            FloatBuffer features = ByteBuffer.allocateDirect(rows * COLUMNS * Float.BYTES)
                .order(ByteOrder.nativeOrder()).asFloatBuffer();
            for (int i = next.getAndIncrement(); i < requests; i = next.getAndIncrement()) {
              serve(tracer, ortEnv, session, python, features, rows, i, mode, failed);
            }
          } catch (Exception e) {
            e.printStackTrace();
            failed.incrementAndGet();
          }
          return null;
        });
      }
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.HOURS);
    } finally {
      running.set(false);
      for (Thread t : allocators) {
        t.join();
      }
      tracerProvider.shutdown().join(30, TimeUnit.SECONDS);
    }
    System.out.printf("served %d requests (%s, %d workers), %d failed%n", requests, mode, workers, failed.get());
    if (failed.get() > 0) {
      System.exit(1);
    }
  }

  /** One request: pre-process in Python, run the model, post-process in Python. */
  private static void serve(Tracer tracer, OrtEnvironment ortEnv, OrtSession session, PythonSide python,
      FloatBuffer features, int rows, int request, String mode, AtomicInteger failed) {
    Span span = tracer.spanBuilder("infer").setSpanKind(SpanKind.SERVER)
        .setAttribute("hybrid.request", request).setAttribute("hybrid.mode", mode).startSpan();
    try (Scope ignored = span.makeCurrent()) {
      python.preprocess(features, rows, request);
      float explained;
      try (OnnxTensor input = OnnxTensor.createTensor(ortEnv, features, new long[] {rows, COLUMNS});
          OrtSession.Result result = session.run(Map.of("features", input))) {
        float[][] fraction = (float[][]) result.get("explained_fraction").orElseThrow().getValue();
        explained = fraction[0][0];
      }
      span.setAttribute("hybrid.postprocess.checksum", python.postprocess(explained, request));
    } catch (OrtException | IOException | InterruptedException | RuntimeException e) {
      span.recordException(e);
      span.setStatus(StatusCode.ERROR);
      failed.incrementAndGet();
    } finally {
      span.end();
    }
  }

  /**
   * Threads that keep allocating short-lived arrays (about 256 MB/s each) so
   * that the JVM collects several times a second.
   */
  private static List<Thread> startAllocators(int n, AtomicBoolean running) {
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Thread t = new Thread(() -> {
        byte[][] ring = new byte[256][];
        long k = 0;
        while (running.get()) {
          ring[(int) (k++ % ring.length)] = new byte[256 * 1024];
          try {
            Thread.sleep(1);
          } catch (InterruptedException e) {
            return;
          }
        }
      }, "allocator-" + i);
      t.start();
      threads.add(t);
    }
    return threads;
  }

  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  /** Where the Python work happens. */
  private interface PythonSide extends AutoCloseable {
    /** Fills features (rows × 5, native order, direct) for one request. */
    void preprocess(FloatBuffer features, int rows, int request) throws IOException, InterruptedException;

    /** Post-processes the model's answer; returns a checksum to put on the span. */
    long postprocess(float explained, int request) throws IOException, InterruptedException;

    @Override
    void close() throws Exception;
  }

  /** CPython in this process: one Jep SharedInterpreter, used from the thread that made it. */
  private static final class EmbeddedPython implements PythonSide {
    private final SharedInterpreter interp = new SharedInterpreter();

    EmbeddedPython() {
      interp.exec("import prepost");
    }

    @Override
    public void preprocess(FloatBuffer features, int rows, int request) {
      // The numpy array Python sees is the direct buffer itself: what it
      // writes is what ONNX Runtime reads, with no copy on either side.
      interp.invoke("prepost.preprocess", new DirectNDArray<>(features, rows, COLUMNS), request);
    }

    @Override
    public long postprocess(float explained, int request) {
      return ((Number) interp.invoke("prepost.postprocess", (double) explained, request)).longValue();
    }

    @Override
    public void close() {
      interp.close();
    }
  }

  /** CPython in another process on this host (python/sidecar.py), over loopback HTTP. */
  private static final class SidecarPython implements PythonSide {
    private final HttpClient client = HttpClient.newHttpClient();
    private final String base = env("HYBRID_SIDECAR", "http://127.0.0.1:8765");

    @Override
    public void preprocess(FloatBuffer features, int rows, int request) throws IOException, InterruptedException {
      HttpResponse<byte[]> resp = client.send(
          HttpRequest.newBuilder(URI.create(base + "/preprocess?rows=" + rows + "&seed=" + request)).GET().build(),
          HttpResponse.BodyHandlers.ofByteArray());
      if (resp.statusCode() != 200 || resp.body().length != rows * COLUMNS * Float.BYTES) {
        throw new IOException("sidecar preprocess: status " + resp.statusCode() + ", " + resp.body().length + " bytes");
      }
      features.clear();
      features.put(ByteBuffer.wrap(resp.body()).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer());
      features.flip();
    }

    @Override
    public long postprocess(float explained, int request) throws IOException, InterruptedException {
      HttpResponse<String> resp = client.send(
          HttpRequest.newBuilder(URI.create(base + "/postprocess?explained=" + explained + "&seed=" + request)).GET().build(),
          HttpResponse.BodyHandlers.ofString());
      if (resp.statusCode() != 200) {
        throw new IOException("sidecar postprocess: status " + resp.statusCode());
      }
      return Long.parseLong(resp.body().trim());
    }

    @Override
    public void close() {}
  }
}
