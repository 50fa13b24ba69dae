#!/usr/bin/env bash
# The test command (`make test`): sets up the Python environment, runs the linters,
# then pytest over unit and integration tests. Integration tests use $KUBECONFIG when
# set, otherwise the local cluster, which the test fixture brings up.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(./hack/venv.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$PWD/operator${PYTHONPATH:+:$PYTHONPATH}"

echo ">> lint: ruff, mypy, yamllint, ansible-lint, shell syntax"
ruff check operator tests cluster/dns hack
mypy
yamllint -s .
ansible-lint -q
for f in cluster/cluster.sh cluster/lib/*.sh cluster/images/*.sh hack/*.sh; do bash -n "$f"; done
[ "${1:-}" = "--lint-only" ] && exit 0

echo ">> pytest"
exec pytest -ra "$@"
