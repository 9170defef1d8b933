#!/bin/sh
# Benchmarks the inference processor against raw ONNX Runtime calls, in one
# run: the processor's spans/s with the default model (runtime_overlap, the
# latest shipped version) at batch sizes 1, 64 and 512 (feature extraction,
# the run through the onnxinference extension, the attribute writes) against
# onnxruntime_go's Run on ready-made tensors of the same rows with the same
# session options, on one core (GOMAXPROCS=1).
#
# The workload is real: spans of the hybrid example (cmd/genmodel/data, a
# healthy run the model was not trained on and one under allocation
# pressure), with the example's attributes and runtimecorrelation's, taken in
# at least 8 distinct batches so that neither side replays one tensor whose
# branches the CPU has learned. Before each call, with the timer stopped,
# both sides decode that batch's spans from OTLP protobuf as a receiver
# would; the processor annotates them, raw Run leaves them unread.
#
# Two tables, medians of INFERENCE_BENCH_COUNT runs (default 5):
#
#  1. interleaved (BenchmarkProcessorVsRaw): every iteration times one raw Run
#     and one processor call, so that drift of a shared machine slows both
#     alike. Garbage collection can run beside either one's cgo call, so
#     this table charges the processor less for it than the next one.
#  2. separate (BenchmarkProcessor, then BenchmarkRawRun): each in a loop of
#     its own; the processor pays for every collection that runs while it
#     does. The figure to quote.
#
# Each row: spans/s of both, the ratio, and the processor's own time per span
# (its ns/span less raw Run's).
#
# Uses OTELCOL_AI_ONNXRUNTIME_LIB (make bench sets it; a relative path is
# taken from the current folder), else dist/libonnxruntime.so.1 as `make
# build` places it.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COUNT=${INFERENCE_BENCH_COUNT:-5}
case "${OTELCOL_AI_ONNXRUNTIME_LIB:-}" in
  "") OTELCOL_AI_ONNXRUNTIME_LIB=$ROOT/dist/libonnxruntime.so.1 ;;
  /*) ;;
  *) OTELCOL_AI_ONNXRUNTIME_LIB=$(pwd)/$OTELCOL_AI_ONNXRUNTIME_LIB ;;
esac
export OTELCOL_AI_ONNXRUNTIME_LIB
if [ ! -f "$OTELCOL_AI_ONNXRUNTIME_LIB" ]; then
  echo "inference.sh: no ONNX Runtime library at $OTELCOL_AI_ONNXRUNTIME_LIB (run make build, or set OTELCOL_AI_ONNXRUNTIME_LIB)" >&2
  exit 1
fi
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
cd "$ROOT"
go test -run '^$' -bench '^Benchmark(ProcessorVsRaw|Processor|RawRun)$' -cpu 1 -count "$COUNT" \
  ./processor/inferenceprocessor/ | tee "$OUT" | grep -E '^(goos|goarch|cpu|Benchmark)' >&2 || true
if ! grep -q 'spans/s' "$OUT"; then
  echo "inference.sh: no benchmark ran; go test said:" >&2
  cat "$OUT" >&2
  exit 1
fi
awk '
/^Benchmark(ProcessorVsRaw|Processor|RawRun)\/batch=/ {
  split($1, a, "/"); kind = a[1]; sub(/^Benchmark/, "", kind)
  b = a[2]; sub(/^batch=/, "", b); sub(/-[0-9]+$/, "", b)
  batches[b] = 1
  for (i = 2; i < NF; i++) {
    if ($(i+1) == "spans/s") add(kind, b, $i)
    if ($(i+1) == "processor-spans/s") add("VsRaw.Processor", b, $i)
    if ($(i+1) == "raw-spans/s") add("VsRaw.RawRun", b, $i)
  }
}
function add(kind, b, v,   n) { n = ++count[kind, b]; val[kind, b, n] = v }
function median(kind, b,   n, i, j, t, x) {
  n = count[kind, b]
  for (i = 1; i <= n; i++) x[i] = val[kind, b, i]
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
  return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
}
function table(title, proc, raw,   k, b, p, r) {
  printf "\n%s\n%-7s %16s %16s %8s %18s\n", title, "batch", "processor sp/s", "raw Run sp/s", "ratio", "overhead ns/span"
  for (k = 1; k <= 3; k++) {
    b = order[k]
    if (!((proc, b) in count) || !((raw, b) in count)) continue
    p = median(proc, b); r = median(raw, b)
    printf "%-7s %16.0f %16.0f %7.1f%% %18.0f\n", b, p, r, 100 * p / r, 1e9 / p - 1e9 / r
  }
}
END {
  split("1 64 512", order, " ")
  table("interleaved (BenchmarkProcessorVsRaw)", "VsRaw.Processor", "VsRaw.RawRun")
  table("separate (BenchmarkProcessor, BenchmarkRawRun)", "Processor", "RawRun")
}' "$OUT"
