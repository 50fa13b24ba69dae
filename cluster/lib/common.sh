# shellcheck shell=bash
# shellcheck disable=SC2034  # settings used by the files that source this one
# Owns the local cluster's shared settings: paths (cache, state), versions, network
# addresses, logging and the small process helpers every other lib file uses.

# The Kubernetes version the local cluster runs: the newest 1.34 patch by default, the newest
# line this host supports (1.35 and newer refuse its cgroup v1 by default and drop
# containerd 1.x); 1.20.2, the oldest the project claims, with K8S_VERSION=1.20.2.
K8S_VERSION=${K8S_VERSION:-1.34.4}
CLUSTER_CACHE=${CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator-cluster}
CLUSTER_STATE=${CLUSTER_STATE:-/var/lib/otus-cluster}
# Bump BUILD_REV whenever the source patches in binaries.sh change: it keys the cache.
BUILD_REV=2
BIN_DIR="$CLUSTER_CACHE/bin/$K8S_VERSION-r$BUILD_REV"
K8S_MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
# etcd: kubeadm's pairing for the line (3.6.5 for 1.34) built from the Go module proxy;
# Debian's etcd-server (3.4) for 1.20.
case "$K8S_VERSION" in
  1.20.*) ETCD_VERSION=debian; ETCD_BIN=$(command -v etcd || echo /usr/bin/etcd) ;;
  *) ETCD_VERSION=${ETCD_VERSION:-3.6.5}; ETCD_BIN="$CLUSTER_CACHE/bin/etcd-$ETCD_VERSION/etcd" ;;
esac
SRC_DIR="$CLUSTER_CACHE/src"
LOG_DIR="$CLUSTER_STATE/logs"
RUN_DIR="$CLUSTER_STATE/run"
PKI_DIR="$CLUSTER_STATE/pki"
KUBECONFIG_FILE="$CLUSTER_STATE/kubeconfig"
CONTAINERD_SOCK="$CLUSTER_STATE/containerd/containerd.sock"

NODE_NAME=otus-node
BRIDGE=otus0
BRIDGE_MAC=02:00:0a:58:00:01  # locally administered, fixed (lib/node.sh says why)
POD_CIDR=10.88.0.0/16
NODE_IP=10.88.0.1            # the bridge's address: API server, kubelet and DNS listen here
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
CLUSTER_DOMAIN=cluster.local
PAUSE_IMAGE=localhost/pause:local
# The mysql role's mysql_hostpath_base: where its hostPath volumes live on the node.
HOSTPATH_BASE=/var/lib/mysql-operator
export K8S_VERSION

CLUSTER_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$CLUSTER_ROOT/.." && pwd)

say() { printf '>> %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

kubectl_local() { "$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# start_daemon NAME CMD...: runs CMD in its own session, logs to $LOG_DIR/NAME.log, pid in $RUN_DIR/NAME.pid
start_daemon() {
  local name=$1; shift
  mkdir -p "$LOG_DIR" "$RUN_DIR"
  # umask 022 and no inherited lock fd (9): daemons must not hold cluster.sh's lock.
  (umask 022; exec setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 < /dev/null 9>&-) &
  echo $! > "$RUN_DIR/$name.pid"
}

daemon_alive() {
  local pidfile="$RUN_DIR/$1.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

stop_daemon() {
  local name=$1 pidfile="$RUN_DIR/$1.pid" pid i
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# wait_for DESCRIPTION SECONDS CMD...: polls CMD every second until it succeeds
wait_for() {
  local what=$1 limit=$2 i; shift 2
  for i in $(seq 1 "$limit"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [ $((i % 15)) -eq 0 ]; then say "still waiting for $what (${i}s)"; fi
    sleep 1
  done
  return 1
}
