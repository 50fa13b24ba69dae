#!/usr/bin/env python3
"""Pack a root filesystem directory into a single-layer docker-archive tarball.

The output is the format ``docker save`` writes and ``docker load`` /
``ctr images import`` read (Docker image spec v1.2)::

    <layer-sha256>/layer.tar   the rootfs as one uncompressed layer
    <config-sha256>.json       image config: platform, Env, Entrypoint, Cmd, rootfs diff_ids
    manifest.json              [{"Config": ..., "RepoTags": [...], "Layers": [...]}]

The layer keeps numeric owners and modes (uid/gid only, no user names, so the
host's /etc/passwd never leaks in), hard links and symlinks; it leaves out the
contents of /dev, /proc and /sys (the runtime provides those) and, in /dev,
device nodes in particular. Entries are sorted so that the same tree gives the
same layer. The output file is written next to its destination and renamed into
place, so a killed run never leaves a complete-looking tarball behind.

Standard library only: it runs with the system python3 before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import stat
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

#: Directories whose contents never go into a layer: the container runtime mounts them.
RUNTIME_DIRS = ("dev", "proc", "sys")
#: How many left-out entries to name in the warning.
SHOW_SKIPPED = 8
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class ImageSpec:
    """What goes into the image config besides the layer."""

    tag: str
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: list[str] = field(default_factory=lambda: [DEFAULT_PATH])
    exposed_ports: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    workdir: str = "/"
    user: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    architecture: str = "amd64"
    os: str = "linux"
    created: str = ""
    history: str = ""


class _HashingWriter(io.RawIOBase):
    """A write-only stream that forwards to ``sink`` and hashes what passes through."""

    def __init__(self, sink: IO[bytes]) -> None:
        super().__init__()
        self._sink = sink
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._sink.write(view)
        self.sha256.update(view)
        self.size += len(view)
        return len(view)


def docker_arch(machine: str | None = None) -> str:
    """Map a kernel machine name (``uname -m``) to the Go/OCI architecture name."""
    machine = machine or platform.machine()
    return {
        "x86_64": "amd64",
        "aarch64": "arm64",
        "armv7l": "arm",
        "ppc64le": "ppc64le",
        "s390x": "s390x",
    }.get(machine, machine)


def walk_rootfs(rootfs: Path) -> Iterator[tuple[Path, str]]:
    """Yield ``(path, arcname)`` for every entry under ``rootfs``, parents first, sorted.

    The root itself is not yielded; the contents of RUNTIME_DIRS are skipped (the
    directories themselves are kept as mount points).
    """
    stack: list[tuple[Path, str]] = [(rootfs, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as it:
            names = sorted(entry.name for entry in it)
        subdirs: list[tuple[Path, str]] = []
        for name in names:
            path = directory / name
            arcname = f"{prefix}{name}"
            yield path, arcname
            if prefix == "" and name in RUNTIME_DIRS:
                continue
            if stat.S_ISDIR(path.lstat().st_mode):
                subdirs.append((path, arcname + "/"))
        # depth first, in name order: push in reverse so the smallest name pops first
        stack.extend(reversed(subdirs))


def write_layer(rootfs: Path, out: IO[bytes]) -> tuple[str, int]:
    """Write the rootfs as an uncompressed layer tar to ``out``.

    Returns ``(sha256 hex digest, size in bytes)``, the digest being the diff_id.
    """
    sink = _HashingWriter(out)
    skipped: list[str] = []
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        # An explicit root entry: without it containerd leaves the snapshot's root at
        # mode 0700 and every non-root process in the container fails to load libc.
        root = tarfile.TarInfo("./")
        root.type, root.mode, root.mtime = tarfile.DIRTYPE, 0o755, int(rootfs.stat().st_mtime)
        tar.addfile(root)
        for path, arcname in walk_rootfs(rootfs):
            mode = path.lstat().st_mode
            if stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                skipped.append(arcname)
                continue
            info = tar.gettarinfo(str(path), arcname)
            # numeric owners only, whole-second mtimes (no per-file PAX mtime records)
            info.uname = info.gname = ""
            info.mtime = int(info.mtime)
            if info.isreg():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    if skipped:
        print(
            f"pack_image: left out {len(skipped)} device node(s)/socket(s): "
            + " ".join(skipped[:SHOW_SKIPPED])
            + (" ..." if len(skipped) > SHOW_SKIPPED else ""),
            file=sys.stderr,
        )
    return sink.sha256.hexdigest(), sink.size


def image_config(spec: ImageSpec, diff_id: str) -> dict[str, Any]:
    """Build the image config JSON (Docker image spec v1.2 / OCI image config)."""
    config: dict[str, Any] = {
        "Env": spec.env,
        "Entrypoint": spec.entrypoint,
        "Cmd": spec.cmd,
        "WorkingDir": spec.workdir,
    }
    if spec.user:
        config["User"] = spec.user
    if spec.exposed_ports:
        config["ExposedPorts"] = {port: {} for port in spec.exposed_ports}
    if spec.volumes:
        config["Volumes"] = {volume: {} for volume in spec.volumes}
    if spec.labels:
        config["Labels"] = spec.labels
    return {
        "architecture": spec.architecture,
        "os": spec.os,
        "created": spec.created,
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": spec.created, "created_by": spec.history or "pack_image.py"}],
    }


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = mtime
    tar.addfile(info, io.BytesIO(data))


def pack(rootfs: Path, out: Path, spec: ImageSpec) -> dict[str, Any]:
    """Write the docker-archive for ``rootfs`` to ``out`` (atomically); return manifest entry."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if not spec.created:
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
        spec.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    mtime = int(time.time())
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        layer_path = Path(tmp) / "layer.tar"
        with layer_path.open("wb") as fh:
            diff_id, _ = write_layer(rootfs, fh)
        config_bytes = json.dumps(
            image_config(spec, diff_id), indent=None, separators=(",", ":"), sort_keys=True
        ).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        layer_name = f"{diff_id}/layer.tar"
        manifest = [{"Config": config_name, "RepoTags": [spec.tag], "Layers": [layer_name]}]
        partial = Path(tmp) / "image.tar"
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            dir_info = tarfile.TarInfo(diff_id)
            dir_info.type = tarfile.DIRTYPE
            dir_info.mode = 0o755
            dir_info.mtime = mtime
            tar.addfile(dir_info)
            tar.add(
                str(layer_path), arcname=layer_name, filter=lambda info: _reset_owner(info, mtime)
            )
            _add_bytes(tar, config_name, config_bytes, mtime)
            _add_bytes(tar, "manifest.json", json.dumps(manifest).encode(), mtime)
        os.chmod(partial, 0o644)
        os.replace(partial, out)
    return manifest[0]


def _reset_owner(info: tarfile.TarInfo, mtime: int) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o644
    info.mtime = mtime
    return info


def _json_list(value: str) -> list[str]:
    parsed = json.loads(value)
    if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
        raise argparse.ArgumentTypeError(f"expected a JSON list of strings: {value}")
    return parsed


def _key_value(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE: {value}")
    return key, val


def parse_args(argv: Sequence[str] | None = None) -> tuple[Path, Path, ImageSpec]:
    """Parse the command line into (rootfs, output path, image spec)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rootfs", type=Path, required=True, help="directory to pack as the layer")
    p.add_argument("--out", type=Path, required=True, help="docker-archive tarball to write")
    p.add_argument("--tag", required=True, help="image reference, e.g. localhost/pause:1.0")
    p.add_argument("--entrypoint", type=_json_list, help='JSON list, e.g. ["/pause"]')
    p.add_argument("--cmd", type=_json_list, help='JSON list, e.g. ["mariadbd"]')
    p.add_argument(
        "--env",
        action="append",
        default=[],
        help="KEY=VALUE (repeatable; PATH defaults to the usual Debian PATH)",
    )
    p.add_argument("--expose", action="append", default=[], help="PORT/PROTO, e.g. 3306/tcp")
    p.add_argument("--volume", action="append", default=[], help="path declared as a volume")
    p.add_argument("--workdir", default="/")
    p.add_argument("--user", default="")
    p.add_argument("--label", action="append", default=[], type=_key_value, help="KEY=VALUE")
    p.add_argument("--arch", default=docker_arch(), help="image architecture (default: host)")
    p.add_argument("--os", default="linux")
    p.add_argument(
        "--created", default="", help="RFC 3339 time (default: SOURCE_DATE_EPOCH or now)"
    )
    p.add_argument("--history", default="", help="created_by text of the history entry")
    a = p.parse_args(argv)
    if not a.rootfs.is_dir():
        p.error(f"--rootfs {a.rootfs}: not a directory")
    env = list(a.env)
    if not any(e.startswith("PATH=") for e in env):
        env.insert(0, DEFAULT_PATH)
    spec = ImageSpec(
        tag=a.tag,
        entrypoint=a.entrypoint,
        cmd=a.cmd,
        env=env,
        exposed_ports=a.expose,
        volumes=a.volume,
        workdir=a.workdir,
        user=a.user,
        labels=dict(a.label),
        architecture=a.arch,
        os=a.os,
        created=a.created,
        history=a.history,
    )
    return a.rootfs, a.out, spec


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    rootfs, out, spec = parse_args(argv)
    entry = pack(rootfs, out, spec)
    print(
        f"pack_image: wrote {out} ({spec.tag}, {out.stat().st_size // (1 << 20)} MiB, "
        f"layer {entry['Layers'][0].split('/')[0][:12]})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
