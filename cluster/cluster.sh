#!/usr/bin/env bash
# The local single-node Kubernetes cluster for development and tests: Kubernetes 1.34 by
# default, built from the Go module proxy, or 1.20.2 (K8S_VERSION=1.20.2) from Debian's
# source package; the node's parts from Debian's packages (no Docker, no image pulls).
#
#   cluster/cluster.sh up        install packages, build/cache binaries and images, start, wait Ready
#   cluster/cluster.sh down      stop everything it started (state and logs kept until next up)
#   cluster/cluster.sh purge     down, then remove the state directory
#   cluster/cluster.sh status    what runs, node state
#   cluster/cluster.sh kubeconfig  print the kubeconfig path
#   cluster/cluster.sh build     only install packages and build binaries and images
#   cluster/cluster.sh object-store  start the S3-compatible object store (SeaweedFS) in the
#                                running cluster, print its endpoint (bucket "backups")
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=lib/deps.sh
. "$CLUSTER_ROOT/lib/deps.sh"
# shellcheck source=lib/binaries.sh
. "$CLUSTER_ROOT/lib/binaries.sh"
# shellcheck source=lib/reset.sh
. "$CLUSTER_ROOT/lib/reset.sh"
# shellcheck source=lib/control_plane.sh
. "$CLUSTER_ROOT/lib/control_plane.sh"
# shellcheck source=lib/node.sh
. "$CLUSTER_ROOT/lib/node.sh"
# shellcheck source=lib/object_store.sh
. "$CLUSTER_ROOT/lib/object_store.sh"

api_ready() {
  kubectl_local get --raw /readyz >/dev/null 2>&1
}

cluster_running() {
  local d
  for d in "${DAEMONS[@]}"; do daemon_alive "$d" || return 1; done
  api_ready && return 0
  # Every daemon is alive but the API does not answer: it may be starting, busy, or stopped
  # for a while by a fault test (SIGSTOP, 30 s). Wait for it rather than rebuild the cluster
  # under the feet of whoever uses it.
  say "the cluster's daemons run but its API does not answer: waiting up to 120s"
  wait_for "the API server to answer" 120 api_ready
}

cmd_build() {
  install_deps
  build_binaries
  "$CLUSTER_ROOT/images/build.sh" all >&2
  "$REPO_ROOT/hack/venv.sh" >/dev/null
}

cmd_up() {
  exec 9>/var/lock/otus-cluster.lock
  flock -w 900 9 || die "another cluster.sh holds /var/lock/otus-cluster.lock"
  if cluster_running; then
    if [ "$(cat "$CLUSTER_STATE/version" 2>/dev/null)" = "$K8S_VERSION" ]; then
      say "cluster already running (Kubernetes $K8S_VERSION, kubeconfig: $KUBECONFIG_FILE)"
      # images added or rebuilt since it started (each cached and imported at most once)
      import_images
      return 0
    fi
    say "the running cluster is not Kubernetes $K8S_VERSION: replacing it"
  fi
  local t0=$SECONDS
  cmd_build
  say "clearing state left by an earlier run"
  reset_cluster
  mkdir -p "$CLUSTER_STATE" "$LOG_DIR" "$RUN_DIR"
  make_pki
  setup_network
  say "starting etcd and the control plane"
  start_etcd
  start_apiserver
  start_controllers
  say "starting containerd and importing images"
  start_containerd
  import_images
  say "starting kubelet, kube-proxy, cluster DNS and the hostPath volume preparer"
  start_kubelet
  start_kube_proxy
  start_dns
  start_host_volumes
  wait_for "node $NODE_NAME to be Ready" 180 \
    bash -c "\"$BIN_DIR/kubectl\" --kubeconfig \"$KUBECONFIG_FILE\" get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" ||
    die "node did not become Ready (logs: $LOG_DIR)"
  wait_for "the default ServiceAccount" 60 kubectl_local -n default get serviceaccount default ||
    die "no default ServiceAccount (log: $LOG_DIR/kube-controller-manager.log)"
  # where `make run` puts its sample: pods there are admitted at Pod Security "restricted"
  kubectl_local label namespace default --overwrite \
    pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted >/dev/null
  echo "$K8S_VERSION" > "$CLUSTER_STATE/version"
  touch "$CLUSTER_STATE/ready"
  say "cluster up in $((SECONDS - t0))s: export KUBECONFIG=$KUBECONFIG_FILE  (kubectl: $BIN_DIR/kubectl)"
}

cmd_down() {
  exec 9>/var/lock/otus-cluster.lock
  flock -w 900 9 || die "another cluster.sh holds /var/lock/otus-cluster.lock"
  rm -f "$CLUSTER_STATE/ready"
  stop_all_daemons
  remove_mounts
  remove_netns
  ip link delete "$BRIDGE" 2>/dev/null || true
  remove_iptables
  sysctl -qw net.ipv4.ip_forward=0 || true
  say "cluster stopped (logs kept in $LOG_DIR until the next up)"
}

cmd_status() {
  local d
  for d in "${DAEMONS[@]}"; do
    if daemon_alive "$d"; then echo "$d: running (pid $(cat "$RUN_DIR/$d.pid"))"; else echo "$d: stopped"; fi
  done
  if cluster_running; then kubectl_local get nodes -o wide; else echo "cluster: not running"; return 1; fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  purge) cmd_down; rm -rf "${CLUSTER_STATE:?}" "${HOSTPATH_BASE:?}" ;;
  status) cmd_status ;;
  kubeconfig) echo "$KUBECONFIG_FILE" ;;
  kubectl-path) echo "$BIN_DIR/kubectl" ;;
  build) cmd_build ;;
  object-store) cmd_object_store ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
