# The operator image: `python -m ansible_kopf` (the kopf shim) running the Ansible roles
# named in watches.yaml, with the kubernetes.core collection and no other.
#
#   docker build -t localhost/mysql-operator:dev .
#
# images/operator/build.sh builds the same image without a Docker engine by executing
# this file itself: FROM is a debootstrap'ed Debian bookworm rootfs (its python3 is 3.11
# too), RUN runs in a chroot, COPY honours .dockerignore, and ENV, USER, WORKDIR, EXPOSE,
# LABEL and ENTRYPOINT go into the image config. It stops on any instruction or flag it
# does not implement, and caches everything above the "build.sh: base" line separately.
FROM python:3.11-slim-bookworm

# /opt/venv (requirements.txt pinned by constraints.txt, without the `ansible` package),
# the kubernetes.core collection taken from that package, and the user 1001.
COPY requirements.txt constraints.txt images/operator/install.sh /tmp/build/
RUN PIP_NO_CACHE_DIR=1 sh /tmp/build/install.sh /tmp/build && rm -rf /tmp/build

# build.sh: base

COPY watches.yaml /opt/mysql-operator/watches.yaml
COPY playbooks /opt/mysql-operator/playbooks
COPY roles /opt/mysql-operator/roles
COPY operator/ansible_kopf /opt/mysql-operator/operator/ansible_kopf
COPY operator/collections /opt/mysql-operator/operator/collections
# bytecode now: the root filesystem is read-only at run time (PYTHONDONTWRITEBYTECODE)
RUN /opt/venv/bin/python -m compileall -q /opt/mysql-operator/operator /opt/mysql-operator/roles

LABEL org.opencontainers.image.title="mysql-operator" \
      org.opencontainers.image.description="Kubernetes operator for MySQL: kopf + ansible-runner + Ansible roles"

# HOME and every path Ansible, ansible-runner and the shim write to are under /tmp
# (an emptyDir in deploy/operator/deployment.yaml); at most MAX_RUNNER_ARTIFACTS
# artifact directories are kept per object.
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    HOME=/tmp \
    PYTHONPATH=/opt/mysql-operator/operator \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    WATCHES_FILE=/opt/mysql-operator/watches.yaml \
    HEALTH_PROBE_BIND_ADDRESS=:8080 \
    ANSIBLE_KOPF_WORKDIR=/tmp/ansible-kopf \
    MAX_RUNNER_ARTIFACTS=3 \
    ANSIBLE_HOME=/tmp/ansible \
    ANSIBLE_LOCAL_TEMP=/tmp/ansible/tmp \
    ANSIBLE_REMOTE_TEMP=/tmp/ansible/tmp \
    ANSIBLE_GATHERING=explicit \
    ANSIBLE_COLLECTIONS_PATH=/opt/ansible/collections \
    ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=False \
    ANSIBLE_NOCOLOR=True

USER 1001:1001
WORKDIR /opt/mysql-operator
EXPOSE 8080/tcp
ENTRYPOINT ["python", "-m", "ansible_kopf"]
