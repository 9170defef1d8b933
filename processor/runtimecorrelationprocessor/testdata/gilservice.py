"""A 4-thread Python service traced with the OpenTelemetry Python SDK on its
defaults (no resource detectors beyond the SDK's own: no process.pid, no
host.name), for the connection end-to-end test.

Each request is a span around a pure-Python loop, which holds the GIL, and a
hashlib digest of a large buffer, which releases it: the threads keep waiting
for each other's GIL. The threads warm up without spans until a first line on
stdin (the test waits for the collector to probe this process), serve spans
until a second line, then flush and print how many spans they made.
"""

import hashlib
import sys
import threading

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

THREADS = 4
BUFFER = b"x" * (4 << 20)

serving = threading.Event()
stopping = threading.Event()
lock = threading.Lock()
spans = 0


def work():
    total = 0
    for i in range(60000):
        total += i * i % 7
    hashlib.sha256(BUFFER).digest()
    return total


def serve(tracer):
    global spans
    while not stopping.is_set():
        if not serving.is_set():
            work()
            continue
        with tracer.start_as_current_span("request"):
            work()
        with lock:
            spans += 1


def main():
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(insecure=True)))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("gilservice")
    threads = [threading.Thread(target=serve, args=(tracer,)) for _ in range(THREADS)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    sys.stdin.readline()
    serving.set()
    sys.stdin.readline()
    stopping.set()
    for t in threads:
        t.join()
    provider.shutdown()
    print(spans, flush=True)


if __name__ == "__main__":
    main()
