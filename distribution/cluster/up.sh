#!/usr/bin/env bash
# make cluster-up: a one-node Kubernetes on this machine from real upstream
# parts (see README.md). Idempotent: a part that already runs is left running.
# Prints the admin kubeconfig's path on stdout when the node is Ready.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root (it starts containerd and kubelet)"
t_start=$SECONDS

# write FILE: stdin into FILE, only when it differs (kube-proxy exits when its
# config file changes; containerd reloads the CNI folder): a second cluster-up
# leaves running parts alone.
write() {
	local tmp
	tmp=$(mktemp "$1.XXXXXX")
	cat > "$tmp"
	if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

# --- packages ----------------------------------------------------------------
install_packages() {
	local need=()
	command -v containerd >/dev/null || need+=(containerd)
	command -v runc >/dev/null || need+=(runc)
	[ -x $CNI_BIN/bridge ] || need+=(containernetworking-plugins)
	command -v iptables >/dev/null || need+=(iptables)
	command -v conntrack >/dev/null || need+=(conntrack)
	command -v umoci >/dev/null || need+=(umoci)
	command -v nft >/dev/null || need+=(nftables)  # down.sh: deletes the empty tables iptables made
	command -v nfacct >/dev/null || need+=(nfacct) # down.sh: deletes kube-proxy's nfacct counters
	command -v openssl >/dev/null || need+=(openssl)
	command -v gcc >/dev/null || need+=(gcc libc6-dev)
	[ ${#need[@]} = 0 ] && return
	log "installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# --- certificates and kubeconfigs --------------------------------------------
# cert NAME CN O EXT: an EC P-256 key and a certificate signed by the cluster's
# CA (one year), NAME.key/NAME.crt under pki/. Kept when present.
cert() {
	local name=$1 o=$3 ext=$4 subj="/CN=$2"
	[ -s "$PKI/$name.crt" ] && return
	[ -n "$o" ] && subj+="/O=$o"
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext" > "$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
		-days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# kubeconfig FILE CERTNAME: a kubeconfig for the API server with CERTNAME's client certificate.
kubeconfig() {
	[ -s "$1" ] && return
	cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: otelcol-ai
  cluster:
    server: $API_URL
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: otelcol-ai
  context: {cluster: otelcol-ai, user: $2}
current-context: otelcol-ai
EOF
	chmod 600 "$1"
}

make_pki() {
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	if [ ! -s "$PKI/ca.crt" ]; then
		openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
		openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=otelcol-ai-cluster-ca" -days 3650 \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out "$PKI/ca.crt"
	fi
	if [ ! -s "$PKI/sa.key" ]; then
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	fi
	local client=extendedKeyUsage=clientAuth
	cert apiserver kube-apiserver "" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:$SERVICE_API_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters $client
	cert admin kubernetes-admin system:masters $client
	cert controller-manager system:kube-controller-manager "" $client
	cert scheduler system:kube-scheduler "" $client
	cert kube-proxy system:kube-proxy "" $client
	cert kubelet-client "system:node:$NODE_NAME" system:nodes $client
	cert kubelet "$NODE_NAME" "" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
	kubeconfig "$KUBECONFIG_ADMIN" admin
	kubeconfig "$C/controller-manager.kubeconfig" controller-manager
	kubeconfig "$C/scheduler.kubeconfig" scheduler
	kubeconfig "$C/kube-proxy.kubeconfig" kube-proxy
	kubeconfig "$C/kubelet.kubeconfig" kubelet-client
}

# --- images: pause and hello, built here, never pulled -----------------------
# oci_tar NAME BINARY ENTRYPOINT...: a one-layer OCI image holding BINARY at
# /NAME, packed with umoci into images/NAME.tar (an OCI layout, tag "1").
oci_tar() {
	local name=$1 binary=$2 w=$C/images/$1.work
	shift 2
	rm -rf "$w" && mkdir -p "$w"
	umoci init --layout "$w/oci"
	umoci new --image "$w/oci:1"
	umoci unpack --image "$w/oci:1" "$w/bundle" >/dev/null
	install -m 0755 "$binary" "$w/bundle/rootfs/$name"
	umoci repack --image "$w/oci:1" "$w/bundle"
	local ep=() a
	for a in "$@"; do ep+=(--config.entrypoint "$a"); done
	umoci config --image "$w/oci:1" "${ep[@]}" --config.user 65535:65535 --author otelcol-ai
	umoci gc --layout "$w/oci"
	tar -C "$w/oci" -cf "$C/images/$name.tar" .
	rm -rf "$w"
}

build_images() {
	local src=$CLUSTER_SRC/images
	mkdir -p "$C/images"
	if [ ! -s "$C/images/pause.tar" ] || [ "$src/pause/pause.c" -nt "$C/images/pause.tar" ]; then
		log "building the pause image"
		gcc -Os -static -s -o "$C/images/pause.bin" "$src/pause/pause.c"
		oci_tar pause "$C/images/pause.bin" /pause
	fi
	if [ ! -s "$C/images/hello.tar" ] || [ "$src/hello/main.go" -nt "$C/images/hello.tar" ]; then
		log "building the hello image"
		(cd "$src" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$C/images/hello.bin" ./hello)
		oci_tar hello "$C/images/hello.bin" /hello
	fi
	"$CLUSTER_SRC/workload.sh"
}

import_images() {
	local ref tar
	for ref in "$PAUSE_IMAGE" "$HELLO_IMAGE" "$WORKLOAD_IMAGE"; do
		tar=$C/images/$(basename "${ref%:*}").tar
		# Again when the tar was rebuilt since its last import.
		if ctr images ls -q | grep -x "$ref" >/dev/null && [ "$tar.imported" -nt "$tar" ]; then continue; fi
		ctr images import --base-name "${ref%:*}" "$tar" >/dev/null
		touch "$tar.imported"
		log "imported $ref"
	done
}

# --- the chart ----------------------------------------------------------------
# The agent image `make image` built (OTELCOL_AI_IMAGE_OCI, an OCI layout
# tagged OTELCOL_AI_VERSION) imported as the chart's default repository, the
# chart `make chart` packaged (OTELCOL_AI_CHART) installed with values.yaml
# into namespace otelcol-ai, labelled as the chart's README says.
install_chart() {
	local version=${OTELCOL_AI_VERSION:?} layout=${OTELCOL_AI_IMAGE_OCI:?} chart=${OTELCOL_AI_CHART:?}
	[ -f "$layout/index.json" ] || die "$layout: no OCI layout (make image IMAGE_ARCHES=amd64)"
	[ -f "$chart" ] || die "$chart: no chart (make chart)"
	tar -C "$layout" -cf "$C/images/agent.tar" .
	ctr images import --base-name "$AGENT_IMAGE_REPO" "$C/images/agent.tar" >/dev/null
	rm -f "$C/images/agent.tar"
	ctr images ls -q | grep -x "$AGENT_IMAGE_REPO:$version" >/dev/null || die "$AGENT_IMAGE_REPO:$version not in containerd after import"
	log "imported $AGENT_IMAGE_REPO:$version"
	# The chart's Localhost seccomp profile, where the kubelet looks for it.
	install -D -m 0644 "$REPO_ROOT/distribution/helm/otelcol-ai/files/seccomp/otelcol-ai.json" \
		"$KUBELET_DIR/seccomp/profiles/otelcol-ai.json"
	kubectl get namespace "$AGENT_NS" >/dev/null 2>&1 || kubectl create namespace "$AGENT_NS" >/dev/null
	kubectl label --overwrite namespace "$AGENT_NS" pod-security.kubernetes.io/enforce=privileged >/dev/null
	helm upgrade --install "$RELEASE" "$chart" --namespace "$AGENT_NS" \
		--values "$CLUSTER_SRC/values.yaml" ${OTELCOL_AI_HELM_ARGS:-} >"$LOG/helm-install.log"
	log "helm: $(grep -m1 STATUS "$LOG/helm-install.log" || true) ($RELEASE $version in $AGENT_NS)"
	kubectl -n "$AGENT_NS" rollout status "daemonset/$RELEASE-agent" --timeout=180s >&2 ||
		die "the agent DaemonSet is not ready: kubectl -n $AGENT_NS describe pods"
}

# --- network -----------------------------------------------------------------
make_network() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		log "created bridge $BRIDGE"
	fi
	ip addr replace "$POD_GW/${POD_CIDR#*/}" dev "$BRIDGE"
	ip addr replace "$NODE_IP/32" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	# Forwarding for packets that come in on the bridge only (pod -> hostPort
	# or Service -> pod is DNAT then forward); the machine's ip_forward and
	# every other interface's forwarding stay as they are. Nothing from the
	# bridge is forwarded to another interface: that is dropped in a chain of
	# the cluster's own, so no pod packet leaves the machine.
	sysctl -qw "net.ipv4.conf.$BRIDGE.forwarding=1"
	iptables -N "$FW_CHAIN" 2>/dev/null || true
	local rule=(-i "$BRIDGE" ! -o "$BRIDGE" -m comment --comment "otelcol-ai cluster: pod traffic stays on this machine" -j DROP)
	iptables -C "$FW_CHAIN" "${rule[@]}" 2>/dev/null || iptables -A "$FW_CHAIN" "${rule[@]}"
	iptables -C FORWARD -j "$FW_CHAIN" 2>/dev/null || iptables -I FORWARD 1 -j "$FW_CHAIN"
	mkdir -p "$CNI_DIR/net.d" "$CNI_DIR/ipam"
	# isGateway stays false: the bridge plugin would otherwise turn the
	# machine's ip_forward on. The bridge's addresses are set above, and the
	# pods' default route points at POD_GW. No ipMasq: nothing leaves the machine.
	# portmap without snat: a pod that sends to the node's address and a
	# hostPort (a workload to its node's agent) keeps its own source address
	# (with snat the agent would see the bridge's 10.244.0.1 instead); the
	# reply, bridged pod to pod, is un-DNATed because bridged IPv4 goes through
	# iptables (net.bridge.bridge-nf-call-iptables=1, as on this machine).
	write "$CNI_DIR/net.d/10-$CNI_NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CNI_DIR/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]],
        "routes": [{"dst": "0.0.0.0/0", "gw": "$POD_GW"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": false}
  ]
}
EOF
}

# --- cgroups -----------------------------------------------------------------
# kubelet refuses a --cgroup-root that does not exist. Made in every mounted
# hierarchy (cpuset's need cpus and mems before anything can join them).
make_cgroups() {
	local m d
	for m in $(cgroup_mounts); do
		d=$m/$CGROUP_ROOT
		[ -d "$d" ] || mkdir "$d"
		if [ -f "$m/cpuset.cpus" ] && [ -f "$d/cpuset.cpus" ] && [ -z "$(cat "$d/cpuset.cpus")" ]; then
			cat "$m/cpuset.cpus" > "$d/cpuset.cpus"
			cat "$m/cpuset.mems" > "$d/cpuset.mems"
		fi
	done
}

# --- daemons -----------------------------------------------------------------
# start NAME CMD...: runs CMD in its own session, logging to log/NAME.log,
# unless NAME already runs. The pid file holds the pid of CMD's exec.
start() {
	local name=$1
	shift
	if pid_of "$name" >/dev/null; then
		log "$name already runs"
		return
	fi
	mkdir -p "$RUN" "$LOG"
	rm -f "$RUN/$name.pid"
	command -v "$1" >/dev/null || [ -x "$1" ] || die "$1: not found"
	readlink -f "$(command -v "$1")" > "$RUN/$name.exe"
	# shellcheck disable=SC2016
	setsid bash -c 'echo $$ > "$0"; exec "$@"' "$RUN/$name.pid" "$@" >> "$LOG/$name.log" 2>&1 < /dev/null &
	local i
	for i in $(seq 50); do
		[ -s "$RUN/$name.pid" ] && break
		sleep 0.1
	done
	log "started $name (pid $(cat "$RUN/$name.pid"), log $LOG/$name.log)"
}

start_etcd() {
	mkdir -p "$C/etcd"
	chmod 700 "$C/etcd"
	start etcd "$BIN/etcd" --name default --data-dir "$C/etcd" \
		--listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
		--listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
		--initial-cluster "default=http://$ETCD_PEER" --log-level warn
	wait_for etcd 30 curl -fsS "http://$ETCD_CLIENT/health"
}

start_control_plane() {
	start kube-apiserver "$BIN/kube-apiserver" \
		--advertise-address "$NODE_IP" --bind-address "$NODE_IP" --secure-port "$API_PORT" \
		--etcd-servers "http://$ETCD_CLIENT" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--allow-privileged=true --profiling=false --cert-dir "$C/apiserver-certs"
	wait_for kube-apiserver 90 kubectl get --raw /readyz
	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$C/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$C/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$C/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--cert-dir "$C/controller-manager-certs" --profiling=false \
		--flex-volume-plugin-dir "$C/controller-manager-volume-plugins"
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig "$C/scheduler.kubeconfig" \
		--authentication-kubeconfig "$C/scheduler.kubeconfig" \
		--authorization-kubeconfig "$C/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false
}

# --- the cluster's mount namespace --------------------------------------------
# containerd and kubelet (and so every container and CNI plugin) run in one
# mount namespace of their own, a slave of the machine's: the machine's mounts
# show inside, nothing mounted inside (container root filesystems, pod volumes,
# network namespace files) shows outside, and all of it goes when the last
# process in it ends. Inside it:
# - kubelet sets six kernel sysctls to its own values unless
#   protectKernelDefaults, and with it refuses to start unless they already
#   have those values. So the six files under /proc/sys show kubelet's values
#   (read-only files under .cache/cluster bound over them); the machine's
#   values are never written.
# - /var/log and /var/lib are folders under .cache/cluster (ns/varlog,
#   ns/varlib): kubelet's /var/log/pods, its hard-coded /var/log/containers
#   symlinks and /var/lib/kubelet/device-plugins, its root dir
#   /var/lib/kubelet and libcni's cache /var/lib/cni land there, at the paths
#   a chart's hostPath volumes name on a real node.
# The namespace is pinned on run/mnt.ns (a private bind of run/ onto itself,
# as unshare requires).
make_mount_ns() {
	mkdir -p "$RUN" "$C/ns/sysctl" "$VARLOG" "$VARLIB"
	if ! mountpoint -q "$RUN"; then
		mount --bind "$RUN" "$RUN"
		mount --make-private "$RUN"
	fi
	if ! findmnt -rn --mountpoint "$MNTNS" >/dev/null 2>&1; then
		touch "$MNTNS"
		unshare --mount="$MNTNS" --propagation slave true
		printf '1\n' > "$C/ns/sysctl/vm.overcommit_memory"
		printf '0\n' > "$C/ns/sysctl/vm.panic_on_oom"
		printf '10\n' > "$C/ns/sysctl/kernel.panic"
		printf '1\n' > "$C/ns/sysctl/kernel.panic_on_oops"
		printf '1000000\n' > "$C/ns/sysctl/kernel.keys.root_maxkeys"
		printf '25000000\n' > "$C/ns/sysctl/kernel.keys.root_maxbytes"
		# shellcheck disable=SC2016
		nsenter --mount="$MNTNS" -- bash -euc '
			for f in "$1"/sysctl/*; do
				p=/proc/sys/$(basename "$f" | tr . /)
				mount --bind "$f" "$p"
				mount -o remount,bind,ro "$p"
			done
			mount --bind "$1/varlog" /var/log
			mount --bind "$1/varlib" /var/lib' _ "$C/ns"
		log "made the cluster's mount namespace ($MNTNS)"
	fi
}

start_containerd() {
	mkdir -p "$CTRD/root" "$CTRD/state" "$CTRD/opt" "$CTRD/tmp"
	write "$CTRD/config.toml" <<EOF
# The local cluster's containerd: every path under $CTRD, its own socket.
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CTRD_SOCK"

[ttrpc]
  address = "$CTRD/containerd.sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD/opt"

# Unused (CRI runs runc.v2 shims) but containerd 1.6's tasks service needs it loaded.
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = "$CTRD/runc-v1"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  # Lowering an oom_score_adj needs CAP_SYS_RESOURCE, which this machine's
  # root may lack (then runc fails every sandbox with "can't get final
  # child's PID from pipe: EOF"): no container's score goes below containerd's.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "${CLUSTER_SNAPSHOTTER:-overlayfs}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$CTRD/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$CNI_DIR/net.d"
    max_conf_num = 1
EOF
	start containerd nsenter --mount="$MNTNS" -- env TMPDIR="$CTRD/tmp" containerd --config "$CTRD/config.toml" --log-level warn
	# nsenter and env exec containerd: note the binary that ends up running.
	readlink -f "$(command -v containerd)" > "$RUN/containerd.exe"
	wait_for containerd 30 ctr version
}

start_kubelet() {
	mkdir -p "$KUBELET_DIR"
	write "$C/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
containerRuntimeEndpoint: unix://$CTRD_SOCK
imageServiceEndpoint: unix://$CTRD_SOCK
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: true
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
registerNode: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%
  imagefs.available: 2%
  nodefs.inodesFree: 2%
EOF
	# Paths as kubelet sees them in the namespace: /var/lib is VARLIB.
	start kubelet nsenter --mount="$MNTNS" -- "$BIN/kubelet" --config "$C/kubelet-config.yaml" \
		--kubeconfig "$C/kubelet.kubeconfig" --root-dir /var/lib/kubelet \
		--volume-plugin-dir /var/lib/kubelet/volume-plugins \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 1
	readlink -f "$BIN/kubelet" > "$RUN/kubelet.exe"
}

start_kube_proxy() {
	write "$C/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $C/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
mode: iptables
clusterCIDR: $POD_CIDR
# NodePorts only on the node's address: no route_localnet on the machine.
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false}
# 0: leave the machine's conntrack sysctls as they are.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
	start kube-proxy "$BIN/kube-proxy" --config "$C/kube-proxy-config.yaml"
}

# --- main --------------------------------------------------------------------
wait_ci
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy crictl; do
	[ -x "$BIN/$b" ] || die "$BIN/$b missing: run make cluster-build first"
done
install_packages
mkdir -p "$C"
# Recorded before anything is made, for down.sh: what existed already.
[ -f "$C/preexisting" ] || {
	iptables-save 2>/dev/null | sed -n 's/^\*/iptables:/p'
	ip6tables-save 2>/dev/null | sed -n 's/^\*/ip6tables:/p'
	for f in iptables ip6tables; do
		for t in $($f-save 2>/dev/null | sed -n 's/^\*//p'); do
			$f-save -t "$t" | sed -n "s/^:\([^ ]*\).*/chain:$f:$t:\1/p"
		done
	done
	nft list tables 2>/dev/null | awk '{print "nft:" $2 ":" $3}'
	nfacct list 2>/dev/null | sed -n 's/.*} = \([^;]*\);.*/nfacct:\1/p'
	for d in /var/lib/kubelet /var/lib/cni /usr/libexec/kubernetes /var/log/pods /var/log/containers; do
		[ -e "$d" ] && echo "dir:$d"
	done
	[ -d /run/containerd ] && echo "dir:/run/containerd"
	[ -d /run/containerd/s ] && echo "dir:/run/containerd/s"
	true
} > "$C/preexisting"
make_pki
build_images
make_network
make_cgroups
make_mount_ns
start_etcd
start_control_plane
start_containerd
import_images
start_kubelet
start_kube_proxy
log "waiting for node $NODE_NAME to be Ready"
wait_for "node $NODE_NAME registered" 120 kubectl get node "$NODE_NAME"
kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=180s >/dev/null ||
	die "node not Ready (logs in $LOG)"
# kube-proxy's healthz turns 200 once it has programmed the Services.
wait_for "kube-proxy" 60 curl -fsS http://127.0.0.1:10256/healthz
log "node Ready $((SECONDS - t_start)) s after cluster-up started"
install_chart
log "DaemonSet ready $((SECONDS - t_start)) s after cluster-up started"
echo "$KUBECONFIG_ADMIN"
