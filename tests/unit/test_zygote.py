"""
The warm server process on its own (zygote.py, with launch.py as its client): what it
forks, what it refuses, and how it ends. Module-role servers here: they start quickest,
and a payload that is not AnsiballZ runs in a fresh python, which makes a handy run.
"""
import base64
import contextlib
import importlib
import io
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Iterator

import pytest

from ansible_kopf import preloads, warm, wire, zygote
from tests import runs


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[subprocess.Popen[bytes]]:
    """A module server, child of this process, ready."""
    process = subprocess.Popen(
        [sys.executable, str(warm.ZYGOTE), '--role', 'module',
         '--socket', str(tmp_path / 'module.sock')],
        stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith(b'ready')
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


def client(path: pathlib.Path, code: str) -> subprocess.Popen[bytes]:
    """launch.py's module client, sending a Python program (run by a fresh python)."""
    program = path.with_name(f"program-{time.monotonic_ns()}.py")
    program.write_text(code)
    with program.open('rb') as stdin:
        return subprocess.Popen(
            [sys.executable, '-IS', str(warm.LAUNCH), 'python', str(path), sys.executable],
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def sleeper(marker: pathlib.Path) -> str:
    return f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(120)\n"


def test_a_payload_runs_in_a_child_and_reports_its_status(
        tmp_path: pathlib.Path, server: subprocess.Popen[bytes]) -> None:
    run = client(tmp_path / 'module.sock',
                 "import os, sys\nprint('parent', os.getppid())\nsys.exit(3)\n")
    stdout, _ = run.communicate(timeout=60)
    assert run.returncode == 3
    assert stdout.decode().split() == ['parent', str(server.pid)]


def test_a_request_without_its_descriptors_is_refused(
        tmp_path: pathlib.Path, server: subprocess.Popen[bytes]) -> None:
    # Without the client's stdout/stderr the child would write into the server's log.
    read, write = os.pipe()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(tmp_path / 'module.sock'))
        wire.send(sock, {'payload': 'print(1)', 'env': {}, 'cwd': '/'}, [write])
        os.close(write)
        assert wire.receive(sock) == (None, [])  # no pid: nothing was forked
    assert os.read(read, 1) == b''  # and the server kept no copy of the descriptor
    os.close(read)
    assert runs.children(server.pid) == []


@pytest.mark.parametrize('request_', [
    {'env': {}, 'cwd': '/'},                      # no payload
    {'payload': 'print(1)', 'env': 'x', 'cwd': '/'},
    {'payload': 'print(1)', 'env': {}},           # no cwd
])
def test_a_malformed_request_is_refused(
        tmp_path: pathlib.Path, server: subprocess.Popen[bytes], request_: dict[str, object]) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(tmp_path / 'module.sock'))
        wire.send(sock, request_, [1, 2])
        assert wire.receive(sock) == (None, [])
    assert server.poll() is None  # and the server goes on


def test_a_client_that_goes_away_stops_its_run(
        tmp_path: pathlib.Path, server: subprocess.Popen[bytes]) -> None:
    marker = tmp_path / 'started'
    run = client(tmp_path / 'module.sock', sleeper(marker))
    assert runs.eventually(marker.exists)
    (child,) = runs.children(server.pid)
    run.kill()  # what ansible-runner's cancellation does to launch.py (or a worker to it)
    run.wait()
    assert runs.eventually(lambda: runs.exited(child))
    assert server.poll() is None


def test_sigterm_lets_the_runs_under_way_finish(
        tmp_path: pathlib.Path, server: subprocess.Popen[bytes]) -> None:
    marker, done = tmp_path / 'started', tmp_path / 'done'
    run = client(tmp_path / 'module.sock',
                 f"import os, time\nopen({str(marker)!r}, 'w').close()\n"
                 f"while not os.path.exists({str(done)!r}):\n    time.sleep(0.05)\n")
    assert runs.eventually(marker.exists)
    server.terminate()
    assert runs.eventually(lambda: not (tmp_path / 'module.sock').exists())  # no new runs ...
    assert server.poll() is None  # ... but the one under way goes on
    done.touch()
    assert run.wait(60) == 0
    assert server.wait(60) == 0


def test_an_idle_server_stops_at_once_on_sigterm(
        tmp_path: pathlib.Path, server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    assert server.wait(60) == 0
    assert not (tmp_path / 'module.sock').exists()


def test_a_run_dies_with_its_server(tmp_path: pathlib.Path, server: subprocess.Popen[bytes]) -> None:
    # However a server dies (SIGKILL here, the OOM killer in a pod), its children get
    # SIGTERM (PR_SET_PDEATHSIG): no run goes on while its client reports it lost.
    marker = tmp_path / 'started'
    run = client(tmp_path / 'module.sock', sleeper(marker))
    assert runs.eventually(marker.exists)
    (child,) = runs.children(server.pid)
    server.kill()
    server.wait()
    assert runs.eventually(lambda: runs.exited(child))
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 1
    assert b'went away' in stderr


def test_a_server_exits_when_the_operator_dies(tmp_path: pathlib.Path) -> None:
    # The "operator" is a python that starts a pool's servers and is then SIGKILLed.
    script = (f"import os, pathlib, sys\nsys.path.insert(0, {str(warm.HERE.parent)!r})\n"
              f"from ansible_kopf import warm\n"
              f"pool = warm.Pool(pathlib.Path({str(tmp_path / 'warm')!r}))\n"
              f"pool.command(['ansible-playbook'], dict(os.environ))\n"
              f"print(*pool.pids, flush=True)\n"
              f"sys.stdin.read()\n")
    operator = subprocess.Popen([sys.executable, '-c', script], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
    assert operator.stdout is not None
    pids = [int(pid) for pid in operator.stdout.readline().split()]
    assert len(pids) == 2
    operator.send_signal(signal.SIGKILL)
    operator.wait()
    assert runs.eventually(lambda: all(runs.exited(pid) for pid in pids))


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


def test_the_module_server_preloads_a_collection_found_only_on_the_collections_path(
        tmp_path: pathlib.Path) -> None:
    """As in the operator image: kubernetes.core under ANSIBLE_COLLECTIONS_PATH, not on sys.path."""
    collections = tmp_path / 'collections'
    package = collections / 'ansible_collections' / 'kubernetes' / 'core' / 'plugins' / 'module_utils'
    package.mkdir(parents=True)
    (package / 'args_common.py').write_text('MARK = 1\n')
    name = 'ansible_collections.kubernetes.core.plugins.module_utils.args_common'
    code = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]; "
            "from ansible_kopf import zygote; "
            f"zygote.Server({str(tmp_path / 'm.sock')!r}, 'module').warm_up(); "
            f"print(sys.modules[{name!r}].__file__)")
    env = {**os.environ, 'ANSIBLE_COLLECTIONS_PATH': str(collections),
           'PYTHONPATH': str(pathlib.Path(zygote.__file__).parents[1])}
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(package / 'args_common.py')


def test_the_playbook_server_loads_plugins_as_a_run_would_but_not_ansible_runners_callback(
        tmp_path: pathlib.Path) -> None:
    """
    What a run loads through ansible's plugin loader is loaded once by the server (so
    runs and task workers find it in sys.modules); ansible-runner's awx_display is not:
    it reads the run's AWX_ISOLATED_DATA_DIR when it is imported.
    """
    ansible_runner = importlib.import_module('ansible_runner')
    callbacks = pathlib.Path(ansible_runner.__file__).parent / 'display_callback' / 'callback'
    code = ("import json, sys; from ansible_kopf import zygote; "
            f"missing = zygote.Server({str(tmp_path / 'p.sock')!r}, 'playbook').warm_up(); "
            "print(json.dumps({'missing': missing, 'modules': sorted(sys.modules)}))")
    env = {**os.environ, 'ANSIBLE_CALLBACK_PLUGINS': str(callbacks),
           'ANSIBLE_STDOUT_CALLBACK': 'awx_display',
           'PYTHONPATH': str(pathlib.Path(zygote.__file__).parents[1])}
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


def test_the_launch_client_imports_no_heavy_modules(tmp_path: pathlib.Path) -> None:
    """launch.py runs once per run and once per module call: C modules, os and wire only."""
    code = (f"import sys; sys.argv = ['launch.py']; sys.path.insert(0, {str(warm.HERE.parent)!r}); "
            "from ansible_kopf import launch; print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, '-IS', '-c', code], capture_output=True, text=True,
                          check=True, timeout=60)
    modules = set(done.stdout.split())
    assert 'ansible_kopf.wire' in modules
    assert not modules & {'json', 'socket', 'signal', 'subprocess', 'typing', 'contextlib',
                          'enum', 're', 'collections'}, modules


@pytest.mark.parametrize('role', ['playbook', 'python'])
def test_a_server_that_accepts_but_never_answers_does_not_hold_the_run(
        tmp_path: pathlib.Path, role: str) -> None:
    """launch.py waits STARTED_TIMEOUT for the forked run's pid, then runs the program itself."""
    path = tmp_path / 'hung.sock'
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(str(path))
    hung.listen(1)  # connections queue up; nothing is ever read or answered
    marker = tmp_path / 'ran-here'
    program = f"open({str(marker)!r}, 'w').write('ok')\n"
    stdin = tmp_path / 'stdin'
    stdin.write_text(program if role == 'python' else '')
    if role == 'playbook':
        argv = f"['playbook', {str(path)!r}, '--', {sys.executable!r}, '-c', {program!r}]"
    else:
        argv = f"['python', {str(path)!r}, {sys.executable!r}]"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from ansible_kopf import launch; "
            f"launch.STARTED_TIMEOUT = 0.5; launch.main({argv})")
    # Files, not pipes: the descriptors launch.py sent stay queued in the hung socket,
    # so a pipe would never reach end-of-file while it exists.
    with stdin.open('rb') as given, (tmp_path / 'output').open('wb') as output:
        try:
            done = subprocess.run(
                [sys.executable, '-IS', '-c', code, str(pathlib.Path(warm.LAUNCH).parents[1])],
                stdin=given, stdout=output, stderr=output, timeout=60, check=False)
        finally:
            hung.close()
    assert done.returncode == 0, (tmp_path / 'output').read_text()
    assert marker.read_text() == 'ok'
