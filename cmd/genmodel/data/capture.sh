#!/bin/bash
# Captures a training or evaluation set for runtime_overlap's forest: runs the
# hybrid example (examples/hybrid) under the collector and extracts its spans.
#
#   sudo cmd/genmodel/data/capture.sh ALLOCATORS REQUESTS > spans.csv
#
# ALLOCATORS=0 is the healthy service (healthy-train.csv, healthy-holdout.csv
# were made with 0 600, twice); 2 is the example's default allocation
# pressure (stressed.csv: 2 600). Needs root for pythongil's probes, the
# built collector (make build) and the example's setup (make -C
# examples/hybrid setup). Ports 24317, 23133 and 28888 on loopback.
set -euo pipefail
allocators=${1:?ALLOCATORS}
requests=${2:?REQUESTS}
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/jfr"
export OTELCOL_AI_OTLP_GRPC_ENDPOINT=127.0.0.1:24317 OTELCOL_AI_HEALTH_ENDPOINT=127.0.0.1:23133 OTELCOL_AI_TELEMETRY_PORT=28888
cd "$root/examples/hybrid"
HYBRID_OUT=$out "$root/dist/otelcol-ai" --config collector.yaml >"$out/collector.log" 2>&1 &
collector=$!
sleep 6
make run-embedded OUT="$out" ALLOCATORS="$allocators" REQUESTS="$requests" \
	OTLP_ENDPOINT=http://127.0.0.1:24317 >"$out/service.log" 2>&1
sleep 8 # runtimecorrelation holds spans for late windows, then batch
kill -TERM "$collector"
wait "$collector" || true
cd "$root"
go run ./cmd/genmodel extract "$out/traces.jsonl"
