# shellcheck shell=bash
# Owns the node: the pod bridge and its isolation rules, containerd and its CNI
# config, the images imported into it, kubelet, kube-proxy, the cluster DNS server and
# the preparer of hostPath volume directories.

setup_network() {
  ip link add "$BRIDGE" type bridge 2>/dev/null || true
  # A fixed address: a bridge without one takes the lowest of its ports' and changes it as
  # pods come and go, and the pods' cached address of their gateway (also their DNS server)
  # goes stale, stalling their lookups for seconds.
  ip link set "$BRIDGE" address "$BRIDGE_MAC"
  ip addr replace "$NODE_IP/16" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  # Isolation: pods may talk to each other, to services and to this node, never beyond.
  # The rule sits at the top of FORWARD before forwarding is switched on.
  iptables -N OTUS-ISOLATION 2>/dev/null || iptables -F OTUS-ISOLATION
  iptables -A OTUS-ISOLATION -d "$POD_CIDR" -j RETURN
  iptables -A OTUS-ISOLATION -d "$SERVICE_CIDR" -j RETURN
  iptables -A OTUS-ISOLATION -j DROP
  iptables -C FORWARD -s "$POD_CIDR" -j OTUS-ISOLATION 2>/dev/null ||
    iptables -I FORWARD 1 -s "$POD_CIDR" -j OTUS-ISOLATION
  sysctl -qw net.ipv4.ip_forward=1
  mkdir -p "$CLUSTER_STATE/cni/net.d" "$CLUSTER_STATE/cni/ipam"
  cat > "$CLUSTER_STATE/cni/net.d/10-otus.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "otus",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "10.88.1.1", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$CLUSTER_STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
  printf 'nameserver %s\nsearch %s\n' "$NODE_IP" "svc.$CLUSTER_DOMAIN" > "$CLUSTER_STATE/resolv.conf"
}

start_containerd() {
  local dir="$CLUSTER_STATE/containerd"
  mkdir -p "$dir"
  containerd config default | sed \
    -e "s#^root = .*#root = \"$dir/root\"#" \
    -e "s#^state = .*#state = \"$dir/state\"#" \
    -e "s#address = \"/run/containerd/containerd.sock\"#address = \"$CONTAINERD_SOCK\"#" \
    -e "s#restrict_oom_score_adj = false#restrict_oom_score_adj = true#" \
    -e "s#sandbox_image = .*#sandbox_image = \"$PAUSE_IMAGE\"#" \
    -e "s#bin_dir = .*#bin_dir = \"/usr/lib/cni\"#" \
    -e "s#conf_dir = .*#conf_dir = \"$CLUSTER_STATE/cni/net.d\"#" \
    > "$dir/config.toml"
  grep -q "$CONTAINERD_SOCK" "$dir/config.toml" || die "could not set containerd's socket in its config"
  start_daemon containerd containerd --config "$dir/config.toml"
  wait_for "containerd" 60 ctr --address "$CONTAINERD_SOCK" version || die "containerd did not start (log: $LOG_DIR/containerd.log)"
}

import_images() {
  "$CLUSTER_ROOT/images/build.sh" all >&2
  "$CLUSTER_ROOT/images/build.sh" import all "$CONTAINERD_SOCK" >&2
}

start_kubelet() {
  local dir="$CLUSTER_STATE/kubelet"
  mkdir -p "$dir"
  cat > "$CLUSTER_STATE/kubelet.yaml" <<KL
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
failSwapOn: false
clusterDNS: [$NODE_IP]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: $CLUSTER_STATE/resolv.conf
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: Webhook}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
KL
  local runtime=()
  if [ "$K8S_MINOR" -ge 27 ]; then
    # the runtime endpoint is a config field; the sandbox image is containerd's to choose
    # (its sandbox_image); cgroup v1 stays allowed (this host's hierarchy)
    printf 'containerRuntimeEndpoint: unix://%s\n' "$CONTAINERD_SOCK" >> "$CLUSTER_STATE/kubelet.yaml"
    [ "$K8S_MINOR" -lt 31 ] || echo 'failCgroupV1: false' >> "$CLUSTER_STATE/kubelet.yaml"
  else
    runtime=(--container-runtime=remote --container-runtime-endpoint="unix://$CONTAINERD_SOCK"
      --pod-infra-container-image="$PAUSE_IMAGE")
  fi
  start_daemon kubelet "$BIN_DIR/kubelet" --config="$CLUSTER_STATE/kubelet.yaml" \
    --kubeconfig="$KUBECONFIG_FILE" --root-dir="$dir" --cert-dir="$dir/pki" \
    "${runtime[@]}" --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" --v=1
}

start_kube_proxy() {
  cat > "$CLUSTER_STATE/kube-proxy.yaml" <<KP
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $KUBECONFIG_FILE}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0}
KP
  start_daemon kube-proxy "$BIN_DIR/kube-proxy" --config="$CLUSTER_STATE/kube-proxy.yaml"
}

start_dns() {
  local venv
  venv=$("$REPO_ROOT/hack/venv.sh")
  start_daemon cluster-dns "$venv/bin/python" "$CLUSTER_ROOT/dns/cluster_dns.py" \
    --kubeconfig "$KUBECONFIG_FILE" --listen "$NODE_IP" --port 53 --domain "$CLUSTER_DOMAIN" \
    --state "$CLUSTER_STATE"
  wait_for "cluster DNS" 60 bash -c "exec 3<>/dev/tcp/$NODE_IP/53" || die "cluster DNS did not start (log: $LOG_DIR/cluster-dns.log)"
}

# hostPath PersistentVolumes under the operator's base directory get directories that
# non-root pods may write to (cluster/volumes/host_volumes.py), as a local-path
# provisioner would make them.
start_host_volumes() {
  local venv
  venv=$("$REPO_ROOT/hack/venv.sh")
  start_daemon host-volumes "$venv/bin/python" "$CLUSTER_ROOT/volumes/host_volumes.py" \
    --kubeconfig "$KUBECONFIG_FILE" --base "$HOSTPATH_BASE" --state "$CLUSTER_STATE"
}
