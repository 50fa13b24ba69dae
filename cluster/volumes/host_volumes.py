"""Host directories of the local cluster's hostPath PersistentVolumes, made writable for non-root pods.

A hostPath volume has no ownership management: kubelet ignores a pod's `fsGroup` for it,
and the directory it creates for `type: DirectoryOrCreate` is root's, mode 0755. Pods that
run as a non-root user from the start (every pod of a namespace at Pod Security
"restricted") could not write there. Clusters that hand out node directories (the
local-path provisioner of kind and k3s) create each one world-writable (mode 0777) before
its pod starts; this process does the same for the local cluster, on the node itself:

- it watches PersistentVolumes; for each hostPath volume under one of the `--base`
  directories, it creates the directory with mode 0777 (and its parents with 0755) as
  soon as the volume exists, before a pod can mount it;
- a directory kubelet created first (empty, root's, 0755) gets mode 0777 as well;
- a directory that holds files, or that anyone else owns, is left as it is: it is somebody's.

Only paths under the `--base` directories are touched, never other hostPath volumes.
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

log = logging.getLogger("host-volumes")
SHARED_MODE = 0o777


def inside(path: Path, bases: list[Path]) -> bool:
    """Whether ``path`` is strictly below one of ``bases`` (after normalising ``..``)."""
    resolved = Path(os.path.normpath(path))
    return any(resolved != base and resolved.is_relative_to(base) for base in bases)


def prepare(path: Path, bases: list[Path]) -> str:
    """Make ``path`` a directory every pod user may write to; say what was done."""
    if not inside(path, bases):
        return "outside the bases: left alone"
    try:
        info = path.lstat()
    except FileNotFoundError:
        old = os.umask(0o022)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir(exist_ok=True)
        finally:
            os.umask(old)
        path.chmod(SHARED_MODE)
        return "created"
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory: left alone"
    if stat.S_IMODE(info.st_mode) == SHARED_MODE:
        return "ready"
    if info.st_uid != 0 or any(path.iterdir()):
        return "in use: left alone"
    path.chmod(SHARED_MODE)
    return "opened"


def _host_path(volume: Any) -> Path | None:
    source = volume.spec.host_path if volume.spec is not None else None
    return Path(source.path) if source is not None and source.path else None


def _handle(volume: Any, bases: list[Path]) -> None:
    path = _host_path(volume)
    if path is None:
        return
    try:
        done = prepare(path, bases)
    except OSError as exc:
        log.warning("%s (%s): %s", volume.metadata.name, path, exc)
        return
    if done in {"created", "opened"}:
        log.info("%s: %s %s", volume.metadata.name, done, path)


def watch_forever(bases: list[Path]) -> None:
    """List, then watch, PersistentVolumes; prepare each hostPath directory as it appears."""
    v1 = client.CoreV1Api()
    while True:
        try:
            listing = v1.list_persistent_volume(_request_timeout=30)
            for volume in listing.items:
                _handle(volume, bases)
            version = listing.metadata.resource_version if listing.metadata else None
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                v1.list_persistent_volume, resource_version=version, timeout_seconds=300)
            for event in stream:
                if event["type"] in {"ADDED", "MODIFIED"}:
                    _handle(event["object"], bases)
        except Exception as exc:  # the API server restarts with the cluster; keep trying
            log.warning("PersistentVolume watch interrupted: %s", exc)
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--base", action="append", required=True, help="a directory whose volumes to prepare")
    parser.add_argument("--state", help="the cluster's state dir (only marks the process as the cluster's)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    bases = [Path(os.path.normpath(base)) for base in args.base]
    for base in bases:
        base.mkdir(parents=True, exist_ok=True)
    log.info("preparing hostPath volumes under %s", ", ".join(map(str, bases)))
    watch_forever(bases)


if __name__ == "__main__":
    main()
