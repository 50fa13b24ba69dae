# shellcheck shell=bash
# Owns the control plane: a CA and serving certificates made with openssl, the admin
# token and kubeconfig, the audit policy, and the etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler processes.

make_pki() {
  mkdir -p "$PKI_DIR"
  local d="$PKI_DIR"
  openssl genrsa -out "$d/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -nodes -key "$d/ca.key" -subj "/CN=otus-local-ca" -days 3650 -out "$d/ca.crt" 2>/dev/null
  cat > "$d/apiserver.cnf" <<CNF
[req]
distinguished_name = dn
[dn]
[ext]
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:$NODE_IP, IP:127.0.0.1, IP:$API_SERVICE_IP, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.$CLUSTER_DOMAIN
[client]
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
CNF
  openssl genrsa -out "$d/apiserver.key" 2048 2>/dev/null
  openssl req -new -key "$d/apiserver.key" -subj "/CN=kube-apiserver" -out "$d/apiserver.csr" 2>/dev/null
  openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
    -extfile "$d/apiserver.cnf" -extensions ext -out "$d/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$d/kubelet-client.key" 2048 2>/dev/null
  openssl req -new -key "$d/kubelet-client.key" -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" -out "$d/kubelet-client.csr" 2>/dev/null
  openssl x509 -req -in "$d/kubelet-client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
    -extfile "$d/apiserver.cnf" -extensions client -out "$d/kubelet-client.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  local token
  token=$(openssl rand -hex 24)
  echo "$token,admin,admin,system:masters" > "$d/tokens.csv"
  chmod 600 "$d"/*.key "$d/tokens.csv"
  write_kubeconfig "$token"
}

write_kubeconfig() {
  local token=$1
  install -m 600 /dev/null "$KUBECONFIG_FILE"
  cat > "$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
- name: otus-local
  cluster:
    server: https://$NODE_IP:6443
    # A path, not -data: the Python client writes -data to a new temp file in every
    # process, and every Ansible module run is a new process.
    certificate-authority: $PKI_DIR/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: otus-local
  context: {cluster: otus-local, user: admin, namespace: default}
current-context: otus-local
KC
}

write_audit_policy() {
  # Write requests only, at Metadata level: the benchmarks count writes from this log.
  cat > "$CLUSTER_STATE/audit-policy.yaml" <<'POL'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
POL
}

start_etcd() {
  start_daemon etcd "$ETCD_BIN" --name otus --data-dir "$CLUSTER_STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster otus=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  wait_for "etcd" 60 curl -sf http://127.0.0.1:2379/health || die "etcd did not start (log: $LOG_DIR/etcd.log)"
}

# Flags that only 1.20 knows: its insecure port is on unless closed; later versions have no
# such port and refuse the flag.
legacy_port_flags() {
  [ "$K8S_MINOR" -ge 24 ] || echo "$1"
}

start_apiserver() {
  write_audit_policy
  # shellcheck disable=SC2046  # legacy_port_flags prints one flag or nothing
  start_daemon kube-apiserver "$BIN_DIR/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443 $(legacy_port_flags --insecure-port=0) \
    --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --client-ca-file="$PKI_DIR/ca.crt" --token-auth-file="$PKI_DIR/tokens.csv" \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-key-file="$PKI_DIR/sa.pub" --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --kubelet-client-certificate="$PKI_DIR/kubelet-client.crt" --kubelet-client-key="$PKI_DIR/kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --audit-policy-file="$CLUSTER_STATE/audit-policy.yaml" --audit-log-path="$LOG_DIR/audit.log" \
    --audit-log-maxsize=200 --audit-log-maxbackup=2 \
    --cert-dir="$PKI_DIR/apiserver-extra"
  wait_for "kube-apiserver" 120 kubectl_local get --raw /readyz || die "kube-apiserver is not ready (log: $LOG_DIR/kube-apiserver.log)"
}

start_controllers() {
  # shellcheck disable=SC2046  # legacy_port_flags prints one flag or nothing
  start_daemon kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$KUBECONFIG_FILE" --authentication-kubeconfig="$KUBECONFIG_FILE" \
    --authorization-kubeconfig="$KUBECONFIG_FILE" \
    --service-account-private-key-file="$PKI_DIR/sa.key" --root-ca-file="$PKI_DIR/ca.crt" \
    --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
    --leader-elect=false --bind-address=127.0.0.1 $(legacy_port_flags --port=0) \
    --service-cluster-ip-range="$SERVICE_CIDR" --use-service-account-credentials=true
  # shellcheck disable=SC2046  # legacy_port_flags prints one flag or nothing
  start_daemon kube-scheduler "$BIN_DIR/kube-scheduler" \
    --kubeconfig="$KUBECONFIG_FILE" --authentication-kubeconfig="$KUBECONFIG_FILE" \
    --authorization-kubeconfig="$KUBECONFIG_FILE" \
    --leader-elect=false --bind-address=127.0.0.1 $(legacy_port_flags --port=0)
}
