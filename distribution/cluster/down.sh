#!/usr/bin/env bash
# make cluster-down: removes everything up.sh made — processes, the mount
# namespace and its mounts, cgroups, the bridge, iptables chains, containerd
# and kubelet state — then checks that nothing is left (exit 1 if something
# is). Idempotent; safe after a failed or partial cluster-up. Keeps bin/
# (the built binaries), images/ (the built image tars) and log/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"

# stop NAME SECONDS: SIGTERM, then SIGKILL after SECONDS.
stop() {
	local pid i
	pid=$(pid_of "$1") || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < $2 * 10; i++)); do
		[ -d "/proc/$pid" ] || break
		sleep 0.1
	done
	if [ -d "/proc/$pid" ]; then
		log "$1 (pid $pid) ignored SIGTERM: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	log "stopped $1"
}

# The processes in the cluster's mount namespace (containerd, kubelet, the
# shims, CNI plugins). Containers have namespaces of their own: see cgroup_pids.
ns_pids() {
	local ino p
	findmnt -rn --mountpoint "$MNTNS" >/dev/null 2>&1 || return 0
	ino=$(stat -Lc %i "$MNTNS" 2>/dev/null) || return 0
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "mnt:[$ino]" ] && echo "${p#/proc/}"
	done
	return 0
}

# The processes in the cgroups under CGROUP_ROOT (every container and sandbox).
cgroup_pids() {
	local d
	for d in $(cgroup_roots); do
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u
}

# Shims that serve this cluster's containerd (their -address is its socket).
shim_pids() {
	local p
	for p in /proc/[0-9]*; do
		{ tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -- "-address $CTRD_SOCK " >/dev/null && echo "${p#/proc/}"
	done
	return 0
}

kill_all() { # LABEL PIDS...: SIGKILL each
	local label=$1
	shift
	[ $# = 0 ] && return 0
	log "SIGKILL $label: $*"
	kill -KILL "$@" 2>/dev/null || true
}

preexisting() { grep -qxF "$1" "$C/preexisting" 2>/dev/null; }

# --- 1. pods, through the CRI, so that CNI tears each pod's network down ------
stop kube-proxy 10
stop kubelet 20
if pid_of containerd >/dev/null && [ -x "$BIN/crictl" ]; then
	log "removing every pod sandbox through the CRI"
	timeout 120 "$BIN/crictl" --config /dev/null --runtime-endpoint "unix://$CTRD_SOCK" --timeout 60s rmp -fa >/dev/null 2>&1 ||
		log "crictl rmp -fa failed; the remaining pods are killed below"
fi

# Shim sockets are computed from their ids before the shims go.
shim_socks=()
for p in $(shim_pids); do
	id=$({ tr '\0' '\n' < "/proc/$p/cmdline"; } 2>/dev/null | sed -n '/^-id$/{n;p;q}')
	ns=$({ tr '\0' '\n' < "/proc/$p/cmdline"; } 2>/dev/null | sed -n '/^-namespace$/{n;p;q}')
	[ -n "$id" ] && [ -n "$ns" ] && shim_socks+=("$SHIM_SOCKETS/$(printf '%s' "$CTRD_SOCK/$ns/$id" | sha256sum | cut -c1-64)")
done

# --- 2. the rest of the processes ---------------------------------------------
stop containerd 20
for i in 1 2 3 4 5; do
	# shellcheck disable=SC2046
	kill_all "containers" $(cgroup_pids)
	# shellcheck disable=SC2046
	kill_all "shims" $(shim_pids)
	# shellcheck disable=SC2046
	kill_all "processes in the cluster's mount namespace" $(ns_pids)
	[ -z "$(cgroup_pids)$(shim_pids)$(ns_pids)" ] && break
	sleep 1
done
# The control plane: scheduler and controller-manager together, then the API
# server, then etcd.
stop kube-scheduler 20 &
stop kube-controller-manager 20 &
wait
stop kube-apiserver 30
stop etcd 20

# --- 3. iptables: kube-proxy's own cleanup, then every KUBE-*/CNI-*/OTELCOL-AI-* chain
# that did not exist before cluster-up, and the rules that jump to them.
if [ -x "$BIN/kube-proxy" ] && command -v iptables >/dev/null; then
	"$BIN/kube-proxy" --cleanup >> "$LOG/kube-proxy-cleanup.log" 2>&1 || true
fi
remove_chains() { # iptables|ip6tables
	local fam=$1 t chains script c line target
	command -v "$fam-save" >/dev/null || return 0
	for t in $("$fam-save" 2>/dev/null | sed -n 's/^\*//p'); do
		chains=()
		while read -r c; do
			preexisting "chain:$fam:$t:$c" || chains+=("$c")
		done < <("$fam-save" -t "$t" | sed -n 's/^:\(\(KUBE\|CNI\|OTELCOL-AI\)-[^ ]*\).*/\1/p')
		[ ${#chains[@]} = 0 ] && continue
		script="*$t"$'\n'
		while read -r line; do
			target=$(sed -n 's/.* -j \([^ ]*\).*/\1/p' <<< "$line")
			for c in "${chains[@]}"; do
				[ "$target" = "$c" ] && script+="-D ${line#-A }"$'\n' && break
			done
		done < <("$fam-save" -t "$t" | grep '^-A ' | grep -Ev '^-A (KUBE|CNI|OTELCOL-AI)-')
		for c in "${chains[@]}"; do script+="-F $c"$'\n'; done
		for c in "${chains[@]}"; do script+="-X $c"$'\n'; done
		script+="COMMIT"$'\n'
		if ! "$fam-restore" --noflush <<< "$script"; then
			log "$fam-restore refused the cleanup of table $t:"$'\n'"$script"
		else
			log "$fam: removed ${#chains[@]} chains from table $t"
		fi
	done
}
remove_chains iptables
remove_chains ip6tables
# kube-proxy's packet counters (netfilter accounting objects), once no rule uses them.
if command -v nfacct >/dev/null; then
	for n in ct_state_invalid_dropped_pkts localhost_nps_accepted_pkts; do
		preexisting "nfacct:$n" && continue
		nfacct list 2>/dev/null | grep -F "} = $n;" >/dev/null || continue
		nfacct delete "$n" && log "nfacct: deleted $n"
	done
fi
# Tables that cluster-up's iptables calls created and that are empty again.
if command -v nft >/dev/null; then
	while read -r fam name; do
		case $fam in ip) f=iptables ;; ip6) f=ip6tables ;; *) continue ;; esac
		preexisting "$f:$name" && continue
		preexisting "nft:$fam:$name" && continue
		# Empty: nothing but the table, chain headers, their type/policy lines and braces.
		if ! nft list table "$fam" "$name" 2>/dev/null |
			grep -vE '^\s*((table|chain) .*\{|type .*|\}|)$' | grep . >/dev/null; then
			nft delete table "$fam" "$name" && log "nft: deleted the empty table $fam $name"
		fi
	done < <(nft list tables 2>/dev/null | awk '{print $2, $3}')
fi

# --- 4. network ----------------------------------------------------------------
if ip link show "$BRIDGE" >/dev/null 2>&1; then
	ip link del "$BRIDGE"
	log "deleted bridge $BRIDGE"
fi

# --- 5. mounts: the namespace pin, run/, anything under .cache/cluster ---------
while read -r m; do
	umount "$m" 2>/dev/null || umount -l "$m"
	log "unmounted $m"
done < <(findmnt -rn -o TARGET | grep -E "^$C(/|$)" | sort -r)

# --- 6. cgroups (only CGROUP_ROOT and what is under it) ------------------------
for d in $(cgroup_roots); do
	find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	[ -d "$d" ] && log "could not remove $d"
done

# --- 7. files outside .cache/cluster: the shims' sockets -----------------------
for s in "${shim_socks[@]}"; do rm -f "$s"; done
for d in "$SHIM_SOCKETS" /run/containerd; do
	preexisting "dir:$d" || rmdir "$d" 2>/dev/null || true
done

# --- 8. state under .cache/cluster ---------------------------------------------
rm -rf "$C/etcd" "$CTRD" "$C/ns" "$C/kubectl-cache" "$C/helm" "$CNI_DIR" "$RUN" "$PKI" "$C"/*.kubeconfig "$KUBECONFIG_ADMIN" \
	"$C"/*-config.yaml "$C/apiserver-certs" "$C/controller-manager-certs" "$C/controller-manager-volume-plugins"

# --- 9. check -------------------------------------------------------------------
left=()
for d in "${DAEMONS[@]}"; do
	pid_of "$d" >/dev/null && left+=("process $d")
done
[ -n "$(shim_pids)" ] && left+=("shims: $(shim_pids | tr '\n' ' ')")
[ -n "$(cgroup_roots)" ] && left+=("cgroups: $(cgroup_roots | tr '\n' ' ')")
ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("interface $BRIDGE")
findmnt -rn -o TARGET | grep -E "^$C(/|$)" >/dev/null && left+=("mounts under $C")
for f in iptables ip6tables; do
	command -v "$f-save" >/dev/null || continue
	n=$("$f-save" 2>/dev/null | grep -cE '^:(KUBE|CNI|OTELCOL-AI)-|-j (KUBE|CNI|OTELCOL-AI)-' || true)
	[ "$n" = 0 ] || left+=("$f: $n KUBE-/CNI- chains or rules")
done
# Paths kubelet, CNI or containerd use by default: the namespace redirects them.
for d in /var/lib/kubelet /var/lib/cni /usr/libexec/kubernetes /var/log/pods /var/log/containers /var/lib/containerd /opt/containerd; do
	[ -e "$d" ] && ! preexisting "dir:$d" && left+=("$d")
done
for s in "${shim_socks[@]}"; do [ -e "$s" ] && left+=("shim socket $s"); done
if command -v nfacct >/dev/null; then
	for n in ct_state_invalid_dropped_pkts localhost_nps_accepted_pkts; do
		preexisting "nfacct:$n" || ! nfacct list 2>/dev/null | grep -F "} = $n;" >/dev/null || left+=("nfacct $n")
	done
fi
ip -o link show type veth 2>/dev/null | grep "master $BRIDGE" >/dev/null && left+=("veths on $BRIDGE")
if [ ${#left[@]} -gt 0 ]; then
	log "left behind: ${left[*]}"
	exit 1
fi
rm -f "$C/preexisting"
log "clean: no process, shim, cgroup, interface, mount, iptables chain, nfacct counter or default-path file of the cluster is left"
