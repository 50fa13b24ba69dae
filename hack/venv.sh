#!/usr/bin/env bash
# Owns the project's Python environment: creates (once per requirements hash) a
# virtualenv outside the repository, installs the pinned requirements into it,
# and prints its path. Re-running with unchanged requirements is instant.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${MYSQL_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator}
hash=$(cat "$here/requirements.txt" "$here/requirements-dev.txt" "$here/constraints.txt" | sha256sum | cut -c1-12)
venv="$cache/venv-$hash"
mkdir -p "$cache"
# one creator at a time (the cluster's daemons, pytest workers and make targets all ask)
exec 8>"$cache/venv.lock"
flock 8
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo ">> creating Python environment $venv (first run: about 2 minutes)" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -r "$here/requirements.txt" -r "$here/requirements-dev.txt" -c "$here/constraints.txt" >&2
  touch "$venv/.complete"
fi
echo "$venv"
