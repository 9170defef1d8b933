#!/usr/bin/env bash
# gpu-join.sh — on a machine with an NVIDIA GPU, check the GPU leak join end
# to end with real parts: the built collector on its embedded default
# configuration (leak windows shortened so that the check takes minutes),
# two JVMs whose JNI library (jnijoin/gpuleak.c) allocates device memory
# through the CUDA driver API and never frees it, and the driver's NVML.
#
#   cmd/gpucheck/gpu-join.sh [OTELCOL_AI_BINARY] [OUT_DIR]
#
# - the "joined" JVM pins JNI global references from the start and, after
#   GPU_JOIN_DELAY_S, allocates GPU_JOIN_MIB of device memory a second as
#   well: its gpu.memory.leak_suspected record must say jvm_join "joined"
#   naming jni_global_refs, and a jvm.memory.leak_suspected record must name
#   jni_global_refs;
# - the "alone" JVM allocates the same GPU memory and pins nothing: its
#   record must say jvm_join "none" (a leak no JVM account sees).
# Exit status 0 when both hold (jnijoin/join_check.py), 1 on a wrong join,
# 2 when something is missing, 3 on a timeout.
#
# Needs java and javac (JDK 17 or later), gcc, python3 and the built
# collector (default: dist/otelcol-ai; `make build`). Environment:
# GPU_JOIN_DEVICE (0), GPU_JOIN_MIB (16), GPU_JOIN_REFS (200),
# GPU_JOIN_DELAY_S (30), GPU_JOIN_WINDOW (90s: both leak windows, longer than jfr's fast tier),
# GPU_JOIN_TIMEOUT_S (300), GPU_JOIN_CUDA_LIBRARY (libcuda.so.1),
# GPU_JOIN_NVML_LIBRARY (empty: the driver's libnvidia-ml.so.1).
#
# GPU_JOIN_DRY_RUN=1 runs the same steps on a machine without a GPU, with
# jnijoin/fakecuda.c in place of the CUDA driver and the stub NVML library
# of the tests (which reads the fake's allocations): it checks this script,
# the configuration and the checker, not the GPU.
set -euo pipefail

# The embedded default follows every JVM on the host (and starts a recording
# in those that record none): where unshare and root allow, the check runs
# in a PID namespace of its own, so that it sees only its own JVMs and
# leaves the others alone. GPU_JOIN_SHARED_PIDS=1 keeps the host's.
if [[ -z "${GPU_JOIN_ISOLATED:-}" && "${GPU_JOIN_SHARED_PIDS:-}" != 1 && $(id -u) == 0 ]] && command -v unshare >/dev/null; then
	exec unshare --pid --fork --mount-proc env GPU_JOIN_ISOLATED=1 "$0" "$@"
fi

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/dist/otelcol-ai}
out=${2:-$repo/out/gpu-join}
device=${GPU_JOIN_DEVICE:-0}
mib=${GPU_JOIN_MIB:-16}
refs=${GPU_JOIN_REFS:-200}
delay=${GPU_JOIN_DELAY_S:-30}
window=${GPU_JOIN_WINDOW:-90s}
timeout_s=${GPU_JOIN_TIMEOUT_S:-300}
cuda=${GPU_JOIN_CUDA_LIBRARY:-}
nvml=${GPU_JOIN_NVML_LIBRARY:-}
dry_configs=()

need() { command -v "$1" >/dev/null || { echo "gpu-join: $1 not found" >&2; exit 2; }; }
need java; need javac; need gcc; need python3
[[ -x "$bin" ]] || { echo "gpu-join: no collector at $bin (make build, or pass its path)" >&2; exit 2; }

rm -rf "$out"
mkdir -p "$out/classes" "$out/collector"
java_home=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
javac -d "$out/classes" "$here/jnijoin/GpuLeak.java"
gcc -Wall -Werror -shared -fPIC -I"$java_home/include" -I"$java_home/include/linux" \
	-o "$out/libgpuleak.so" "$here/jnijoin/gpuleak.c" -ldl

if [[ "${GPU_JOIN_DRY_RUN:-}" == 1 ]]; then
	echo "gpu-join: DRY RUN: fake CUDA and stub NVML, no GPU involved"
	gcc -Wall -Werror -shared -fPIC -o "$out/libcuda.so.1" "$here/jnijoin/fakecuda.c"
	nvml_h=$(cd "$repo" && go list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml)/pkg/nvml
	gcc -Wall -Werror -Wno-deprecated-declarations -shared -fPIC -I"$nvml_h" \
		-o "$out/libnvidia-ml.so.1" "$repo/receiver/nvmlreceiver/nvmlstubtest/testdata/nvmlstub.c"
	cuda=$out/libcuda.so.1
	nvml=$out/libnvidia-ml.so.1
	export GPU_JOIN_FAKE_PROCESSES=$out/gpu-processes NVML_STUB_PROCESSES=$out/gpu-processes
	# The fake's pids are this PID namespace's, not the host's that a real
	# NVML reports: nvml is told so by a proc root other than /proc (its
	# rule for a mounted host /proc).
	ln -s /proc "$out/proc"
	dry_configs=(--config "yaml:receivers::nvml::processes::proc_root: $out/proc")
else
	need nvidia-smi
	nvidia-smi -L || { echo "gpu-join: nvidia-smi sees no GPU" >&2; exit 2; }
fi
export GPU_JOIN_CUDA_LIBRARY=$cuda

# Loopback ports nobody holds, for every endpoint of the embedded default.
read -r p1 p2 p3 p4 p5 p6 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
export OTELCOL_AI_OTLP_GRPC_ENDPOINT=127.0.0.1:$p1 OTELCOL_AI_OTLP_HTTP_ENDPOINT=127.0.0.1:$p2 \
	OTELCOL_AI_PROMETHEUS_ENDPOINT=127.0.0.1:$p3 OTELCOL_AI_HEALTH_ENDPOINT=127.0.0.1:$p4 \
	OTELCOL_AI_TIMELINE_ENDPOINT=127.0.0.1:$p5 OTELCOL_AI_TELEMETRY_PORT=$p6 \
	OTELCOL_AI_OUTPUT_DIR=$out/collector OTELCOL_AI_NVML_INTERVAL=2s

configs=(--config embedded:default
	--config "yaml:receivers::nvml::leak_detection::window: $window"
	--config "yaml:receivers::nvml::leak_detection::min_samples: 5"
	--config "yaml:receivers::nvml::pod_resources::endpoint: \"\""
	--config "yaml:receivers::jfr::collection_interval: 2s"
	--config "yaml:receivers::jfr::accounts::jni_references::interval: 2s"
	--config "yaml:receivers::jfr::accounts::leak_detection::window: $window")
if [[ -n "$nvml" ]]; then
	configs+=(--config "yaml:receivers::nvml::library_path: $nvml")
fi
configs+=("${dry_configs[@]}")

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

"$bin" "${configs[@]}" >"$out/collector.log" 2>&1 &
collector=$!
pids+=("$collector")
for _ in $(seq 60); do
	if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$p4/', timeout=1)" 2>/dev/null; then
		break
	fi
	kill -0 "$collector" 2>/dev/null || { echo "gpu-join: the collector exited, see $out/collector.log" >&2; exit 2; }
	sleep 1
done

start_jvm() {
	java -Xms128m -Xmx128m -cp "$out/classes" GpuLeak "$out/libgpuleak.so" "$1" "$mib" "$refs" "$delay" "$device" \
		>"$out/jvm-$1.log" 2>&1 &
	pids+=($!)
	eval "$2=$!"
}
start_jvm joined joined_pid
start_jvm alone alone_pid
begin=$(date +%s)
echo "gpu-join: collector pid $collector, JVMs joined=$joined_pid alone=$alone_pid; waiting up to ${timeout_s}s; output in $out"

status=3
while (( $(date +%s) - begin < timeout_s )); do
	for p in "$joined_pid" "$alone_pid"; do
		kill -0 "$p" 2>/dev/null || { echo "gpu-join: JVM $p exited, see $out/jvm-*.log" >&2; tail -5 "$out"/jvm-*.log >&2; exit 2; }
	done
	set +e
	python3 "$here/jnijoin/join_check.py" "$out/collector/logs.jsonl" "$joined_pid" "$alone_pid" >"$out/check.json"
	status=$?
	set -e
	[[ $status == 3 ]] || break
	sleep 5
done
cat "$out/check.json"
case $status in
0) echo "gpu-join: PASS after $(( $(date +%s) - begin ))s" ;;
1) echo "gpu-join: FAIL: a wrong join (above)" >&2 ;;
*) echo "gpu-join: FAIL: records missing after ${timeout_s}s (above; collector log in $out/collector.log)" >&2 ;;
esac
exit "$status"
