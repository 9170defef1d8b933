#!/usr/bin/env bash
# gpu-check.sh — check the nvml receiver against nvidia-smi on a machine with
# an NVIDIA GPU (needs the driver, nvidia-smi and python3; nothing else).
#
#   cmd/gpucheck/gpu-check.sh [GPUCHECK_BINARY] [OUT_DIR]
#
# For about a minute it runs, side by side:
#   - workload.py: allocates 256 MiB of device memory every 2 s through the
#     CUDA driver API (a leak), keeps the GPU busy, then frees most of it;
#   - gpucheck: the nvml receiver on its own (2 s scrapes, leak window 40 s),
#     writing OTLP JSON lines;
#   - nvidia-smi --query-gpu / --query-compute-apps every second.
# Then compare.py pairs the figures by time and prints the differences (device
# memory, total, utilization, power, temperature; per-process memory of every
# compute app), whether the workload's leak was flagged, and the time spent in
# each NVML call. Exit status 0 means every figure was within tolerance.
#
# GPUCHECK_BINARY defaults to building ./cmd/gpucheck with
# Go (cgo) when Go is available; on a machine without Go or network, build it
# elsewhere (`go build -o gpucheck ./cmd/gpucheck`, ~25 MB)
# and pass its path. Environment: GPU_CHECK_DEVICE (default 0),
# GPU_CHECK_CHUNK_MIB (256), GPU_CHECK_STEP_S (2), GPU_CHECK_LEAK_S (36),
# GPU_CHECK_HOLD_S (14).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-}
out=${2:-$repo/out/gpu-check}

command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found; run this on a GPU machine" >&2; exit 2; }
command -v python3 >/dev/null || { echo "gpu-check: python3 not found" >&2; exit 2; }
nvidia-smi -L || { echo "gpu-check: nvidia-smi sees no GPU" >&2; exit 2; }

if [[ -z "$bin" ]]; then
	command -v go >/dev/null || { echo "gpu-check: no gpucheck binary given and no Go to build one" >&2; exit 2; }
	bin="$out/gpucheck"
	mkdir -p "$out"
	(cd "$repo" && CGO_ENABLED=1 go build -o "$bin" ./cmd/gpucheck)
fi

rm -f "$out"/*.jsonl "$out"/*.csv "$out"/nvml-calls.txt
mkdir -p "$out"
leak_s=${GPU_CHECK_LEAK_S:-36}
hold_s=${GPU_CHECK_HOLD_S:-14}
duration=$(( ${leak_s%.*} + ${hold_s%.*} + 8 ))

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

echo "gpu-check: running for ${duration}s, output in $out"
"$bin" -duration "${duration}s" -interval 2s -out "$out" 2>"$out/gpucheck.log" &
receiver_pid=$!

(
	while kill -0 "$receiver_pid" 2>/dev/null; do
		now=$(date +%s.%N)
		nvidia-smi --query-gpu=uuid,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu \
			--format=csv,noheader,nounits | sed "s/^/$now,/" >>"$out/smi-gpu.csv" || true
		nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory \
			--format=csv,noheader,nounits | sed "s/^/$now,/" >>"$out/smi-apps.csv" || true
		sleep 1
	done
) &
pids+=($!)

sleep 3 # let the receiver take a baseline first
python3 "$here/workload.py" >"$out/workload.jsonl" &
pids+=($!)

wait "$receiver_pid" || { echo "gpu-check: gpucheck failed, see $out/gpucheck.log" >&2; exit 1; }
touch "$out/smi-apps.csv" "$out/smi-gpu.csv"
python3 "$here/compare.py" "$out"
