"""
The warm server process on its own (forkserver, with the client module as its client):
what it forks, what it refuses, and how it ends. Module servers here: they start
quickest, and a payload that is not AnsiballZ runs in a fresh python, which makes a
handy run.
"""
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from ansible_kopf.warm import entry, wire
from tests import runs

pytestmark = pytest.mark.processes


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[subprocess.Popen[bytes]]:
    """A module server, child of this process, ready."""
    process = subprocess.Popen(
        [*entry.server(sys.executable), '--flavour', 'module',
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
    """The module client, sending a Python program (run by a fresh python)."""
    program = path.with_name(f"program-{time.monotonic_ns()}.py")
    program.write_text(code)
    with program.open('rb') as stdin:
        return subprocess.Popen(
            [*entry.client(sys.executable), 'python', str(path), sys.executable],
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
    run.kill()  # what ansible-runner's cancellation does to the client (or a worker to it)
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
    script = (f"import os, pathlib, sys\n"
              f"from ansible_kopf.warm import pool as warm\n"
              f"pool = warm.Pool(pathlib.Path({str(tmp_path / 'warm')!r}))\n"
              f"pool.command(['ansible-playbook'], dict(os.environ))\n"
              f"print(*pool.pids, flush=True)\n"
              f"sys.stdin.read()\n")
    operator = subprocess.Popen([sys.executable, '-c', script], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                env={**os.environ, 'PYTHONPATH': entry.ROOT})
    assert operator.stdout is not None
    pids = [int(pid) for pid in operator.stdout.readline().split()]
    assert len(pids) == 2
    operator.send_signal(signal.SIGKILL)
    operator.wait()
    assert runs.eventually(lambda: all(runs.exited(pid) for pid in pids))


def test_a_run_that_ignores_sigterm_is_killed_when_the_operator_dies(tmp_path: pathlib.Path) -> None:
    # Seen after the fault test SIGKILLed operators: runs that outlived SIGTERM stayed on as
    # orphans of init. The server escalates to SIGKILL before it exits.
    marker = tmp_path / 'started'
    script = (f"import os, pathlib, subprocess, sys\n"
              f"from ansible_kopf.warm import entry\n"
              f"server = subprocess.Popen([*entry.server(sys.executable), '--flavour', 'module',\n"
              f"    '--socket', {str(tmp_path / 'module.sock')!r}], stdout=subprocess.PIPE,\n"
              f"    start_new_session=True)\n"
              f"server.stdout.readline()\n"
              f"print(server.pid, flush=True)\n"
              f"sys.stdin.read()\n")
    operator = subprocess.Popen([sys.executable, '-c', script], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                env={**os.environ, 'PYTHONPATH': entry.ROOT})
    assert operator.stdout is not None
    server_pid = int(operator.stdout.readline())
    run = client(tmp_path / 'module.sock',
                 "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + sleeper(marker))
    children: list[int] = []
    try:
        assert runs.eventually(marker.exists)
        children = runs.children(server_pid)
        assert len(children) == 1
        operator.send_signal(signal.SIGKILL)
        operator.wait()
        assert runs.eventually(lambda: runs.exited(server_pid))
        assert runs.exited(children[0])
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.kill()
        run.wait()
