#!/usr/bin/env bash
# Where a cold run's time goes, piece by piece (no cluster needed for the imports; the
# module call needs $KUBECONFIG): interpreter start, the imports every ansible-playbook,
# every task worker with kubernetes.core lookups and every module process pays, and one
# kubernetes.core.k8s_info call run cold (fresh python) and warm (forked by a module
# server, as ANSIBLE_KOPF_WARM does). Each line is run 3 times: the spread is the noise.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=$("$here/hack/venv.sh")
py="$venv/bin/python"
: "${KUBECONFIG:=/var/lib/otus-cluster/kubeconfig}"
export KUBECONFIG ANSIBLE_PIPELINING=True
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); printf '%6.3f' "$(echo "($e - $s) / 1000000000" | bc -l)"; }
row() { local label=$1; shift; printf '%-58s' "$label"; for _ in 1 2 3; do printf ' %s' "$(secs "$@")"; done; echo; }
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)   seconds, 3 runs each"
row 'python -c pass' "$py" -c pass
row 'import ansible.cli.playbook (ansible-playbook start-up)' "$py" -c 'import ansible.cli.playbook'
row 'import kubernetes client (each lookup task worker)' "$py" -c 'import kubernetes.client, kubernetes.dynamic'
row 'import kubernetes.core module_utils (each module process)' "$py" -c 'import ansible_collections.kubernetes.core.plugins.module_utils.k8s.client'
row 'import ansible_runner' "$py" -c 'import ansible_runner'
row 'ansible-playbook --version' "$venv/bin/ansible-playbook" --version
work=$(mktemp -d)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
printf '#!/bin/sh\ntee %s/payload | %s "$@"\n' "$work" "$py" > "$work/tee"; chmod +x "$work/tee"
"$venv/bin/ansible" -i localhost, -c local -e "ansible_python_interpreter=$work/tee" localhost \
  -m kubernetes.core.k8s_info -a 'kind=Namespace name=default' >/dev/null 2>&1
export PYTHONPATH="$here/operator"
"$py" -c "import os; from ansible_kopf.warm import entry
os.execv('$py', [*entry.server('$py'), '--flavour', 'module', '--socket', '$work/module.sock'])" > "$work/ready" &
server=$!
while ! grep -q ready "$work/ready" 2>/dev/null; do sleep 0.2; done
"$py" -c "import pathlib; from ansible_kopf.warm import pool
print(pool.interpreter_script('$py', pathlib.Path('$work/module.sock')), end='')" > "$work/warm"
chmod +x "$work/warm"
row 'kubernetes.core.k8s_info module: cold python' sh -c "'$py' < '$work/payload'"
row 'kubernetes.core.k8s_info module: warm fork (warm client)' sh -c "'$work/warm' < '$work/payload'"
