# shellcheck shell=bash
# Owns the local cluster's S3-compatible object store (cluster/object-store/seaweedfs.yaml):
# namespace object-store at Pod Security "restricted", the Secret seaweedfs-s3 with a
# generated access key (kept across runs: backups written with it stay readable), SeaweedFS
# and its Service. Idempotent; a store already running is left as it is.

OBJECT_STORE_NAMESPACE=object-store
OBJECT_STORE_ENDPOINT="http://seaweedfs.$OBJECT_STORE_NAMESPACE.svc.$CLUSTER_DOMAIN:8333"

cmd_object_store() {
  local image manifest env_file
  image=$(sed -n 's/^SEAWEEDFS_VERSION=v//p' "$CLUSTER_ROOT/images/build.sh")
  [ -n "$image" ] || die "no SEAWEEDFS_VERSION in cluster/images/build.sh"
  image="localhost/seaweedfs:$image"
  kubectl_local apply -f - >/dev/null <<NS
apiVersion: v1
kind: Namespace
metadata:
  name: $OBJECT_STORE_NAMESPACE
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
NS
  if ! kubectl_local -n "$OBJECT_STORE_NAMESPACE" get secret seaweedfs-s3 >/dev/null 2>&1; then
    # from a file, so that the key is on no command line
    env_file=$(mktemp)
    chmod 600 "$env_file"
    printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' \
      "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
      "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$env_file"
    kubectl_local -n "$OBJECT_STORE_NAMESPACE" create secret generic seaweedfs-s3 \
      --from-env-file="$env_file" >/dev/null
    rm -f "$env_file"
  fi
  manifest=$(sed "s|SEAWEEDFS_IMAGE|$image|" "$CLUSTER_ROOT/object-store/seaweedfs.yaml")
  kubectl_local apply -f - >/dev/null <<<"$manifest"
  kubectl_local -n "$OBJECT_STORE_NAMESPACE" rollout status deployment/seaweedfs --timeout=180s >&2
  say "object store ready: $OBJECT_STORE_ENDPOINT, bucket backups, credentials in Secret $OBJECT_STORE_NAMESPACE/seaweedfs-s3"
  echo "$OBJECT_STORE_ENDPOINT"
}
