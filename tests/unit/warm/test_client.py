"""
The per-run client on its own: what it imports (it runs once per run and once per module
call), and that a server which never answers does not hold a run.
"""
import pathlib
import socket
import subprocess
import sys

import pytest

from ansible_kopf.warm import entry

pytestmark = pytest.mark.processes


def test_the_client_imports_no_heavy_modules() -> None:
    """C modules, os and wire only, as started by the pool (entry.client)."""
    command = entry.command(sys.executable, 'client', "print(' '.join(sorted(sys.modules)))",
                            isolated=True)
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    modules = set(done.stdout.split())
    assert 'ansible_kopf.warm.wire' in modules
    assert not modules & {'json', 'socket', 'signal', 'subprocess', 'typing', 'contextlib',
                          'enum', 're', 'collections'}, modules


@pytest.mark.parametrize('mode', ['playbook', 'python'])
def test_a_server_that_accepts_but_never_answers_does_not_hold_the_run(
        tmp_path: pathlib.Path, mode: str) -> None:
    """The client waits STARTED_TIMEOUT for the forked run's pid, then runs the program itself."""
    path = tmp_path / 'hung.sock'
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(str(path))
    hung.listen(1)  # connections queue up; nothing is ever read or answered
    marker = tmp_path / 'ran-here'
    program = f"open({str(marker)!r}, 'w').write('ok')\n"
    stdin = tmp_path / 'stdin'
    stdin.write_text(program if mode == 'python' else '')
    if mode == 'playbook':
        argv = f"['playbook', {str(path)!r}, '--', {sys.executable!r}, '-c', {program!r}]"
    else:
        argv = f"['python', {str(path)!r}, {sys.executable!r}]"
    command = entry.command(sys.executable, 'client',
                            f"entry.STARTED_TIMEOUT = 0.5; entry.main({argv})", isolated=True)
    # Files, not pipes: the descriptors the client sent stay queued in the hung socket,
    # so a pipe would never reach end-of-file while it exists.
    with stdin.open('rb') as given, (tmp_path / 'output').open('wb') as output:
        try:
            done = subprocess.run(
                command, stdin=given, stdout=output, stderr=output, timeout=60, check=False)
        finally:
            hung.close()
    assert done.returncode == 0, (tmp_path / 'output').read_text()
    assert marker.read_text() == 'ok'
