#!/bin/sh
# Installs the operator's runtime into the image being built. The Dockerfile runs it (on
# python:3.11-slim-bookworm) and so does images/operator/build.sh (in a chroot of a Debian
# bookworm rootfs), so both images get the same environment:
#
#   /opt/venv                    requirements.txt pinned by constraints.txt, except the
#                                `ansible` package (ansible-core and ~100 collections)
#   /opt/ansible/collections     kubernetes.core only, taken from that `ansible` package
#                                (the version requirements.txt pins), no other collection
#   user mysql-operator          uid/gid 1001, home /tmp, no login shell
#
# pip and setuptools leave the venv at the end (nothing installs packages at run time), and
# so do two large parts no code path uses (see below).
#
# usage: install.sh DIR   (DIR holds requirements.txt and constraints.txt)
set -eu

src=$1
venv=/opt/venv
collections=/opt/ansible/collections
uid=1001

ansible_pin=$(grep -E -i '^ansible[[:space:]]*==' "$src/requirements.txt" || true)
if [ -z "$ansible_pin" ]; then
  echo "install.sh: requirements.txt pins no 'ansible==<version>' to take kubernetes.core from" >&2
  exit 1
fi

echo ">> install.sh: $venv from requirements.txt (without $ansible_pin), constraints.txt"
python3 -m venv "$venv"
grep -E -v -i '^ansible[[:space:]]*==' "$src/requirements.txt" > "$src/requirements-image.txt"
"$venv/bin/pip" install --no-input --disable-pip-version-check --progress-bar off -q \
  -r "$src/requirements-image.txt" -c "$src/constraints.txt"

echo ">> install.sh: kubernetes.core from $ansible_pin into $collections"
"$venv/bin/pip" download --no-input --disable-pip-version-check --progress-bar off -q \
  --no-deps --only-binary=:all: -d "$src/wheels" "$ansible_pin"
"$venv/bin/python" - "$collections" "$src"/wheels/ansible-*.whl <<'PY'
import json, sys, zipfile
dest, wheel = sys.argv[1], sys.argv[2]
prefix = 'ansible_collections/kubernetes/core/'
with zipfile.ZipFile(wheel) as archive:
    members = [name for name in archive.namelist() if name.startswith(prefix)]
    if not members:
        sys.exit(f"install.sh: {wheel} has no {prefix}")
    archive.extractall(dest, members)
with open(f"{dest}/{prefix}MANIFEST.json", encoding='utf-8') as manifest:
    info = json.load(manifest)['collection_info']
if info.get('dependencies'):
    sys.exit(f"install.sh: kubernetes.core {info['version']} needs {info['dependencies']}")
print(f">> install.sh: kubernetes.core {info['version']} ({len(members)} files)")
PY
chmod -R a+rX,go-w /opt/ansible

# Not used at run time, and a fifth of the image: the asynchronous copy of the Kubernetes
# client (kubernetes.aio; kubernetes.core, the shim and the leader election use the
# synchronous client, kopf its own) and ansible-core's test runner (ansible_test).
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo ">> install.sh: removing kubernetes/aio, ansible_test, pip and setuptools from $venv"
rm -rf "$site/kubernetes/aio" "$site/ansible_test"
"$venv/bin/pip" uninstall --no-input --disable-pip-version-check -q -y pip setuptools
"$venv/bin/python" -c 'import ansible_runner, kopf, kubernetes
from ansible.release import __version__
print(">> install.sh: imports work; ansible-core", __version__)'

echo ">> install.sh: user mysql-operator ($uid:$uid)"
groupadd --gid "$uid" mysql-operator
useradd --uid "$uid" --gid "$uid" --home-dir /tmp --no-create-home --shell /usr/sbin/nologin \
  --comment "mysql-operator" mysql-operator
