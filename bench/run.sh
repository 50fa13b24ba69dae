#!/usr/bin/env bash
# The benchmark: ours vs (a) kopf + direct API calls vs (b) a fresh ansible-runner run per
# event, against the cluster in $KUBECONFIG (default: the local cluster). Arguments go to
# `python -m bench` (see --help). Output: a table, bench/out/{results.md,results.json,latency.png}.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${KUBECONFIG:-}" ] && [ -e /var/lib/otus-cluster/ready ]; then
  export KUBECONFIG=/var/lib/otus-cluster/kubeconfig
fi
venv=$("$here/hack/venv.sh")
cd "$here"  # on sys.path with `-m`: bench, tests (tests/harness.py)
export PYTHONPATH="$here/operator${PYTHONPATH:+:$PYTHONPATH}"  # ansible_kopf.run.summary
exec "$venv/bin/python" -m bench "$@"
