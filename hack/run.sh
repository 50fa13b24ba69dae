#!/usr/bin/env bash
# The run command (`make run`): brings up the local cluster unless $KUBECONFIG points
# at one, installs the CRD, applies the sample MySQL object, and runs the operator in
# the foreground (Ctrl-C stops it). Once the operator is up (its health endpoint answers)
# and the object is Successful it prints how to reach MySQL: a status left by an earlier
# operator alone is not taken for this one's.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(./hack/venv.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$PWD/operator${PYTHONPATH:+:$PYTHONPATH}"

if [ -n "${KUBECONFIG:-}" ]; then
  kubectl=kubectl
  sample=${SAMPLE:-deploy/cr.yml}
else
  ./cluster/cluster.sh up
  export KUBECONFIG; KUBECONFIG=$(./cluster/cluster.sh kubeconfig)
  kubectl=$(./cluster/cluster.sh kubectl-path)
  # the local cluster cannot pull images: its sample uses the locally built MariaDB image
  sample=${SAMPLE:-deploy/samples/mysql-local.yml}
fi
namespace=${NAMESPACE:-default}

echo ">> installing the CRD"
# kubectl checks a manifest against the API server's schema of its kind first; before 1.23
# that schema has no x-kubernetes-validations (the CRDs' CEL rules, which such a server
# drops), so kubectl would refuse the file: skip its check there (the server still
# validates the CRD itself).
minor=$("$kubectl" get --raw /version | sed -n 's/^ *"minor": *"\([0-9]*\).*/\1/p')
validate=()
if [ "${minor:-0}" -lt 23 ]; then validate=(--validate=false); fi
"$kubectl" apply "${validate[@]}" -f deploy/crd.yml
"$kubectl" wait --for=condition=Established crd/mysqls.otus.homework --timeout=60s
echo ">> applying $sample in namespace $namespace"
"$kubectl" -n "$namespace" apply -f "$sample"
name=$("$kubectl" -n "$namespace" get -f "$sample" -o jsonpath='{.metadata.name}')
# the operator's health endpoint, which kopf serves once it runs: on a free local port
# unless one is given
if [ -z "${HEALTH_PROBE_BIND_ADDRESS:-}" ]; then
  HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export HEALTH_PROBE_BIND_ADDRESS
fi
health="http://${HEALTH_PROBE_BIND_ADDRESS/#:/127.0.0.1:}/healthz"

(
  for _ in $(seq 1 600); do
    if ! python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$health" 2>/dev/null; then
      sleep 1
      continue
    fi
    ok=$("$kubectl" -n "$namespace" get mysqls.otus.homework "$name" \
      -o jsonpath='{.status.conditions[?(@.type=="Successful")].status}' 2>/dev/null || true)
    if [ "$ok" = "True" ] &&
      "$kubectl" -n "$namespace" rollout status "deployment/$name" --timeout=600s >/dev/null 2>&1; then
      secret=$("$kubectl" -n "$namespace" get mysqls.otus.homework "$name" -o jsonpath='{.spec.passwordSecretRef.name}')
      secret=${secret:-$name-credentials}
      cat <<MSG

>> MySQL '$name' is ready.
   In the cluster:  mysql -h $name.$namespace.svc.cluster.local -uroot -p  (port 3306)
   From here:       $kubectl -n $namespace port-forward svc/$name 3306:3306
   Root password:   $kubectl -n $namespace get secret $secret -o jsonpath='{.data.password}' | base64 -d
   Status:          $kubectl -n $namespace get mysqls.otus.homework $name
MSG
      exit 0
    fi
    sleep 1
  done
) &

echo ">> starting the operator (Ctrl-C to stop)"
exec python -m ansible_kopf
