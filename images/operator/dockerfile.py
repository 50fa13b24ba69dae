#!/usr/bin/env python3
"""
The Dockerfile as images/operator/build.sh executes it without a Docker engine.

It owns what the Dockerfile and .dockerignore *say*; build.sh owns how a step runs (the
debootstrap'ed rootfs, the chroot, the caches). Only a single-stage subset is
implemented, and everything else is refused with the line number, so the two builds
cannot silently drift apart:

``FROM image``                     one stage; build.sh provides the base rootfs
``COPY src... dest``               from the build context, honouring .dockerignore; files
                                   owned by 0:0, modes and mtimes kept, symlinks kept
``RUN command``                    shell form, run by build.sh in the rootfs
``ENV K=V ...`` / ``LABEL K=V ...``  quoted values allowed, no ``$VAR`` substitution
``USER``, ``WORKDIR`` (absolute), ``EXPOSE``, ``ENTRYPOINT``/``CMD`` (JSON form)

A comment line ``# build.sh: base`` splits the steps into the *base* stage (cached by
build.sh on its own: the OS and the Python environment) and the *app* stage.

Sub-commands (``--help`` for each): ``script`` prints a stage as shell commands for
build.sh, ``pack-args`` the image config as pack_image.py arguments, ``sources`` the
context paths a stage copies, ``hash`` a digest of what those paths contribute, and
``copy`` performs one COPY into a rootfs.

Standard library only: it runs with the system python3 before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import posixpath
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

BASE_MARKER = '# build.sh: base'
STAGES = ('base', 'app')
MIN_COPY_WORDS = 2  # COPY src dest
CONFIG_INSTRUCTIONS = ('ENV', 'LABEL', 'USER', 'WORKDIR', 'EXPOSE', 'ENTRYPOINT', 'CMD')


class DockerfileError(ValueError):
    """The Dockerfile (or .dockerignore) uses something this build does not implement."""


@dataclasses.dataclass(frozen=True)
class Instruction:
    line: int  # 1-based line of the instruction's first line
    keyword: str  # upper case
    args: str  # the rest, continuation lines joined
    stage: str  # 'base' or 'app'


@dataclasses.dataclass
class ImageConfig:
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    user: str = ''
    workdir: str = '/'
    expose: list[str] = dataclasses.field(default_factory=list)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None


# --- parsing ------------------------------------------------------------------------------


def instructions(path: Path) -> list[Instruction]:
    """The instructions of the Dockerfile, with their stage; checks the supported subset."""
    result: list[Instruction] = []
    stage = 'base'
    marker_seen = False
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text(encoding='utf-8').splitlines(), start=1):
        stripped = raw.strip()
        if stripped == BASE_MARKER:
            if pending or marker_seen:
                raise DockerfileError(f"{path}:{number}: misplaced or repeated {BASE_MARKER!r}")
            marker_seen, stage = True, 'app'
            continue
        if stripped.startswith('#') or (not stripped and not pending):
            continue  # Docker drops comment lines, even inside a continuation
        if not pending:
            start = number
        if raw.rstrip().endswith('\\'):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        text = ''.join(pending).strip()
        pending = []
        keyword, _, args = text.partition(' ')
        result.append(Instruction(start, keyword.upper(), args.strip(), stage))
    if pending:
        raise DockerfileError(f"{path}:{start}: the file ends inside a line continuation")
    if not marker_seen:
        raise DockerfileError(f"{path}: no {BASE_MARKER!r} line")
    _check(path, result)
    return result


def _check(path: Path, parsed: Sequence[Instruction]) -> None:
    known = ('FROM', 'COPY', 'RUN', *CONFIG_INSTRUCTIONS)
    froms = [i for i in parsed if i.keyword == 'FROM']
    if len(froms) != 1 or parsed[0].keyword != 'FROM':
        raise DockerfileError(f"{path}: exactly one FROM, first (build.sh builds one stage)")
    for ins in parsed:
        where = f"{path}:{ins.line}: {ins.keyword}"
        if ins.keyword not in known:
            raise DockerfileError(f"{where} is not implemented by build.sh")
        if ins.args.startswith('--'):
            raise DockerfileError(f"{where}: flags ({ins.args.split()[0]}) are not implemented")
        if ins.keyword in ('COPY', 'ENV', 'LABEL', 'USER', 'WORKDIR', 'EXPOSE') and '$' in ins.args:
            raise DockerfileError(f"{where}: variable substitution is not implemented")
        if ins.keyword == 'RUN' and ins.args.startswith('['):
            raise DockerfileError(f"{where}: only the shell form is implemented")
        if ins.keyword in ('ENTRYPOINT', 'CMD') and not ins.args.startswith('['):
            raise DockerfileError(f"{where}: only the JSON (exec) form is implemented")
        if ins.keyword in CONFIG_INSTRUCTIONS and ins.stage == 'base' and ins.keyword != 'ENV':
            raise DockerfileError(f"{where}: image config belongs below {BASE_MARKER!r}")


def _pairs(ins: Instruction) -> list[tuple[str, str]]:
    """``K=V K2="v 2"`` (or the legacy ``K value``) of an ENV or LABEL instruction."""
    words = shlex.split(ins.args, posix=True)
    if words and '=' not in words[0]:
        return [(words[0], ins.args.split(None, 1)[1] if len(words) > 1 else '')]
    pairs = []
    for word in words:
        key, sep, value = word.partition('=')
        if not sep or not key:
            raise DockerfileError(
                f"line {ins.line}: {ins.keyword}: expected KEY=VALUE, got {word!r}")
        pairs.append((key, value))
    return pairs


def _json_list(ins: Instruction) -> list[str]:
    value = json.loads(ins.args)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DockerfileError(f"line {ins.line}: {ins.keyword}: expected a JSON list of strings")
    return value


def copy_args(ins: Instruction) -> tuple[list[str], str]:
    """(sources, destination) of a COPY instruction."""
    words = _json_list(ins) if ins.args.startswith('[') else ins.args.split()
    if len(words) < MIN_COPY_WORDS:
        raise DockerfileError(f"line {ins.line}: COPY needs a source and a destination")
    sources, dest = words[:-1], words[-1]
    if len(sources) > 1 and not dest.endswith('/'):
        raise DockerfileError(f"line {ins.line}: COPY of several sources needs a dest ending in /")
    for source in sources:
        plain = not any(ch in source for ch in '*?[') and not posixpath.isabs(source)
        if not plain or '..' in source.split('/'):
            raise DockerfileError(
                f"line {ins.line}: COPY source {source!r}: only plain context paths")
    return sources, dest


def config(parsed: Sequence[Instruction]) -> ImageConfig:
    """The image config the instructions leave (ENV of the base image itself not included)."""
    result = ImageConfig()
    for ins in parsed:
        if ins.keyword == 'ENV':
            result.env.update(_pairs(ins))
        elif ins.keyword == 'LABEL':
            result.labels.update(_pairs(ins))
        elif ins.keyword == 'USER':
            result.user = ins.args
        elif ins.keyword == 'WORKDIR':
            if not ins.args.startswith('/'):
                raise DockerfileError(f"line {ins.line}: WORKDIR must be absolute")
            result.workdir = ins.args
        elif ins.keyword == 'EXPOSE':
            result.expose += [p if '/' in p else f"{p}/tcp" for p in ins.args.split()]
        elif ins.keyword == 'ENTRYPOINT':
            result.entrypoint = _json_list(ins)
        elif ins.keyword == 'CMD':
            result.cmd = _json_list(ins)
    return result


# --- .dockerignore ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rule:
    pattern: str
    regex: re.Pattern[str]
    exclude: bool  # False for "!pattern"


def _translate(pattern: str) -> re.Pattern[str]:
    """A Go filepath.Match pattern with ``**`` (moby's patternmatcher) as an anchored regex."""
    out, i = '', 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith('**', i):
            i += 2
            if pattern.startswith('/', i):
                i += 1
            out += '.*' if i >= len(pattern) else '(.*/)?'
            continue
        if ch == '*':
            out += '[^/]*'
        elif ch == '?':
            out += '[^/]'
        elif ch == '[':
            end = pattern.find(']', i + 1)
            if end < 0:
                raise DockerfileError(f".dockerignore: unterminated [ in {pattern!r}")
            body = pattern[i + 1:end]
            out += '[' + ('^' + body[1:] if body.startswith('^') else body) + ']'
            i = end
        elif ch == '\\' and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(f"^{out}$")


def ignore_rules(context: Path) -> list[Rule]:
    path = context / '.dockerignore'
    if not path.exists():
        return []
    rules = []
    for raw in path.read_text(encoding='utf-8').splitlines():
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        exclude = not line.startswith('!')
        pattern = posixpath.normpath(line.lstrip('!').strip()).lstrip('/')
        rules.append(Rule(pattern, _translate(pattern), exclude))
    return rules


def excluded(relpath: str, rules: Sequence[Rule]) -> bool:
    """Docker's rule: the last pattern matching the path or a parent directory decides."""
    parts = relpath.split('/')
    prefixes = ['/'.join(parts[:n]) for n in range(1, len(parts) + 1)]
    result = False
    for rule in rules:
        if any(rule.regex.match(prefix) for prefix in prefixes):
            result = rule.exclude
    return result


def entries(context: Path, source: str, rules: Sequence[Rule]) -> Iterator[tuple[str, Path]]:
    """(path relative to the source, absolute path) of what a COPY of ``source`` takes, sorted.

    A directory source yields its contents (not itself, ``''`` aside); symlinks are not
    followed.
    """
    root = context / source
    relroot = posixpath.normpath(source)
    if not os.path.lexists(root) or excluded(relroot, rules):
        raise DockerfileError(
            f"COPY {source}: not in the build context or excluded by .dockerignore")
    if not root.is_dir() or root.is_symlink():
        yield '', root
        return
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        reldir = os.path.relpath(directory, root)
        for name in sorted(dirnames + filenames):
            rel = name if reldir == '.' else f"{reldir}/{name}"
            if not excluded(f"{relroot}/{rel}", rules):
                yield rel, Path(directory) / name
        # never descend into symlinked directories
        dirnames[:] = [d for d in dirnames if not (Path(directory) / d).is_symlink()]


# --- sub-commands -------------------------------------------------------------------------


def stage_sources(dockerfile: Path, stage: str) -> list[str]:
    return [src for ins in instructions(dockerfile) if ins.keyword == 'COPY' and ins.stage == stage
            for src in copy_args(ins)[0]]


def digest(context: Path, sources: Sequence[str]) -> str:
    """sha256 over paths, types, permission bits and contents (or link targets); no mtimes."""
    rules = ignore_rules(context)
    h = hashlib.sha256()
    for source in sources:
        for rel, path in entries(context, source, rules):
            st = path.lstat()
            h.update(f"{source}\0{rel}\0{stat.S_IFMT(st.st_mode):o}\0{stat.S_IMODE(st.st_mode):o}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                with path.open('rb') as fh:
                    for block in iter(lambda: fh.read(1 << 20), b''):
                        h.update(block)
            h.update(b'\0')
    return h.hexdigest()


def _inside(rootfs: Path, dest: str) -> Path:
    target = rootfs / dest.lstrip('/')
    if '..' in Path(dest).parts:
        raise DockerfileError(f"COPY destination {dest!r} leaves the rootfs")
    return target


def _makedirs(rootfs: Path, path: Path) -> None:
    """Create missing directories 0755 root:root, as Docker does for a COPY destination."""
    missing = []
    while not path.exists() and path != rootfs:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o755)
        os.chown(directory, 0, 0)
        os.chmod(directory, 0o755)  # noqa: S103  (Docker's mode for directories it creates)


def _copy_entry(src: Path, dst: Path) -> None:
    st = src.lstat()
    if stat.S_ISDIR(st.st_mode):
        if not dst.is_dir():
            dst.mkdir()
    elif stat.S_ISLNK(st.st_mode):
        if os.path.lexists(dst):
            dst.unlink()
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISREG(st.st_mode):
        if os.path.lexists(dst) and dst.is_dir():
            raise DockerfileError(f"COPY: {dst} is a directory")
        shutil.copyfile(src, dst, follow_symlinks=False)
    else:
        raise DockerfileError(f"COPY: {src} is neither a file, a directory nor a symlink")
    os.lchown(dst, 0, 0)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def copy(context: Path, rootfs: Path, sources: Sequence[str], dest: str) -> int:
    """Docker's COPY semantics for plain context paths; returns how many entries it wrote."""
    rules = ignore_rules(context)
    count = 0
    for source in sources:
        is_dir = (context / source).is_dir() and not (context / source).is_symlink()
        if is_dir:
            base = _inside(rootfs, dest)
        elif dest.endswith('/') or len(sources) > 1:
            base = _inside(rootfs, dest) / posixpath.basename(posixpath.normpath(source))
        else:
            base = _inside(rootfs, dest)
        _makedirs(rootfs, base if is_dir else base.parent)
        directories: list[tuple[Path, Path]] = []
        for rel, path in entries(context, source, rules):
            target = base / rel if rel else base
            _makedirs(rootfs, target.parent)
            _copy_entry(path, target)
            if path.is_dir() and not path.is_symlink():
                directories.append((path, target))
            count += 1
        for path, target in reversed(directories):  # files written inside changed the mtimes
            st = path.lstat()
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    return count


def script(dockerfile: Path, stage: str) -> str:
    """A stage as shell commands: ``df_from``, ``df_copy DEST SRC...``, ``df_run CMD``,
    ``df_env KEY VALUE``, ``df_workdir DIR`` (build.sh defines them)."""
    lines = []
    for ins in instructions(dockerfile):
        if ins.stage != stage:
            if ins.keyword == 'ENV' and ins.stage == 'base':  # the app's RUNs see it too
                lines += [f"df_env {shlex.quote(k)} {shlex.quote(v)}" for k, v in _pairs(ins)]
            continue
        if ins.keyword == 'FROM':
            lines.append(f"df_from {shlex.quote(ins.args)}")
        elif ins.keyword == 'COPY':
            sources, dest = copy_args(ins)
            lines.append(' '.join(['df_copy', shlex.quote(dest), *map(shlex.quote, sources)]))
        elif ins.keyword == 'RUN':
            lines.append(f"df_run {shlex.quote(ins.args)}")
        elif ins.keyword == 'ENV':
            lines += [f"df_env {shlex.quote(k)} {shlex.quote(v)}" for k, v in _pairs(ins)]
        elif ins.keyword == 'WORKDIR':
            lines.append(f"df_workdir {shlex.quote(ins.args)}")
    return '\n'.join(lines) + '\n'


def pack_args(dockerfile: Path) -> list[str]:
    cfg = config(instructions(dockerfile))
    args = [f"--env={k}={v}" for k, v in cfg.env.items()]
    args += [f"--label={k}={v}" for k, v in cfg.labels.items()]
    args += [f"--expose={p}" for p in cfg.expose]
    args += [f"--workdir={cfg.workdir}"]
    if cfg.user:
        args.append(f"--user={cfg.user}")
    if cfg.entrypoint is not None:
        args.append(f"--entrypoint={json.dumps(cfg.entrypoint)}")
    if cfg.cmd is not None:
        args.append(f"--cmd={json.dumps(cfg.cmd)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().split('\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    p = sub.add_parser('script', help='print a stage as shell commands for build.sh')
    p.add_argument('dockerfile', type=Path)
    p.add_argument('stage', choices=STAGES)
    p = sub.add_parser('pack-args', help='print the image config as pack_image.py arguments')
    p.add_argument('dockerfile', type=Path)
    p = sub.add_parser('sources', help='print the context paths a stage copies')
    p.add_argument('dockerfile', type=Path)
    p.add_argument('stage', choices=STAGES)
    p = sub.add_parser('hash', help="digest of a stage's COPY sources after .dockerignore")
    p.add_argument('dockerfile', type=Path)
    p.add_argument('stage', choices=STAGES)
    p.add_argument('--context', type=Path, default=Path('.'))
    p = sub.add_parser('copy', help='perform one COPY into a rootfs')
    p.add_argument('--context', type=Path, required=True)
    p.add_argument('--rootfs', type=Path, required=True)
    p.add_argument('dest')
    p.add_argument('sources', nargs='+')
    a = parser.parse_args(argv)
    try:
        if a.command == 'script':
            sys.stdout.write(script(a.dockerfile, a.stage))
        elif a.command == 'pack-args':
            sys.stdout.write(''.join(f"{arg}\0" for arg in pack_args(a.dockerfile)))
        elif a.command == 'sources':
            sys.stdout.write(''.join(f"{s}\n" for s in stage_sources(a.dockerfile, a.stage)))
        elif a.command == 'hash':
            print(digest(a.context, stage_sources(a.dockerfile, a.stage)))
        elif a.command == 'copy':
            count = copy(a.context, a.rootfs, a.sources, a.dest)
            print(f">>   COPY {' '.join(a.sources)} {a.dest} ({count} entries)", file=sys.stderr)
    except (DockerfileError, OSError, json.JSONDecodeError) as e:
        print(f"dockerfile.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
