# shellcheck shell=bash
# Owns tearing the local cluster down and clearing whatever a killed run left behind:
# processes (by pid file, then by the state paths in their command lines), containerd
# shims, mounts under the state directory, pod network namespaces, the bridge, and the
# iptables rules of kube-proxy, kubelet, CNI and this harness.

DAEMONS=(host-volumes cluster-dns kube-proxy kubelet containerd kube-scheduler kube-controller-manager kube-apiserver etcd)

stop_all_daemons() {
  local d
  for d in "${DAEMONS[@]}"; do stop_daemon "$d"; done
  # Anything still running from a run whose pid files were lost: match our state dir.
  local pids
  pids=$(pgrep -f -- "$CLUSTER_STATE" || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    sleep 1
    pids=$(pgrep -f -- "$CLUSTER_STATE" || true)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  fi
}

remove_mounts() {
  local m
  # deepest first
  awk -v s="$CLUSTER_STATE" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

remove_netns() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do
    ip netns delete "$ns" 2>/dev/null || true
  done
}

remove_iptables() {
  local table
  for table in filter nat mangle; do
    if iptables-save -t "$table" 2>/dev/null | grep -qE 'KUBE-|CNI-|OTUS-'; then
      iptables-save -t "$table" | grep -vE 'KUBE-|CNI-|OTUS-' | iptables-restore -T "$table" 2>/dev/null ||
        iptables-save -t "$table" | grep -vE 'KUBE-|CNI-|OTUS-' | iptables-restore 2>/dev/null || true
    fi
  done
}

reset_cluster() {
  stop_all_daemons
  remove_mounts
  remove_netns
  ip link delete "$BRIDGE" 2>/dev/null || true
  remove_iptables
  # Node storage of the previous cluster: its PVs are gone with etcd's data.
  rm -rf "${CLUSTER_STATE:?}" "${HOSTPATH_BASE:?}"
}
