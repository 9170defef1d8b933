#!/usr/bin/env bash
# Builds the local cluster's binaries into .cache/cluster/bin from the pinned
# wrapper modules under distribution/cluster/build:
#   kubernetes/  kube-apiserver kube-controller-manager kube-scheduler kubelet
#                kubectl kube-proxy (k8s.io/kubernetes at one release)
#   etcd/        etcd (go.etcd.io/etcd/server/v3's etcdmain)
#   helm/        helm (helm.sh/helm/v3)
#   cri-tools/   crictl (sigs.k8s.io/cri-tools; cluster-down removes pods with it)
# Each group is rebuilt only when its stamp (module version, go.mod + go.sum
# hash, Go version) changed or a binary is missing. Static (CGO_ENABLED=0),
# -trimpath, versions stamped the way the upstream release builds stamp them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}
bin=${CLUSTER_BIN:-$root/.cache/cluster/bin}
mkdir -p "$bin"

export GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# log and wait_ci (builds wait while the project's full test suite runs).
# shellcheck source=lib.sh
source "$here/lib.sh"

# modver DIR MODULE: the version DIR's go.mod resolves MODULE to.
modver() { (cd "$1" && "$GO" list -m -f '{{.Version}}' "$2"); }

stamp_of() { # DIR VERSION
	{ echo "$2"; "$GO" env GOVERSION; cat "$1/go.mod" "$1/go.sum"; } | sha256sum | cut -c1-16
}

# fresh NAME STAMP BINARIES...: true when every binary exists and NAME's stamp matches.
fresh() {
	local name=$1 stamp=$2 b
	shift 2
	[ "$(cat "$bin/.$name.stamp" 2>/dev/null)" = "$stamp" ] || return 1
	for b in "$@"; do [ -x "$bin/$b" ] || return 1; done
}

timed() { # NAME CMD...: runs CMD, logs its wall time
	local t0=$SECONDS
	"${@:2}"
	log "$1 built in $((SECONDS - t0)) s"
}

build_kubernetes() {
	local dir=$here/build/kubernetes v stamp major minor ld pkgs=() c
	local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)
	v=$(modver "$dir" k8s.io/kubernetes)
	stamp=$(stamp_of "$dir" "$v")
	if fresh kubernetes "$stamp" "${cmds[@]}"; then log "kubernetes $v: cached"; return; fi
	major=${v#v}; major=${major%%.*}
	minor=${v#v*.}; minor=${minor%%.*}
	for c in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $c.gitVersion=$v -X $c.gitMajor=$major -X $c.gitMinor=$minor"
		ld+=" -X $c.gitTreeState=clean -X $c.buildDate=1970-01-01T00:00:00Z"
	done
	for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	wait_ci
	log "kubernetes $v: building ${cmds[*]}"
	(cd "$dir" && timed "kubernetes $v" nice "$GO" build -trimpath -ldflags "-s -w$ld" -o "$bin/" "${pkgs[@]}")
	echo "$stamp" > "$bin/.kubernetes.stamp"
}

build_etcd() {
	local dir=$here/build/etcd v stamp
	v=$(modver "$dir" go.etcd.io/etcd/server/v3)
	stamp=$(stamp_of "$dir" "$v")
	if fresh etcd "$stamp" etcd; then log "etcd $v: cached"; return; fi
	wait_ci
	log "etcd $v: building"
	(cd "$dir" && timed "etcd $v" nice "$GO" build -trimpath -ldflags "-s -w" -o "$bin/etcd" .)
	echo "$stamp" > "$bin/.etcd.stamp"
}

build_helm() {
	local dir=$here/build/helm v stamp k8s kmaj kmin ld p=helm.sh/helm/v3
	v=$(modver "$dir" helm.sh/helm/v3)
	stamp=$(stamp_of "$dir" "$v")
	if fresh helm "$stamp" helm; then log "helm $v: cached"; return; fi
	k8s=$(modver "$dir" k8s.io/client-go)
	kmaj=1 # client-go v0.N.x is Kubernetes 1.N
	kmin=${k8s#v0.}; kmin=${kmin%%.*}
	ld="-X $p/internal/version.version=$v -X $p/internal/version.gitTreeState=clean"
	ld+=" -X $p/pkg/lint/rules.k8sVersionMajor=$kmaj -X $p/pkg/lint/rules.k8sVersionMinor=$kmin"
	ld+=" -X $p/pkg/chartutil.k8sVersionMajor=$kmaj -X $p/pkg/chartutil.k8sVersionMinor=$kmin"
	wait_ci
	log "helm $v: building"
	(cd "$dir" && timed "helm $v" nice "$GO" build -trimpath -ldflags "-s -w $ld" -o "$bin/helm" "$p/cmd/helm")
	echo "$stamp" > "$bin/.helm.stamp"
}

build_crictl() {
	local dir=$here/build/cri-tools v stamp p=sigs.k8s.io/cri-tools
	v=$(modver "$dir" $p)
	stamp=$(stamp_of "$dir" "$v")
	if fresh crictl "$stamp" crictl; then log "crictl $v: cached"; return; fi
	wait_ci
	log "crictl $v: building"
	(cd "$dir" && timed "crictl $v" nice "$GO" build -trimpath -ldflags "-s -w -X $p/pkg/version.Version=$v" -o "$bin/crictl" "$p/cmd/crictl")
	echo "$stamp" > "$bin/.crictl.stamp"
}

t0=$SECONDS
build_kubernetes
build_etcd
build_helm
build_crictl
log "done in $((SECONDS - t0)) s: $bin"
