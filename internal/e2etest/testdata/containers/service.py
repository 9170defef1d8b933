"""A CPython service for the containers end-to-end test.

Four threads serve requests; each request is a span (OpenTelemetry Python SDK,
its resource from the detectors OTEL_EXPERIMENTAL_RESOURCE_DETECTORS names)
around a pure-Python loop, which holds the GIL and so makes the other threads
wait for it, and a short sleep, which releases it. The threads warm up (same
work, no spans) until a first line on stdin and serve until a second line, the
end of input or SIGTERM (as a container's pid 1 it gets no default handler);
then the spans are flushed and their number printed.
"""

import json
import os
import signal
import sys
import threading
import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

THREADS = 4

serving = threading.Event()
stopping = threading.Event()
lock = threading.Lock()
spans = 0


def work(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    time.sleep(0.002)
    return total


def serve(tracer):
    global spans
    while not stopping.is_set():
        if not serving.is_set():
            work(5000)
            time.sleep(0.02)
            continue
        with tracer.start_as_current_span("request"):
            work(60000)
        with lock:
            spans += 1


def control():
    if sys.stdin.readline():
        serving.set()
        sys.stdin.readline()
    stopping.set()


def main():
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("otelcol-ai.e2e.containers")
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    threading.Thread(target=control, daemon=True).start()
    workers = [threading.Thread(target=serve, args=(tracer,), name=f"worker-{i}") for i in range(THREADS)]
    for w in workers:
        w.start()
    print(json.dumps({"pid": os.getpid()}), flush=True)
    for w in workers:
        w.join()
    provider.shutdown()
    print(json.dumps({"spans": spans}), flush=True)


if __name__ == "__main__":
    main()
