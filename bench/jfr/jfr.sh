#!/bin/sh
# Benchmarks pkg/jfr against the JDK's own reader on one large recording.
#
# 1. Makes (once, cached) a G1 `profile` recording of at least 50 MB with the
#    JDK on PATH / JAVA_HOME, running pkg/jfr/internal/jdktest/Workload.java.
# 2. Compiles ReadAll.java (jdk.jfr.consumer.RecordingFile reading every
#    event) and times it in-process: best of 3 passes, after JIT warm-up.
# 3. Times pkg/jfr reading every event (cmd jfrbench, best of 3 passes):
#    the generic reader on one core (GOMAXPROCS=1), the selective Scanner on
#    one core, and the generic reader with chunks decoded in parallel.
# 4. Prints events/s and the ratio to the JDK for each.
#
# Environment: JFR_BENCH_FILE (use this recording instead), JFR_BENCH_DIR
# (cache folder), JFR_BENCH_SECONDS (workload length, default 25),
# JAVA_HOME (the JDK; 17 is the reference).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${JFR_BENCH_DIR:-${TMPDIR:-/tmp}/otelcol-ai-jfr-bench}
mkdir -p "$DIR"
if [ -n "${JAVA_HOME:-}" ]; then BIN="$JAVA_HOME/bin/"; else BIN=""; fi
JAVA="${BIN}java"
JAVAC="${BIN}javac"
MIN_BYTES=50000000

size() { wc -c < "$1" | tr -d ' '; }

FILE=${JFR_BENCH_FILE:-$DIR/g1-profile.jfr}
if [ ! -f "$FILE" ] || [ "$(size "$FILE")" -lt $MIN_BYTES ]; then
  [ -n "${JFR_BENCH_FILE:-}" ] && { echo "JFR_BENCH_FILE=$FILE is missing or under 50 MB" >&2; exit 1; }
  secs=${JFR_BENCH_SECONDS:-25}
  for attempt in 1 2 3; do
    echo "recording ${secs}s of a G1 profile workload into $FILE ..."
    rm -f "$FILE"
    "$JAVA" -Xmx256m -Xmn8m -XX:+UseG1GC -XX:ParallelGCThreads=8 -Xlog:disable \
      -XX:StartFlightRecording=filename="$FILE",settings=profile \
      "$ROOT/pkg/jfr/internal/jdktest/Workload.java" $((secs * 1000)) >/dev/null
    [ "$(size "$FILE")" -ge $MIN_BYTES ] && break
    secs=$((secs * 2))
  done
fi
echo "recording: $FILE ($(size "$FILE") bytes)"
"$JAVA" -version 2>&1 | head -1

mkdir -p "$DIR/classes"
"$JAVAC" -d "$DIR/classes" "$ROOT/bench/jfr/ReadAll.java"
(cd "$ROOT" && go build -o "$DIR/jfrbench" ./bench/jfr/jfrbench)

result() { grep '^RESULT' | tail -1; }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

jdk=$("$JAVA" -cp "$DIR/classes" ReadAll "$FILE" 3 | result)
generic1=$(GOMAXPROCS=1 "$DIR/jfrbench" -file "$FILE" -mode generic -workers 1 | result)
scan1=$(GOMAXPROCS=1 "$DIR/jfrbench" -file "$FILE" -mode scan -workers 1 | result)
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
genericN=$("$DIR/jfrbench" -file "$FILE" -mode generic -workers "$cores" | result)

jdk_eps=$(field "$jdk" events_per_s)
echo
printf '%-34s %12s %10s %10s %8s\n' reader events/s MB/s best_ms "x JDK"
for r in "$jdk" "$generic1" "$scan1" "$genericN"; do
  mode=$(field "$r" mode); workers=$(field "$r" workers)
  case $mode in
    jdk) name="JDK RecordingFile (1 thread)";;
    generic) name="pkg/jfr Events, $workers worker(s)";;
    scan) name="pkg/jfr Scan, $workers worker(s)";;
  esac
  [ "$mode" = generic ] && [ "$workers" = 1 ] && name="pkg/jfr Events, 1 core"
  [ "$mode" = scan ] && name="pkg/jfr Scan, 1 core"
  eps=$(field "$r" events_per_s)
  printf '%-34s %12s %10s %10s %8s\n' "$name" "$eps" "$(field "$r" mb_per_s)" "$(field "$r" best_ms)" \
    "$(awk -v a="$eps" -v b="$jdk_eps" 'BEGIN { printf "%.1f", a / b }')"
done
echo
echo "peak Go heap: generic 1 core $(field "$generic1" peak_heap_mb) MB, parallel $(field "$genericN" peak_heap_mb) MB; events: $(field "$jdk" events) (JDK) / $(field "$generic1" events) (pkg/jfr)"
