# Shared by up.sh, down.sh, smoke.sh and workload.sh (build.sh takes log and
# wait_ci from it): where the local cluster keeps its
# files and which names and addresses it owns. Everything it makes is named
# here, so that down.sh removes exactly that and nothing else.
# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this

CLUSTER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$CLUSTER_SRC/../.." && pwd)
C=${CLUSTER_DIR:-$REPO_ROOT/.cache/cluster}
# Mounts are found by their path in /proc/mounts, which the kernel writes
# without symlinks: a .cache that is a link elsewhere left them mounted.
C=$(realpath -m "$C")
BIN=$C/bin
PKI=$C/pki
RUN=$C/run # pid files
LOG=$C/log
KUBECONFIG_ADMIN=$C/kubeconfig

NODE_NAME=otelcol-ai-node
# The node's address: its own /32 on the bridge the cluster makes. Pods are on
# the same bridge; nothing is routed off the machine (no masquerade, the
# machine's ip_forward is left as it is).
BRIDGE=otelcol-ai0
NODE_IP=10.243.0.1
POD_CIDR=10.244.0.0/24
POD_GW=10.244.0.1
SERVICE_CIDR=10.96.0.0/24
SERVICE_API_IP=10.96.0.1
CNI_NET=otelcol-ai-cluster
# iptables chain (filter table, jumped to from FORWARD) that keeps pod traffic
# on the machine. down.sh removes it with kube-proxy's and CNI's chains.
FW_CHAIN=OTELCOL-AI-CLUSTER
# kubelet's --cgroup-root: its QoS tree (kubepods/...) lives under this name in
# every hierarchy, apart from anything else on the machine.
CGROUP_ROOT=otelcol-ai-cluster

ETCD_CLIENT=127.0.0.1:2379
ETCD_PEER=127.0.0.1:2380
API_PORT=6443
API_URL=https://$NODE_IP:$API_PORT

CTRD=$C/containerd
CTRD_SOCK=$CTRD/containerd.sock
# Seen as /var/lib inside the cluster's mount namespace: kubelet's root dir is
# /var/lib/kubelet there (pod-resources, device-plugins, pods/ where chart
# hostPaths expect them), and libcni's result cache /var/lib/cni.
VARLIB=$C/ns/varlib
KUBELET_DIR=$VARLIB/kubelet
# Seen as /var/log inside the cluster's mount namespace (pods' logs, kubelet's
# /var/log/containers symlinks).
VARLOG=$C/ns/varlog
MNTNS=$RUN/mnt.ns
CNI_DIR=$C/cni
CNI_BIN=/usr/lib/cni
# containerd 1.6 puts its shims' sockets here whatever its state dir:
# s/<sha256 of "<containerd socket>/<namespace>/<id>">.
SHIM_SOCKETS=/run/containerd/s

PAUSE_IMAGE=otelcol-ai.local/pause:1
HELLO_IMAGE=otelcol-ai.local/hello:1
# The scenario's workload image (workload.sh), by the name the issue gives it;
# containerd's full name for otelcol-ai-workload:dev.
WORKLOAD_IMAGE=docker.io/library/otelcol-ai-workload:dev
# The chart's default image.repository, otelcol-ai/otelcol-ai, as containerd
# names it.
AGENT_IMAGE_REPO=docker.io/otelcol-ai/otelcol-ai
AGENT_NS=otelcol-ai
RELEASE=otelcol-ai

# Daemons in start order (down.sh stops them in reverse).
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

log() { printf '[cluster %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" --cache-dir "$C/kubectl-cache" "$@"; }
helm() {
	HELM_CACHE_HOME=$C/helm/cache HELM_CONFIG_HOME=$C/helm/config HELM_DATA_HOME=$C/helm/data \
		"$BIN/helm" --kubeconfig "$KUBECONFIG_ADMIN" "$@"
}
ctr() { command ctr --address "$CTRD_SOCK" --namespace k8s.io "$@"; }
crictl() { "$BIN/crictl" --config /dev/null --runtime-endpoint "unix://$CTRD_SOCK" --image-endpoint "unix://$CTRD_SOCK" --timeout 20s "$@"; }

# The roots of the mounted cgroup hierarchies: each v1 controller's and the
# unified one (hybrid, as here), or the single cgroup2 root.
cgroup_mounts() { findmnt -rn -t cgroup,cgroup2 -o TARGET | sort -u; }

# The cgroup directories named CGROUP_ROOT, one per mounted hierarchy.
cgroup_roots() {
	local m
	for m in $(cgroup_mounts); do
		[ -d "$m/$CGROUP_ROOT" ] && echo "$m/$CGROUP_ROOT"
	done
	return 0
}

# pid_of NAME: the pid in NAME's pid file while that process still runs the
# binary it was started with (a reused pid is not ours).
pid_of() {
	local f=$RUN/$1.pid pid exe
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[ "$exe" = "$(cat "$RUN/$1.exe" 2>/dev/null)" ] || return 1
	echo "$pid"
}

# wait_for WHAT SECONDS CMD...: polls CMD every half second.
wait_for() {
	local what=$1 n=$(($2 * 2)) i
	shift 2
	for ((i = 0; i < n; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	die "$what not ready after ${n}x0.5 s (logs in $LOG)"
}

# Waits while the project's full test suite runs (it owns the CPUs then).
wait_ci() {
	local said=
	while [ -e /tmp/ci-running ]; do
		[ -n "$said" ] || { log "/tmp/ci-running exists: waiting for the test suite to finish"; said=1; }
		sleep 30
	done
}
