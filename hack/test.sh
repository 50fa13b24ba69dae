#!/usr/bin/env bash
# The test command (`make test`): sets up the Python environment, runs the linters,
# then pytest over unit and integration tests. Integration tests use $KUBECONFIG when
# set, otherwise the local cluster, which the test fixture brings up.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(./hack/venv.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$PWD/operator${PYTHONPATH:+:$PYTHONPATH}"

echo ">> lint: ruff, mypy, import-linter, yamllint, ansible-lint, shellcheck"
ruff check operator tests cluster images deploy bench roles molecule
mypy
# the layer contracts in pyproject.toml; the report only when one is broken
if ! imports=$(lint-imports --no-cache 2>&1); then echo "$imports"; exit 1; fi
echo "$imports" | grep -E '^Contracts: '
yamllint -s .
# the roles call operator_sdk.util (requeue_after), which the operator ships in operator/collections
ANSIBLE_COLLECTIONS_PATH="$PWD/operator/collections" ansible-lint -q
# what the lint and the unit tests run: shellcheck; busybox, zstd and age, with which
# tests/unit/test_objects_script.py runs the backup-tools image's objects.sh (Debian packages)
missing=()
for pair in shellcheck:shellcheck busybox:busybox-static zstd:zstd age:age; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo ">> installing ${missing[*]} (Debian packages)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/dev/null
fi
shellcheck -x -P cluster cluster/cluster.sh cluster/lib/*.sh cluster/images/*.sh images/operator/*.sh hack/*.sh .ci/run bench/*.sh
# the roles' scripts, which the Jobs' containers run with /bin/sh -c (verify.sh with bash)
mapfile -t scripts < <(find roles -path '*/files/*.sh' ! -name verify.sh | sort)
shellcheck -s sh "${scripts[@]}"
shellcheck -s bash roles/mysql_backup/files/verify.sh
echo ">> lint passed"
[ "${1:-}" = "--lint-only" ] && exit 0

if [ -z "${KUBECONFIG:-}" ] && [ $# -eq 0 ]; then
  # up front, where its progress shows (pytest's workers would hold it back): a no-op when
  # the local cluster runs, its Kubernetes build on the first run (see README)
  ./cluster/cluster.sh up
  # the operator's image for the in-cluster tests, also up front for its progress (cached
  # by the hash of its inputs: seconds when unchanged, about 4.5 minutes the first time)
  ./images/operator/build.sh import
fi
if [ $# -gt 0 ]; then
  exec pytest -ra --durations=25 -n 2 --dist loadfile --no-loadscope-reorder "$@"
fi
# Alone first, one after the other: what runs an operator on every namespace (the README's
# `make run`; the in-cluster operator as `kubectl apply -k deploy/` installs it), which
# would reconcile the objects of tests running beside it, the RBAC test, which shares the
# in-cluster operator's namespace, and the API server's freezes, which stop every test
# beside them.
alone=(tests/integration/test_00_readme_commands.py tests/integration/test_in_cluster.py
       tests/integration/test_rbac.py tests/integration/test_faults_freeze.py)
echo ">> pytest ${alone[*]} (alone)"
pytest -ra --durations=5 -n 0 "${alone[@]}"
echo ">> pytest (two workers: each test module runs whole in one, the slowest first; see tests/conftest.py)"
# the slowest tests: where the time budget goes
exec pytest -ra --durations=25 -n 2 --dist loadfile --no-loadscope-reorder "${alone[@]/#/--ignore=}"
