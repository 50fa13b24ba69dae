#!/usr/bin/env bash
# `make molecule s=role|operator`: molecule test -s <scenario> from the repository root,
# with the project's virtualenv on PATH, against $KUBECONFIG or (when unset) the local
# cluster, which it brings up. Extra arguments go to molecule (e.g. `converge`).
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:?usage: hack/molecule.sh role|operator [molecule command, default test]}
command=${2:-test}
venv=$(./hack/venv.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$PWD/operator${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${KUBECONFIG:-}" ]; then
  ./cluster/cluster.sh up
  export KUBECONFIG; KUBECONFIG=$(./cluster/cluster.sh kubeconfig)
fi
exec molecule "$command" -s "$scenario"
