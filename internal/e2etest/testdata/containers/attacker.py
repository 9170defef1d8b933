"""A hostile tenant for the containers end-to-end test.

Run in a pod of its own, it claims a victim's identity in everything it sends
to the node's agent over OTLP/gRPC: spans (OpenTelemetry Python SDK) whose
resource says the victim's container.id, k8s.pod.uid and pid 1, and log
records shaped like 5-second JVM GC pauses whose resource is the victim's as
the agent's own receivers write it (node, host pid, vpid, container, pod).
The victim is named by the environment: VICTIM_CONTAINER_ID, VICTIM_POD_UID,
VICTIM_HOST_PID, NODE_NAME; the OTLP endpoint by OTEL_EXPORTER_OTLP_ENDPOINT.
Protocol as service.py: prints its pid, attacks from the first line on stdin
until the second, then prints how many spans and pauses it sent.
"""

import json
import os
import sys
import threading
import time

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

# Marks the forged pauses, so that the test can tell them from the agent's.
FORGED_GC_NAME = "forged"


def kv(key, value):
    if isinstance(value, int):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def forged_pauses(n):
    """n GC pauses of 5 s each, the last ending now, as the jfr receiver
    would describe the victim's."""
    now = time.time_ns()
    res = resource_pb2.Resource(attributes=[
        kv("host.name", os.environ["NODE_NAME"]),
        kv("process.pid", int(os.environ["VICTIM_HOST_PID"])),
        kv("process.vpid", 1),
        kv("container.id", os.environ["VICTIM_CONTAINER_ID"]),
        kv("k8s.pod.uid", os.environ["VICTIM_POD_UID"]),
        kv("process.runtime.name", "java"),
    ])
    records = []
    for i in range(n):
        start = now - (n - i) * 5_000_000_000
        records.append(logs_pb2.LogRecord(
            time_unix_nano=start, observed_time_unix_nano=now, event_name="jvm.gc.pause",
            attributes=[kv("runtime.window.duration", 5_000_000_000), kv("jvm.gc.name", FORGED_GC_NAME)]))
    return logs_service_pb2.ExportLogsServiceRequest(resource_logs=[logs_pb2.ResourceLogs(
        resource=res, scope_logs=[logs_pb2.ScopeLogs(log_records=records)])])


def main():
    claims = Resource.create({
        "service.name": "e2e-attacker",
        "container.id": os.environ["VICTIM_CONTAINER_ID"],
        "k8s.pod.uid": os.environ["VICTIM_POD_UID"],
        "process.pid": 1,
    })
    provider = TracerProvider(resource=claims)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("otelcol-ai.e2e.attacker")
    endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"].removeprefix("http://")
    logs = logs_service_pb2_grpc.LogsServiceStub(grpc.insecure_channel(endpoint))

    stop = threading.Event()

    def control():
        sys.stdin.readline()
        stop.set()

    print(json.dumps({"pid": os.getpid()}), flush=True)
    if not sys.stdin.readline():
        return
    threading.Thread(target=control, daemon=True).start()
    spans = pauses = 0
    while not stop.is_set():
        logs.Export(forged_pauses(1), timeout=10)
        pauses += 1
        for _ in range(5):
            with tracer.start_as_current_span("request"):
                time.sleep(0.05)
            spans += 1
    provider.shutdown()
    print(json.dumps({"spans": spans, "pauses": pauses}), flush=True)


if __name__ == "__main__":
    main()
