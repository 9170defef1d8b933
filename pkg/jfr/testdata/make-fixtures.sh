#!/bin/sh
# Regenerates the committed fixtures: small real recordings and the JDK's own
# `jfr summary` / `jfr print --json` output for them (the oracle that tests
# use where no JDK is installed).
#   JDK17=/path/to/jdk17 JDK25=/path/to/jdk25 ./make-fixtures.sh
set -eu
cd "$(dirname "$0")"
: "${JDK17:?set JDK17 to a JDK 17 home}"
: "${JDK25:?set JDK25 to a JDK 25 home}"
W=../internal/jdktest/Workload.java
X=$(pwd)/../internal/jdktest/extra.jfc
EVENTS=jdk.GarbageCollection,jdk.GCPhasePause,jdk.SafepointBegin,jdk.SafepointEnd,jdk.ExecuteVMOperation,jdk.GCHeapSummary,jdk.DirectBufferStatistics,jdk.NativeMemoryUsage,jdk.NativeMemoryUsageTotal,jdk.GCHeapMemoryUsage

rec() { # jdk name flags...
  jdk=$1 name=$2; shift 2
  rm -f "$name.jfr"
  "$jdk/bin/java" -Xmx256m "$@" -XX:StartFlightRecording=filename="$name.jfr",settings=default,settings="$X" "$W" 800 >/dev/null
  "$jdk/bin/jfr" summary "$name.jfr" > "$name.summary.txt"
  "$jdk/bin/jfr" print --json --events "$EVENTS" "$name.jfr" > "$name.oracle.json"
}
rec "$JDK17" g1-default-jdk17 -XX:+UseG1GC
rec "$JDK25" zgc-default-nmt-jdk25 -XX:+UseZGC -XX:NativeMemoryTracking=summary
