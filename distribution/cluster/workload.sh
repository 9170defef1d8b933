#!/usr/bin/env bash
# The workload image of the cluster scenario, otelcol-ai-workload:dev, built
# here and never pulled: Debian 12 (mmdebstrap) with its OpenJDK 17 and its
# CPython 3.11 (the distribution's python3: libpython linked into the
# interpreter, symbols stripped to .dynsym), a venv with the OpenTelemetry
# Python SDK, Jep and numpy (PyPI), the OpenTelemetry Java agent and API jars
# (Maven Central, through ~/.m2 as `make test-deps` puts them), and the
# scenario's programs:
#   /opt/workload/classes   Service.class (internal/e2etest/testdata/containers)
#   /opt/workload/*.py      service.py, the containers e2e test's CPython service
#   /opt/hybrid             the hybrid example (examples/hybrid), built with Maven
# Default user 1000:1000. Writes $C/images/otelcol-ai-workload.tar (an OCI layout, tag
# dev), rebuilt only when an input changes. Run by up.sh as root.
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set -euo pipefail

JEP_VERSION=4.3.2
# Not the 2.22.0 the host tests use: on the image's JDK 17 (17.0.21) the
# 2.22.0 agent's premain failed with ClassCircularityError
# java/lang/invoke/MethodHandle$1 in 3 of 4 cluster runs, before the
# collector had touched the JVM (its attach log says so); the agent fixed
# that in 2.31.0 (opentelemetry-java-instrumentation #19398).
OTEL_JAVAAGENT_VERSION=2.33.1
OTEL_JAVA_API_VERSION=1.56.0
OTEL_PYTHON_VERSION=1.45.2
OTEL_PYTHON_CONTAINERID_VERSION=0.66b1
NUMPY_VERSION=2.4.6
PKGS=openjdk-17-jdk-headless,python3,python3-venv,python3-dev,libpython3.11,gcc,libc6-dev,procps,ca-certificates

m2=${MAVEN_REPO:-$HOME/.m2/repository}
agent_jar=$m2/io/opentelemetry/javaagent/opentelemetry-javaagent/$OTEL_JAVAAGENT_VERSION/opentelemetry-javaagent-$OTEL_JAVAAGENT_VERSION.jar
api_jars=("$m2/io/opentelemetry/opentelemetry-api/$OTEL_JAVA_API_VERSION/opentelemetry-api-$OTEL_JAVA_API_VERSION.jar"
	"$m2/io/opentelemetry/opentelemetry-context/$OTEL_JAVA_API_VERSION/opentelemetry-context-$OTEL_JAVA_API_VERSION.jar"
	"$m2/io/opentelemetry/opentelemetry-common/$OTEL_JAVA_API_VERSION/opentelemetry-common-$OTEL_JAVA_API_VERSION.jar")
testdata=$REPO_ROOT/internal/e2etest/testdata/containers
hybrid=$REPO_ROOT/examples/hybrid
out=$C/images/otelcol-ai-workload.tar

[ -f "$agent_jar" ] || mvn -q dependency:get -Dartifact="io.opentelemetry.javaagent:opentelemetry-javaagent:$OTEL_JAVAAGENT_VERSION"
[ -f "${api_jars[2]}" ] || mvn -q dependency:get -Dartifact="io.opentelemetry:opentelemetry-api:$OTEL_JAVA_API_VERSION"

# Rebuilt when this script, the programs or the example change.
stamp=$( (
	cat "${BASH_SOURCE[0]}" "$testdata/Service.java" "$testdata/service.py" "$hybrid/pom.xml" "$hybrid/requirements.txt"
	find "$hybrid/src" "$hybrid/python" -type f -print0 | sort -z | xargs -0 cat
) | sha256sum | cut -c1-16)
if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
for t in mmdebstrap umoci mvn javac; do command -v $t >/dev/null || die "$t is needed to build the workload image"; done

w=$C/images/workload.work
rm -rf "$w" && mkdir -p "$w"
t0=$SECONDS
log "building the workload image (Debian 12, OpenJDK 17, CPython 3.11, Jep, the OpenTelemetry SDKs)"
# The venv is made and filled inside the new root (its python3 and JDK), so
# Jep is built against them; pip reaches PyPI as the rest of the project does
# (with this machine's CA bundle, PIP_CERT where set, mounted over the image's
# for the time of the install: Debian's pip reads only the system bundle; the
# image keeps Debian's).
mmdebstrap --quiet --mode=root --variant=apt --include="$PKGS" \
	--customize-hook='groupadd -R "$1" -g 1000 app; useradd -R "$1" -u 1000 -g 1000 -m -s /bin/sh app' \
	bookworm "$w/rootfs" "deb http://deb.debian.org/debian bookworm main" "deb http://deb.debian.org/debian-security bookworm-security main"
root=$w/rootfs
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/opt/pip-ca.crt"
unshare --mount --propagation private sh -ec '
	mount --rbind /dev "$1/dev"; mount -t proc proc "$1/proc"
	mount --bind "$1/opt/pip-ca.crt" "$1/etc/ssl/certs/ca-certificates.crt"
	chroot "$1" env -u PIP_FIND_LINKS -u PIP_CERT JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 sh -ec "python3 -m venv /opt/venv; /opt/venv/bin/pip install --quiet --no-cache-dir $2"
' sh "$root" "jep==$JEP_VERSION numpy==$NUMPY_VERSION opentelemetry-sdk==$OTEL_PYTHON_VERSION opentelemetry-exporter-otlp-proto-grpc==$OTEL_PYTHON_VERSION opentelemetry-resource-detector-containerid==$OTEL_PYTHON_CONTAINERID_VERSION"
rm -f "$root/etc/resolv.conf" "$root/opt/pip-ca.crt"
site=$(echo "$root"/opt/venv/lib/python3.11/site-packages)
[ -f "$site/jep/jep-$JEP_VERSION.jar" ] || die "Jep's jar not in the venv ($site/jep)"

# The containers e2e test's Java service, compiled against the API the agent
# bridges, for the image's Java 17.
mkdir -p "$root/opt/workload/classes" "$root/opt/workload/lib"
cp "$agent_jar" "$root/opt/workload/opentelemetry-javaagent.jar"
cp "${api_jars[@]}" "$root/opt/workload/lib/"
javac --release 17 -d "$root/opt/workload/classes" -cp "$(printf '%s:' "${api_jars[@]}")" "$testdata/Service.java"
cp "$testdata/service.py" "$root/opt/workload/service.py"

# The hybrid example, built by Maven on this machine (its dependencies from
# Maven Central; Jep's jar from the image's venv, installed into ~/.m2 as
# examples/hybrid/Makefile does) and copied in with the shipped model.
hb=$w/hybrid
mkdir -p "$hb"
cp -R "$hybrid/pom.xml" "$hybrid/src" "$hybrid/python" "$hb/"
(cd "$hb" && mvn -q -Dmaven.repo.local="$m2" install:install-file -Dfile="$site/jep/jep-$JEP_VERSION.jar" \
	-DgroupId=black.ninia -DartifactId=jep -Dversion="$JEP_VERSION" -Dpackaging=jar)
(cd "$hb" && mvn -q -Dmaven.repo.local="$m2" package dependency:copy-dependencies -DskipTests)
mkdir -p "$root/opt/hybrid/models/runtime_overlap/1"
cp -R "$hb/target/classes" "$hb/target/dependency" "$hb/python" "$root/opt/hybrid/"
cp "$REPO_ROOT/models/runtime_overlap/1/model.onnx" "$root/opt/hybrid/models/runtime_overlap/1/"
chmod -R a+rX "$root/opt"

log "packing the workload image ($(du -sh "$root" | cut -f1))"
umoci init --layout "$w/oci"
umoci new --image "$w/oci:dev"
umoci unpack --image "$w/oci:dev" "$w/bundle" >/dev/null
rmdir "$w/bundle/rootfs" && mv "$root" "$w/bundle/rootfs"
umoci repack --image "$w/oci:dev" "$w/bundle"
umoci config --image "$w/oci:dev" --config.user 1000:1000 --config.workingdir /home/app \
	--config.env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --author otelcol-ai
umoci gc --layout "$w/oci"
tar -C "$w/oci" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "$stamp" >"$out.stamp"
rm -rf "$w"
log "workload image built in $((SECONDS - t0)) s ($(du -h "$out" | cut -f1))"
