#!/usr/bin/env bash
# make cluster-smoke: on a cluster that `make cluster-up` brought up, runs the
# locally built hello image as a pod with a hostPort and checks, printing how
# long each step took:
#   - the pod is Running (image imported, never pulled; sandbox = own pause);
#   - the node reaches it over the bridge (pod IP) and through its hostPort
#     on the node's address (CNI portmap);
#   - a second pod reaches it at the node's address + hostPort (the path a
#     workload takes to a DaemonSet agent at status.hostIP) and reaches the
#     API server through the kubernetes Service (kube-proxy);
#   - kubectl logs and exec work (API server -> kubelet -> containerd).
# Leaves the cluster as it found it (deletes its pods).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NS=default
HOSTPORT=18080
t0=$SECONDS
step() { log "$1 ($((SECONDS - t0)) s)"; }

cleanup() { kubectl -n $NS delete pod hello hello-client --ignore-not-found --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

wait_for "ServiceAccount $NS/default" 60 kubectl -n $NS get serviceaccount default
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: hello
  namespace: $NS
  labels: {app: hello}
spec:
  containers:
  - name: hello
    image: $HELLO_IMAGE
    imagePullPolicy: Never
    args: [serve, -addr, ":8080"]
    ports:
    - {containerPort: 8080, hostPort: $HOSTPORT}
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsNonRoot: true}
---
apiVersion: v1
kind: Pod
metadata:
  name: hello-client
  namespace: $NS
spec:
  containers:
  - name: client
    image: $HELLO_IMAGE
    imagePullPolicy: Never
    args: [sleep]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsNonRoot: true}
EOF
kubectl -n $NS wait --for=condition=Ready pod/hello pod/hello-client --timeout=120s >/dev/null ||
	{ kubectl -n $NS describe pod hello hello-client >&2; die "pods not Ready"; }
step "pods hello and hello-client Running"
kubectl -n $NS get pod -o wide >&2

ip=$(kubectl -n $NS get pod hello -o jsonpath='{.status.podIP}')
host_ip=$(kubectl -n $NS get pod hello -o jsonpath='{.status.hostIP}')
[ "$host_ip" = "$NODE_IP" ] || die "hostIP $host_ip, not $NODE_IP"

out=$(curl -fsS --max-time 5 "http://$ip:8080/") || die "node -> pod $ip:8080 failed"
step "node -> pod over the bridge: $out"
out=$(curl -fsS --max-time 5 "http://$NODE_IP:$HOSTPORT/") || die "node -> hostPort $NODE_IP:$HOSTPORT failed"
step "node -> hostPort: $out"
out=$(kubectl -n $NS exec hello-client -- /hello get "http://$NODE_IP:$HOSTPORT/") ||
	die "pod -> status.hostIP:hostPort failed"
client_ip=$(kubectl -n $NS get pod hello-client -o jsonpath='{.status.podIP}')
grep -q "you are $client_ip:" <<< "$out" || die "hostPort saw another source than the client pod's $client_ip: $out"
step "pod -> status.hostIP:hostPort (exec): $out"
wait_for "pod -> kubernetes Service" 30 kubectl -n $NS exec hello-client -- /hello get "https://$SERVICE_API_IP/version"
out=$(kubectl -n $NS exec hello-client -- /hello get "https://$SERVICE_API_IP/version")
step "pod -> kubernetes Service $SERVICE_API_IP:443: $(tr -d ' \n' <<< "$out" | cut -c1-80)"
kubectl -n $NS logs hello | grep "serving on" >/dev/null || die "kubectl logs hello: no output"
step "kubectl logs works"

# What the node's agent will see: the containers' cgroups under the cluster's root.
pid=$(crictl inspect -o go-template --template '{{.info.pid}}' "$(crictl ps -q --name '^hello$' | head -1)")
if [ -n "$pid" ]; then
	step "hello's process (pid $pid on the node): $(grep -E ':memory:' "/proc/$pid/cgroup")"
fi
log "smoke passed in $((SECONDS - t0)) s"
