"""
What a warm server (:mod:`zygote`) imports before its first fork, and whether a module
payload may run on those imports: the preload lists of both roles, where the image's
collections are, the CRC-32 of every preloaded source file, and the check that a
payload ships only files identical to them. Standard library only (it is imported by
``zygote.py`` run as a script).
"""
import importlib
import os
import re
import sys
import zipfile
import zlib
from typing import Final

PLAYBOOK_PRELOAD: Final = (
    'ansible.cli.playbook',
    'ansible.executor.playbook_executor', 'ansible.plugins.strategy.linear',
    'ansible.plugins.action.normal', 'ansible.plugins.connection.local',
    'ansible.plugins.shell.sh', 'ansible.plugins.lookup.template', 'ansible.template',
    'kubernetes.client', 'kubernetes.config', 'kubernetes.dynamic', 'jsonpatch', 'yaml',
)
MODULE_PRELOAD: Final = (
    'ansible.module_utils.basic',
    'ansible.module_utils._internal._ansiballz._loader',
    'kubernetes.client', 'kubernetes.config', 'kubernetes.dynamic', 'jsonpatch', 'yaml',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.core',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.client',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.service',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.runner',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.resource',
    'ansible_collections.kubernetes.core.plugins.module_utils.args_common',
)
# Module packages whose payloads may run in a child (their module_utils are preloaded).
MODULE_PREFIXES: Final = ('ansible.modules.', 'ansible_collections.kubernetes.core.')
# Files every payload ships as generated stubs, never compared with the installed ones.
STUBS: Final = frozenset({'ansible/__init__.py', 'ansible/module_utils/__init__.py'})
_FQN: Final = re.compile(r"^module_fqn='([A-Za-z0-9_.]+)',$", re.MULTILINE)
_ZIP: Final = re.compile(r"^zip_data='([A-Za-z0-9+/=]*)',$", re.MULTILINE)


def preload(names: tuple[str, ...]) -> list[str]:
    """Import what can be imported; return what could not (the server still works)."""
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # an optional collection or library may be absent
            missing.append(name)
    return missing


def collection_roots(env: dict[str, str]) -> list[str]:
    """
    The directories of ``ANSIBLE_COLLECTIONS_PATH`` (or the older ``..._PATHS``) that hold
    an ``ansible_collections`` package: where the operator image installs kubernetes.core,
    outside Python's path. The module server appends them to ``sys.path`` so that it can
    preload the collection's module_utils; a payload only uses them if byte-identical.
    """
    raw = env.get('ANSIBLE_COLLECTIONS_PATH') or env.get('ANSIBLE_COLLECTIONS_PATHS') or ''
    return [os.path.abspath(path) for path in raw.split(os.pathsep)
            if path and os.path.isdir(os.path.join(path, 'ansible_collections'))]


def preloaded_sources() -> dict[str, int]:
    """
    Zip-style path -> CRC-32 of every preloaded ansible/ansible_collections source file.
    Paths come from the files, not the names: a module may stand in for another in
    ``sys.modules`` (``ansible.module_utils.distro`` is the vendored ``_distro``).
    """
    roots = sorted((os.path.join(os.path.abspath(p), '') for p in sys.path if p),
                   key=len, reverse=True)
    crcs = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, '__file__', None)
        if not path or not name.startswith(('ansible.', 'ansible_collections.')) \
                or not path.endswith('.py'):
            continue
        root = next((r for r in roots if path.startswith(r)), None)
        if root is None:
            continue
        with open(path, 'rb') as file:
            crcs[path[len(root):]] = zlib.crc32(file.read())
    return crcs


def module_mismatch(payload: str, crcs: dict[str, int]) -> str | None:
    """Why this payload must run in a fresh interpreter, or ``None`` if it need not."""
    fqn, data = _FQN.search(payload), _ZIP.search(payload)
    if fqn is None or data is None:
        return 'not an AnsiballZ payload'
    if not fqn.group(1).startswith(MODULE_PREFIXES):
        return f"module {fqn.group(1)} is not from a preloaded package"
    import base64  # noqa: PLC0415
    import binascii  # noqa: PLC0415
    import io  # noqa: PLC0415
    try:
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(data.group(1))))
    except (binascii.Error, zipfile.BadZipFile) as e:
        return f"its zip_data cannot be read ({e})"
    with archive:
        for info in archive.infolist():
            crc = crcs.get(info.filename)
            if crc is None or info.filename in STUBS or (
                    info.file_size == 0 and info.filename.endswith('__init__.py')):
                continue
            if crc != info.CRC:
                return f"{info.filename} differs from the preloaded one"
    return None
