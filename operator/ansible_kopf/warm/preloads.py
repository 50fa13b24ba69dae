"""
What a warm server (:mod:`forkserver`) imports before its first fork, and whether a module
payload may run on those imports: the preload lists of both roles, the plugins a
playbook server loads through ansible's own plugin loader, where the image's
collections are, the CRC-32 of every preloaded source file, and the check that a
payload ships only files identical to them. Standard library only at import.
"""
import importlib
import os
import re
import sys
import zipfile
import zlib
from collections.abc import Callable
from typing import Final

PLAYBOOK_PRELOAD: Final = (
    'ansible.cli.playbook',
    'ansible.executor.playbook_executor', 'ansible.plugins.strategy.linear',
    'ansible.plugins.action.normal', 'ansible.plugins.connection.local',
    'ansible.plugins.shell.sh', 'ansible.plugins.lookup.template', 'ansible.template',
    'kubernetes.client', 'kubernetes.config', 'kubernetes.dynamic', 'jsonpatch', 'yaml',
)
# Loaded by a playbook server through ansible's plugin loader, as a run would load them:
# a run then finds the plugin modules in sys.modules and their configuration definitions
# (the YAML of their documentation) already read; each task's worker too (the lookup
# plugin and its module_utils are otherwise imported again by every task that uses it).
# Callback plugins are loaded by name from ansible's own directory only: ansible-runner's
# awx_display reads the run's AWX_ISOLATED_DATA_DIR when it is imported.
PLAYBOOK_PLUGINS: Final = (
    ('lookup', 'kubernetes.core.k8s'),
    ('action', 'kubernetes.core.k8s'), ('action', 'kubernetes.core.k8s_info'),
    ('action', 'ansible.builtin.set_fact'), ('action', 'ansible.builtin.set_stats'),
    ('action', 'ansible.builtin.assert'),
    ('action', 'ansible.builtin.fail'), ('action', 'ansible.builtin.debug'),
    ('strategy', 'ansible.builtin.linear'), ('cache', 'ansible.builtin.memory'),
)
PLAYBOOK_COLLECTION_PRELOAD: Final = (  # module_utils the lookup imports when it runs
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.client',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.core',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.resource',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8sdynamicclient',
    'ansible_collections.kubernetes.core.plugins.module_utils.apply',
    'ansible_collections.kubernetes.core.plugins.module_utils.client.discovery',
    'ansible_collections.kubernetes.core.plugins.module_utils.client.resource',
    'ansible_collections.kubernetes.core.plugins.module_utils.args_common',
)
MODULE_PRELOAD: Final = (
    'ansible.module_utils.basic',
    'ansible.module_utils._internal._ansiballz._loader',  # 2.19 only: VERSIONED
    'kubernetes.client', 'kubernetes.config', 'kubernetes.dynamic', 'jsonpatch', 'yaml',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.core',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.client',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.service',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.runner',
    'ansible_collections.kubernetes.core.plugins.module_utils.k8s.resource',
    'ansible_collections.kubernetes.core.plugins.module_utils.args_common',
)
# Module packages whose payloads may run in a child (their module_utils are preloaded;
# operator_sdk.util's modules use kubernetes.core's and ansible's only).
MODULE_PREFIXES: Final = ('ansible.modules.', 'ansible_collections.kubernetes.core.',
                          'ansible_collections.operator_sdk.util.')
# Files every payload ships as generated stubs, never compared with the installed ones.
STUBS: Final = frozenset({'ansible/__init__.py', 'ansible/module_utils/__init__.py'})
# The module's name and its zip in a payload: ansible-core 2.18's template
# (``ZIPDATA = '...'`` and ``runpy.run_module(mod_name='...'``) or 2.19's (keyword lines).
_FQN: Final = re.compile(
    r"^(?:module_fqn='([A-Za-z0-9_.]+)',|\s+runpy\.run_module\(mod_name='([A-Za-z0-9_.]+)',.*)$",
    re.MULTILINE)
_ZIP: Final = re.compile(r"^(?:zip_data='([A-Za-z0-9+/=]*)',|\s+ZIPDATA = '([A-Za-z0-9+/=]*)')$",
                         re.MULTILINE)


# Preloads of one ansible-core line only: absent on the other, not reported as missing.
VERSIONED: Final = frozenset({'ansible.module_utils._internal._ansiballz._loader'})


def preload(names: tuple[str, ...]) -> list[str]:
    """Import what can be imported; return what could not (the server still works),
    except the :data:`VERSIONED` modules the installed ansible-core does not have."""
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            if name not in VERSIONED:
                missing.append(name)
        except Exception:  # an optional collection or library may be broken
            missing.append(name)
    return missing


def load_playbook_plugins() -> list[str]:
    """
    In a playbook server, after :data:`PLAYBOOK_PRELOAD`: do what ``ansible-playbook``
    does first, once: configure the collection loader (``CLI.run``), read the
    connection, shell and become plugins (``PlaybookExecutor.run``), the enabled inventory
    and vars plugins, every filter and test, the builtin callbacks and
    :data:`PLAYBOOK_PLUGINS`. The environment and configuration are those of every run
    the server serves. Return what could not be loaded.
    """
    import warnings  # noqa: PLC0415
    constants = importlib.import_module('ansible.constants')
    loader = importlib.import_module('ansible.plugins.loader')
    display = importlib.import_module('ansible.utils.display').Display()
    loader.init_plugin_loader([])
    # A run's CLI.run configures it again; the finder it would build is this one.
    warnings.filterwarnings('ignore', message='AnsibleCollectionFinder has already been configured')
    missing = preload(PLAYBOOK_COLLECTION_PRELOAD)
    steps: list[tuple[str, Callable[[], object]]] = [
        *((f"{each.subdir}/*", lambda each=each: list(each.all(class_only=True)))
          for each in (loader.connection_loader, loader.shell_loader, loader.become_loader)),
        # as ansible primes them: the enabled ones as instances, or a run, finding the paths
        # already listed, would run no vars plugin at all (no group_vars, no host_vars)
        ('vars_plugins/*', _prime_vars_plugins),
        ('filter_plugins/*', lambda: list(loader.filter_loader.all())),
        ('test_plugins/*', lambda: list(loader.test_loader.all())),
        *((f"inventory {name}", lambda name=name: loader.inventory_loader.get(name))
          for name in constants.INVENTORY_ENABLED),
        *((f"callback {name}", lambda name=name: loader.callback_loader.get(
            name, class_only=True)) for name in _builtin_callbacks()),
        *((f"{kind} {name}", lambda kind=kind, name=name: getattr(
            loader, f"{kind}_loader").get(name, class_only=True))
          for kind, name in PLAYBOOK_PLUGINS),
        ('templating', _render_a_template),
    ]
    for label, step in steps:
        try:
            if step() is None:
                missing.append(label)
        except Exception:  # an absent collection or plugin: that run loads it (or fails) itself
            missing.append(label)
    for name in ('_warns', '_deprecations', '_errors'):  # warn the runs, not only the server
        seen = getattr(display, name, None)
        if isinstance(seen, (dict, set)):
            seen.clear()
    return missing


def _prime_vars_plugins() -> object:
    plugins = importlib.import_module('ansible.vars.plugins')
    plugins._prime_vars_loader()  # what get_vars_from_path calls when unprimed
    return True


def _render_a_template() -> object:
    """
    Render a template once: what every process's first template builds lazily (the Jinja
    lexer and its regular expressions, ansible's environment) is then inherited, ~9 ms
    less in each run and each task's worker.
    """
    template = importlib.import_module('ansible.template')
    dataloader = importlib.import_module('ansible.parsing.dataloader')
    templar = template.Templar(loader=dataloader.DataLoader(), variables={'x': {'y': 1}})
    trusted = getattr(template, 'trust_as_template', str)  # 2.19; 2.18 trusts any str
    return templar.template(trusted(
        '{{ x.y | int }}{% if x %}{{ x | to_json | from_json | default(omit) }}{% endif %}'))


def _builtin_callbacks() -> list[str]:
    package = importlib.import_module('ansible.plugins.callback')
    directory = os.path.dirname(package.__file__ or '')
    return sorted(name[:-3] for name in os.listdir(directory)
                  if name.endswith('.py') and not name.startswith('_'))


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
    fqn_match, data_match = _FQN.search(payload), _ZIP.search(payload)
    if fqn_match is None or data_match is None:
        return 'not an AnsiballZ payload'
    fqn = fqn_match.group(1) or fqn_match.group(2)
    if not fqn.startswith(MODULE_PREFIXES):
        return f"module {fqn} is not from a preloaded package"
    import base64  # noqa: PLC0415
    import binascii  # noqa: PLC0415
    import io  # noqa: PLC0415
    try:
        zipped = base64.b64decode(data_match.group(1) or data_match.group(2))
        archive = zipfile.ZipFile(io.BytesIO(zipped))
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
