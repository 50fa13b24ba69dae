# shellcheck shell=bash
# Owns the Debian packages the local cluster needs, installed idempotently.

CLUSTER_DEBS=(etcd-server containerd runc containernetworking-plugins iptables conntrack
  debootstrap busybox-static gcc libc6-dev make rsync golang-go openssl iproute2 curl
  golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev dpkg-dev)

install_deps() {
  local missing=() p
  for p in "${CLUSTER_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "$(id -u)" = 0 ] || die "the local cluster needs root (it runs containerd, kubelet and iptables)"
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}
