"""
What a warm server preloads, and which module payloads may run on those imports: the
check of a payload against the preloaded files, where collections are found, and what a
server of each flavour has imported once it is ready (in a python of its own).
"""
import base64
import importlib
import io
import json
import os
import pathlib
import subprocess
import sys
import zipfile
import zlib

import pytest

from ansible_kopf.warm import entry, preloads

# --- which payloads run in the server's child ---

def payload(fqn: str, files: dict[str, bytes]) -> str:
    data = io.BytesIO()
    with zipfile.ZipFile(data, 'w') as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    encoded = base64.b64encode(data.getvalue()).decode()
    # the shape of ansible-core's AnsiballZ wrapper (executor/module_common.py)
    return (f"if __name__ == '__main__':\n    _ansiballz_main(\n"
            f"module_fqn='{fqn}',\nzip_data='{encoded}',\n)\n")


CRCS = {'ansible/module_utils/basic.py': zlib.crc32(b'basic'),
        'ansible/__init__.py': zlib.crc32(b'installed')}


@pytest.mark.parametrize(('fqn', 'files', 'reason'), [
    ('ansible.modules.ping', {'ansible/module_utils/basic.py': b'basic'}, None),
    ('ansible_collections.kubernetes.core.plugins.modules.k8s', {}, None),
    # generated stubs and files the server never loaded are not compared
    ('ansible.modules.ping', {'ansible/__init__.py': b'stub', 'ansible/other.py': b'x'}, None),
    ('ansible.modules.ping', {'ansible/module_utils/basic.py': b'changed'}, 'differs'),
    ('ansible_collections.community.general.plugins.modules.x', {}, 'not from a preloaded'),
])
def test_only_payloads_that_match_the_preloaded_code_run_in_the_child(
        fqn: str, files: dict[str, bytes], reason: str | None) -> None:
    found = preloads.module_mismatch(payload(fqn, files), CRCS)
    assert found is None if reason is None else reason in (found or '')


def test_anything_else_runs_in_a_fresh_python() -> None:
    assert preloads.module_mismatch("print('hello')", CRCS) == 'not an AnsiballZ payload'
    broken = "module_fqn='ansible.modules.ping',\nzip_data='AAAA',\n"
    assert 'cannot be read' in (preloads.module_mismatch(broken, CRCS) or '')


def test_collection_roots_are_the_collection_paths_that_hold_collections(tmp_path: pathlib.Path) -> None:
    with_collections = tmp_path / 'with'
    (with_collections / 'ansible_collections').mkdir(parents=True)
    without = tmp_path / 'without'
    without.mkdir()
    value = os.pathsep.join([str(with_collections), str(without), str(tmp_path / 'absent'), ''])
    assert preloads.collection_roots({'ANSIBLE_COLLECTIONS_PATH': value}) == [str(with_collections)]
    assert preloads.collection_roots({'ANSIBLE_COLLECTIONS_PATHS': str(with_collections)}) == [str(with_collections)]
    assert preloads.collection_roots({}) == []


@pytest.mark.processes
def test_the_module_server_preloads_a_collection_found_only_on_the_collections_path(
        tmp_path: pathlib.Path) -> None:
    """As in the operator image: kubernetes.core under ANSIBLE_COLLECTIONS_PATH, not on sys.path."""
    collections = tmp_path / 'collections'
    package = collections / 'ansible_collections' / 'kubernetes' / 'core' / 'plugins' / 'module_utils'
    package.mkdir(parents=True)
    (package / 'args_common.py').write_text('MARK = 1\n')
    name = 'ansible_collections.kubernetes.core.plugins.module_utils.args_common'
    code = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]; "
            "from ansible_kopf.warm import forkserver as f; "
            f"f.ForkServer({str(tmp_path / 'm.sock')!r}, 'module').warm_up(); "
            f"print(sys.modules[{name!r}].__file__)")
    env = {**os.environ, 'ANSIBLE_COLLECTIONS_PATH': str(collections),
           'PYTHONPATH': entry.ROOT}
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(package / 'args_common.py')


@pytest.mark.processes
def test_the_playbook_server_loads_plugins_as_a_run_would_but_not_ansible_runners_callback(
        tmp_path: pathlib.Path) -> None:
    """
    What a run loads through ansible's plugin loader is loaded once by the server (so
    runs and task workers find it in sys.modules); ansible-runner's awx_display is not:
    it reads the run's AWX_ISOLATED_DATA_DIR when it is imported.
    """
    ansible_runner = importlib.import_module('ansible_runner')
    callbacks = pathlib.Path(ansible_runner.__file__).parent / 'display_callback' / 'callback'
    code = ("import json, sys; from ansible_kopf.warm import forkserver as f; "
            f"missing = f.ForkServer({str(tmp_path / 'p.sock')!r}, 'playbook').warm_up(); "
            "print(json.dumps({'missing': missing, 'modules': sorted(sys.modules)}))")
    env = {**os.environ, 'ANSIBLE_CALLBACK_PLUGINS': str(callbacks),
           'ANSIBLE_STDOUT_CALLBACK': 'awx_display',
           'PYTHONPATH': entry.ROOT}
    env.pop('AWX_ISOLATED_DATA_DIR', None)
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                          check=False, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report['missing'] == []
    modules = set(report['modules'])
    assert 'ansible_collections.kubernetes.core.plugins.lookup.k8s' in modules
    assert 'ansible_collections.kubernetes.core.plugins.module_utils.k8s.client' in modules
    assert any(m.endswith('.junit') for m in modules)  # a builtin callback
    assert not [m for m in modules if 'awx_display' in m]


@pytest.mark.processes
def test_the_module_server_reports_nothing_missing_on_the_installed_ansible_core(
        tmp_path: pathlib.Path) -> None:
    """A preload of the other ansible-core line (absent here) is no failure to report: the
    operator logs 'some preloads failed' only for what it should have found."""
    code = ("import json; from ansible_kopf.warm import forkserver as f; "
            f"print(json.dumps(f.ForkServer({str(tmp_path / 'm.sock')!r}, 'module').warm_up()))")
    done = subprocess.run([sys.executable, '-c', code], env={**os.environ, 'PYTHONPATH': entry.ROOT},
                          capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_versioned_preload_that_is_absent_is_not_missing_but_another_absent_one_is() -> None:
    absent = 'ansible_kopf_no_such_module'
    assert preloads.preload((*preloads.VERSIONED, absent)) == [absent]
