#!/bin/sh
# Times `jfrstat print --json` against the JDK's `jfr print --json` (JDK 17
# and JDK 25) on one recording, in one run, and checks that jfrstat writes
# exactly what JDK 25's tool writes.
#
# For each tool it reports wall time, CPU time (user + system, from
# /usr/bin/time) and peak RSS, and the JDK's time over jfrstat's as a
# ratio; it fails if jfrstat's peak RSS reaches 64 MB. Output goes to /dev/null for the timings; the comparison runs both
# tools once more into cmp through FIFOs, so nothing of the output is kept.
#
# Environment: JFR_BENCH_FILE (the recording; default the one jfr.sh makes
# in JFR_BENCH_DIR), JFR_BENCH_DIR, JDK17_HOME and JDK25_HOME (default: the
# jfr on PATH and /usr/lib/jvm/temurin-25-jdk-amd64), JFR_PRINT_RUNS
# (timed runs per tool, default 3; the best is reported).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${JFR_BENCH_DIR:-${TMPDIR:-/tmp}/otelcol-ai-jfr-bench}
FILE=${JFR_BENCH_FILE:-$DIR/g1-profile-mixed.jfr}
RUNS=${JFR_PRINT_RUNS:-3}
[ -f "$FILE" ] || { echo "no recording at $FILE (run bench/jfr/jfr.sh first, or set JFR_BENCH_FILE)" >&2; exit 1; }
if [ -n "${JDK17_HOME:-}" ]; then JFR17="$JDK17_HOME/bin/jfr"; else JFR17=$(command -v jfr); fi
JFR25="${JDK25_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/jfr"
for t in "$JFR17" "$JFR25"; do [ -x "$t" ] || { echo "missing $t" >&2; exit 1; }; done

mkdir -p "$DIR"
(cd "$ROOT" && go build -o "$DIR/jfrstat" ./cmd/jfrstat)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# measure NAME CMD...: the best of RUNS runs by CPU time, as "wall cpu rss".
measure() {
  name=$1; shift
  best=""
  i=0
  while [ $i -lt "$RUNS" ]; do
    /usr/bin/time -o "$WORK/t" -f '%e %U %S %M' "$@" print --json "$FILE" >/dev/null
    line=$(awk '{ printf "%.2f %.2f %d", $1, $2 + $3, $4 / 1024 }' "$WORK/t")
    if [ -z "$best" ] || awk -v a="$line" -v b="$best" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[2] < y[2]) }'; then
      best=$line
    fi
    i=$((i + 1))
  done
  echo "$name $best"
}

echo "recording: $FILE ($(wc -c < "$FILE" | tr -d ' ') bytes), best of $RUNS runs by CPU time"
jdk17=$(measure jdk17 "$JFR17")
jdk25=$(measure jdk25 "$JFR25")
ours=$(measure jfrstat "$DIR/jfrstat")

mkfifo "$WORK/a" "$WORK/b"
"$DIR/jfrstat" print --json "$FILE" > "$WORK/a" &
"$JFR25" print --json "$FILE" > "$WORK/b" &
if cmp -s "$WORK/a" "$WORK/b"; then same=yes; else same=NO; fi
wait

f() { echo "$1" | cut -d' ' -f"$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }'; }
printf '%-26s %8s %8s %8s %14s %14s\n' tool wall_s cpu_s rss_mb "x jfrstat wall" "x jfrstat cpu"
for r in "$jdk17" "$jdk25" "$ours"; do
  printf '%-26s %8s %8s %8s %14s %14s\n' "$(f "$r" 1) print --json" "$(f "$r" 2)" "$(f "$r" 3)" "$(f "$r" 4)" \
    "$(ratio "$(f "$r" 2)" "$(f "$ours" 2)")" "$(ratio "$(f "$r" 3)" "$(f "$ours" 3)")"
done
echo "jfrstat output identical to JDK 25's: $same"
[ "$same" = yes ]
# Printing holds a chunk at a time: the peak RSS must stay under 64 MB.
[ "$(f "$ours" 4)" -lt 64 ] || { echo "jfrstat peak RSS $(f "$ours" 4) MB, want under 64 MB" >&2; exit 1; }
