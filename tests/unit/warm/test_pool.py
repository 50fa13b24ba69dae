"""
The warm path (pool.Pool, its servers and their client) against real
ansible-runner runs on localhost: runs really fork from the servers, give what cold runs
give, and every way a server can fail ends in a correct (cold) run. The runner tests in
test_runner.py also run through a pool (the ``settings`` fixture).
"""
import dataclasses
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ansible_kopf.run import launchers, runner, runner_events
from ansible_kopf.warm import entry
from ansible_kopf.warm import pool as pool_module
from ansible_kopf.warm.pool import Pool
from tests import runs
from tests.runs import PASSWORD, ancestry, files_under, make_job, playbook, role

pytestmark = [pytest.mark.ansible, pytest.mark.processes]
SERVER = 'ansible_kopf.warm.forkserver'  # on a server's command line


def warm_settings(tree: pathlib.Path, pool: Pool) -> runner.RunSettings:
    return runner.RunSettings(workdir=tree / 'work', launcher=launchers.Warm(pool))


def whoami(tree: pathlib.Path, settings: runner.RunSettings, label: str) -> runner_events.Outcome:
    outcome = runner.run(make_job(tree, playbook(tree, 'whoami'), label=label), settings)
    assert outcome.successful, outcome.message
    return outcome


def forked_by(chain: list[dict[str, Any]], server: int) -> dict[str, Any] | None:
    """The process in the chain that the server forked, if any."""
    return next((p for p in chain if p['ppid'] == server), None)


def assert_forked(chain: list[dict[str, Any]], server: int) -> None:
    """A fork of the server that did not exec: the imported interpreter did the work."""
    child = forked_by(chain, server)
    assert child is not None, chain
    assert SERVER in child['cmdline'], child


def assert_cold(tree: pathlib.Path, label: str, pool: Pool) -> None:
    controller = ancestry(tree, 'controller', label)
    started = next(p for p in controller if p['ppid'] == os.getpid())  # ansible-runner's child
    assert 'ansible-playbook' in started['cmdline'], controller
    module = ancestry(tree, 'module', label)
    assert SERVER not in module[0]['cmdline'], module
    assert not {p['pid'] for p in controller + module} & set(pool.pids)


# --- the runs go through the servers ---

def test_runs_fork_from_the_servers(tree: pathlib.Path, pool: Pool) -> None:
    whoami(tree, warm_settings(tree, pool), 'warm')
    found = runs.servers(pool)
    assert len(found['playbook']) == 1
    assert len(found['module']) == 1
    # ansible-playbook is a fork of the playbook server (not an exec in that fork) ...
    assert_forked(ancestry(tree, 'controller', 'warm'), found['playbook'][0])
    # ... and the pipelined module a fork of the module server, which the command's
    # own process (the ancestry script) has as its parent
    module = ancestry(tree, 'module', 'warm')
    assert module[0]['ppid'] == found['module'][0]
    assert_forked(module, found['module'][0])

    # The next run reuses both servers.
    whoami(tree, warm_settings(tree, pool), 'again')
    assert runs.servers(pool) == found
    assert_forked(ancestry(tree, 'controller', 'again'), found['playbook'][0])


def test_concurrent_first_runs_share_the_servers(tree: pathlib.Path, pool: Pool) -> None:
    # The operator runs several objects at once from threads: the first runs all wait
    # for the same two servers, and all fork from them.
    labels = ['a', 'b', 'c']  # and objects: never two runs for one object at once
    threads = [threading.Thread(target=runner.run, args=(
        make_job(tree, playbook(tree, 'whoami'), label=label, name=label),
        warm_settings(tree, pool))) for label in labels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = runs.servers(pool)
    assert len(found['playbook']) == len(found['module']) == 1
    for label in labels:
        assert_forked(ancestry(tree, 'controller', label), found['playbook'][0])
        assert_forked(ancestry(tree, 'module', label), found['module'][0])


def test_a_cold_run_does_not_touch_the_pool(tree: pathlib.Path, pool: Pool) -> None:
    whoami(tree, runner.RunSettings(workdir=tree / 'work'), 'cold')
    assert pool.pids == []
    assert_cold(tree, 'cold', pool)


def job_events(job: runner.Job, ident: str) -> list[tuple[Any, ...]]:
    """What happened, from the artifacts: event, task, result flags, in order."""
    directory = job.private_data_dir / 'artifacts' / ident / 'job_events'
    found = []
    for path in directory.iterdir():
        event = json.loads(path.read_text())
        data = event.get('event_data', {})
        result = data.get('res') if isinstance(data.get('res'), dict) else {}
        found.append((event['counter'], event['event'], data.get('task'),
                       result.get('changed'), result.get('failed'), result.get('msg')))
    return [e[1:] for e in sorted(found)]


def artifact_files(job: runner.Job, ident: str) -> list[str]:
    root = job.private_data_dir / 'artifacts' / ident
    return sorted(str(p.relative_to(root)) for p in files_under(root)
                  if p.parent.name != 'job_events')


def comparable(outcome: runner_events.Outcome) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(outcome).items() if k not in ('ident', 'duration')}


@pytest.mark.parametrize(('kind', 'name'), [
    ('role', 'demo'),          # ok and changed, no_log, set_stats
    ('role', 'failing'),       # a task fails
    ('playbook', 'quick'),     # nothing changes
    ('playbook', 'modules'),   # several modules, a failure ignored, changed then ok
])
def test_warm_and_cold_runs_agree(tree: pathlib.Path, pool: Pool, kind: str,
                                  name: str) -> None:
    results = {}
    for label, settings in (('cold', runner.RunSettings(workdir=tree / 'cold')),
                            ('warm', runner.RunSettings(workdir=tree / 'warm', launcher=launchers.Warm(pool)))):
        out = tree / 'out' / label  # each run starts from no files
        out.mkdir()
        variables = {'out_dir': str(out)}
        watch = role(tree, name, vars=variables) if kind == 'role' \
            else playbook(tree, name, vars=variables)
        job = make_job(tree, watch, workdir=settings.workdir, label=label)
        outcome = runner.run(job, settings)
        artifacts = job.private_data_dir / 'artifacts' / outcome.ident
        results[label] = {
            'outcome': comparable(outcome),
            'events': job_events(job, outcome.ident),
            'files': artifact_files(job, outcome.ident),
            'rc': (artifacts / 'rc').read_text(),
            'status': (artifacts / 'status').read_text(),
            'stdout': re.sub(r'"(start|end|delta)": "[^"]*"', r'"\1": ...',
                             (artifacts / 'stdout').read_text()),
        }
    assert pool.pids  # the warm run did go through the servers
    assert results['warm'] == results['cold']
    if name == 'modules':  # what the modules returned, apart from timings
        volatile = ('start', 'end', 'delta', 'atime', 'mtime', 'ctime', 'inode', 'invocation',
                    'version', 'src')  # src: a temporary file named after time and pid

        def strip(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: strip(v) for k, v in value.items() if k not in volatile}
            if isinstance(value, list):
                return [strip(v) for v in value]
            return value
        cold, hot = (strip(json.loads((tree / 'out' / label / f"results-{label}.json")
                                      .read_text())) for label in ('cold', 'warm'))
        assert json.dumps(hot).replace('/warm/', '/cold/') == json.dumps(cold)
        assert cold['command']['stdout'] == f"out {os.environ['HOME']}"
        assert cold['failing']['rc'] == 3
        assert cold['copied']['changed'] is True
        assert cold['again']['changed'] is False


def test_runs_keep_compiled_templates_for_the_next_ones(tree: pathlib.Path, pool: Pool) -> None:
    """The role's templates are compiled by the first warm run only (warm.templates); the
    store holds code of the role's sources, never a value such as the password."""
    store = pool.directory / pool_module.TEMPLATES

    def demo(label: str) -> set[str]:
        out = tree / 'out' / label
        out.mkdir()
        job = make_job(tree, role(tree, 'demo', vars={'out_dir': str(out)}),
                       workdir=tree / 'work', label=label)
        outcome = runner.run(job, warm_settings(tree, pool))
        assert outcome.successful, outcome.message
        assert (out / 'database.txt').read_text() == runs.INJECTION  # as written, not run
        return {p.name for p in store.iterdir()}

    first = demo('first')
    assert first
    assert demo('second') == first  # nothing compiled anew
    assert not any(PASSWORD.encode() in (store / name).read_bytes() for name in first)


# --- servers that die, fail or cannot be reached ---

def assert_new_servers_serve(tree: pathlib.Path, pool: Pool, before: dict[str, list[int]],
                             label: str) -> None:
    """A run now goes through one new playbook and one new module server, none of ``before``."""
    whoami(tree, warm_settings(tree, pool), label)
    after = runs.servers(pool)
    assert len(after['playbook']) == len(after['module']) == 1
    assert not set(after['playbook'] + after['module']) & set(before['playbook'] + before['module'])
    assert_forked(ancestry(tree, 'controller', label), after['playbook'][0])
    assert_forked(ancestry(tree, 'module', label), after['module'][0])


def test_a_killed_server_is_started_again(tree: pathlib.Path, pool: Pool) -> None:
    whoami(tree, warm_settings(tree, pool), 'first')
    before = runs.servers(pool)
    for pid in pool.pids:
        os.kill(pid, signal.SIGKILL)
    assert runs.eventually(lambda: pool.pids == [])

    assert_new_servers_serve(tree, pool, before, 'second')


def test_idle_servers_stop_and_the_next_run_starts_them_again(tree: pathlib.Path) -> None:
    pool = Pool(tree / 'work' / 'warm', idle_timeout=1.0)
    try:
        whoami(tree, warm_settings(tree, pool), 'first')
        before = runs.servers(pool)
        assert runs.eventually(lambda: pool.pids == [])
        assert runs.eventually(lambda: all(runs.exited(pid) for pid in before['playbook'] + before['module']))
        assert_new_servers_serve(tree, pool, before, 'second')
    finally:
        pool.close()


def test_servers_do_not_stop_as_idle_while_a_run_is_under_way(tree: pathlib.Path) -> None:
    pool = Pool(tree / 'work' / 'warm', idle_timeout=0.3)
    try:
        whoami(tree, warm_settings(tree, pool), 'first')
        with pool.in_use():  # as runner.run does around a run: a long one, here
            before = pool.pids
            threading.Event().wait(1.5)
            assert pool.pids == before
        assert runs.eventually(lambda: pool.pids == [])
    finally:
        pool.close()


def test_a_removed_socket_gets_a_new_server(tree: pathlib.Path, pool: Pool) -> None:
    # e.g. a cleaner of old files in /tmp: the server lives on, but nobody can reach it
    whoami(tree, warm_settings(tree, pool), 'first')
    before = runs.servers(pool)
    for pid in pool.pids:
        runs.socket_of(pid).unlink()
    whoami(tree, warm_settings(tree, pool), 'second')
    after = runs.servers(pool)
    assert after['playbook'] != before['playbook']
    assert_forked(ancestry(tree, 'controller', 'second'), after['playbook'][0])
    assert runs.eventually(lambda: all(runs.exited(pid) for pid in before['playbook']))


def test_an_unreachable_server_means_a_cold_run(tree: pathlib.Path, pool: Pool) -> None:
    whoami(tree, warm_settings(tree, pool), 'first')
    # The sockets are there, but refuse connections (a server that is hung or gone).
    for pid in pool.pids:
        path = runs.socket_of(pid)
        path.unlink()
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(str(path))
        dead.close()
    whoami(tree, warm_settings(tree, pool), 'second')
    assert_cold(tree, 'second', pool)


def test_a_server_that_cannot_start_means_cold_runs(
        tree: pathlib.Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    starts = tree / 'starts'
    broken = tree / 'broken_server.py'
    broken.write_text(f"import sys\nopen({str(starts)!r}, 'a').write('x')\nsys.exit(1)\n")
    monkeypatch.setattr(entry, 'server', lambda python: [python, str(broken)])
    pool = Pool(tree / 'work' / 'warm')
    try:
        for label in ('first', 'second'):
            whoami(tree, warm_settings(tree, pool), label)
            assert_cold(tree, label, pool)
        # Both servers were tried once, not again for every run (RETRY_AFTER).
        assert starts.read_text() == 'xx'
        assert 'did not start' in caplog.text
        assert pool.pids == []
    finally:
        pool.close()


def test_an_unwritable_pool_directory_means_cold_runs(tree: pathlib.Path) -> None:
    (tree / 'work').mkdir()
    (tree / 'work' / 'warm').write_text('a file where the directory should be')
    pool = Pool(tree / 'work' / 'warm')
    try:
        whoami(tree, warm_settings(tree, pool), 'cold')
        assert_cold(tree, 'cold', pool)
    finally:
        pool.close()


def test_a_long_work_directory_puts_the_sockets_elsewhere(tree: pathlib.Path) -> None:
    workdir = tree / ('long-' * 20) / 'work'  # its sockets' paths: > 107 bytes
    pool = Pool(workdir / 'warm')
    try:
        outcome = runner.run(make_job(tree, playbook(tree, 'whoami'), workdir=workdir,
                                      label='long'), runner.RunSettings(workdir=workdir, launcher=launchers.Warm(pool)))
        assert outcome.successful, outcome.message
        found = runs.servers(pool)
        assert_forked(ancestry(tree, 'controller', 'long'), found['playbook'][0])
        assert_forked(ancestry(tree, 'module', 'long'), found['module'][0])
        sockets = [runs.socket_of(pid) for pid in pool.pids]
        (directory,) = {path.parent for path in sockets}
        assert directory.parent == pathlib.Path(tempfile.gettempdir())
        assert all(len(os.fsencode(path)) <= 107 for path in sockets)
        assert directory.stat().st_mode & 0o777 == 0o700
        assert list((workdir / 'warm').glob('*.log'))  # the logs stay in the pool directory
    finally:
        pool.close()
    assert not directory.exists()  # the private socket directory went with the pool


def test_a_long_interpreter_path_gets_a_shell_script(
        tree: pathlib.Path, pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A shebang line longer than the kernel reads would run a cut interpreter path.
    monkeypatch.setattr(pool_module, 'SHEBANG_MAX', 10)
    whoami(tree, warm_settings(tree, pool), 'shell')
    assert pathlib.Path(pool.interpreter()).read_text().startswith('#!/bin/sh\n')
    assert_forked(ancestry(tree, 'module', 'shell'), runs.servers(pool)['module'][0])


def test_a_noexec_pool_directory_runs_modules_cold(
        tree: pathlib.Path, pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A hardened /tmp (mounted noexec) could not run the interpreter script.
    monkeypatch.setattr(pool_module, '_noexec', lambda directory: True)
    whoami(tree, warm_settings(tree, pool), 'noexec')
    assert_forked(ancestry(tree, 'controller', 'noexec'), runs.servers(pool)['playbook'][0])
    assert SERVER not in ancestry(tree, 'module', 'noexec')[0]['cmdline']


# --- environments ---

def test_a_different_environment_gets_its_own_server(
        tree: pathlib.Path, pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    whoami(tree, warm_settings(tree, pool), 'pipelined')
    first = runs.servers(pool)['playbook']
    # ansible-core reads its configuration when imported: without pipelining, modules
    # are files run by a fresh interpreter, which only a server started so would know.
    monkeypatch.setenv('ANSIBLE_PIPELINING', 'False')
    whoami(tree, warm_settings(tree, pool), 'files')
    found = runs.servers(pool)
    assert len(found['playbook']) == 2
    second = next(pid for pid in found['playbook'] if pid not in first)
    assert_forked(ancestry(tree, 'controller', 'files'), second)
    module = ancestry(tree, 'module', 'files')
    assert forked_by(module, found['module'][0]) is None, module  # not pipelined
    assert SERVER not in module[0]['cmdline']
    # And back: the first server serves the first environment again.
    monkeypatch.delenv('ANSIBLE_PIPELINING')
    whoami(tree, warm_settings(tree, pool), 'back')
    assert_forked(ancestry(tree, 'controller', 'back'), first[0])


def test_a_server_runs_requests_of_another_configuration_cold(
        tree: pathlib.Path, pool: Pool) -> None:
    # The server's own guard, whatever the pool decided: a child whose environment or
    # configuration file differs from the server's execs the real ansible-playbook.
    whoami(tree, warm_settings(tree, pool), 'warm')
    (server,) = runs.servers(pool)['playbook']
    environ = (pathlib.Path('/proc') / str(server) / 'environ').read_bytes()
    env = dict(item.split('=', 1) for item in os.fsdecode(environ).split('\0') if item)
    (tree / 'cfg').mkdir()
    (tree / 'cfg' / 'ansible.cfg').write_text('[defaults]\n')

    def version(env: dict[str, str], cwd: pathlib.Path) -> str:
        result = subprocess.run(
            [*entry.client(sys.executable), 'playbook', str(runs.socket_of(server)),
             '--', 'ansible-playbook', '--version'],
            env=env, cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
        assert result.returncode == 0, result.stderr
        (line,) = (line for line in result.stdout.splitlines() if 'config file =' in line)
        return line.split('=', 1)[1].strip()

    own = str(tree / 'cfg' / 'ansible.cfg')
    assert version(env, tree) != own  # the server's own configuration (None, or ~/.ansible.cfg)
    assert version({**env, 'ANSIBLE_CONFIG': own}, tree) == own
    assert version(env, tree / 'cfg') == own  # ansible.cfg in the run's directory
    assert runs.servers(pool)['playbook'] == [server]


# --- stopping ---

def test_a_run_cancelled_before_ansible_said_who_it_is(
        tree: pathlib.Path, pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without ansible-playbook's pid (no event yet) no SIGTERM can go to it: after the
    # grace period ansible-runner kills the client's process group, and the server then
    # stops the run it forked.
    class Blind(launchers.Warm):
        def cancel(self, requested: threading.Event | None,
                   controller: Callable[[], int | None]) -> launchers.Cancellation:
            return launchers.Cancellation(requested, lambda: None)

    monkeypatch.setattr(launchers, 'CANCEL_GRACE', 1.0)
    job = make_job(tree, playbook(tree, 'slow'))
    # ansible-runner asks the cancel callback when output comes, or every pexpect_timeout
    runs.write(job.private_data_dir / 'env' / 'settings', 'pexpect_timeout: 0.2\n')
    settings = runner.RunSettings(workdir=tree / 'work', launcher=Blind(pool))
    cancel = threading.Event()
    results: list[runner_events.Outcome] = []
    thread = threading.Thread(target=lambda: results.append(runner.run(job, settings, cancel=cancel)))
    thread.start()
    try:
        assert runs.eventually(lambda: bool(runs.processes_mentioning(runs.slow_command(tree))), 60)
    finally:
        cancel.set()
        thread.join()
    assert results[0].status == 'canceled'
    assert pool.pids
    assert runs.eventually(lambda: runs.processes_mentioning(runs.slow_command(tree)) == [])
    assert runs.eventually(lambda: all(runs.children(pid) == [] for pid in pool.pids))
    assert not (job.private_data_dir / 'env' / 'extravars').exists()


def test_close_stops_every_server(tree: pathlib.Path) -> None:
    pool = Pool(tree / 'work' / 'warm')
    outcome = runner.run(make_job(tree, playbook(tree, 'quick')), warm_settings(tree, pool))
    assert outcome.successful, outcome.message
    pids = pool.pids
    assert len(pids) == 2
    sockets = [runs.socket_of(pid) for pid in pids]
    pool.close()
    assert pool.pids == []
    assert all(runs.exited(pid) for pid in pids)
    assert not any(path.exists() for path in sockets)
    # A closed pool sends every run cold.
    assert pool.command(['ansible-playbook', 'x.yml'], os.environ) == ['ansible-playbook', 'x.yml']
    assert pool.interpreter() == pool.python
    pool.close()  # twice is fine


def test_an_evicted_server_finishes_its_run(
        tree: pathlib.Path, pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, 'MAX_SERVERS', 1)
    gate = make_job(tree, playbook(tree, 'gate'))
    results: list[runner_events.Outcome] = []
    thread = threading.Thread(target=lambda: results.append(
        runner.run(gate, warm_settings(tree, pool))))
    thread.start()
    try:
        # The gate's ansible-playbook: a fork of the server (its command line), not a
        # helper the server runs while it imports (ansible's import runs `ldconfig -p`).
        assert runs.eventually(lambda: len(pool.pids) == 2 and any(
            SERVER in runs.cmdline(child)
            for pid in runs.servers(pool)['playbook'] for child in runs.children(pid)), 60)
        (busy,) = runs.servers(pool)['playbook']
        monkeypatch.setenv('ANSIBLE_KOPF_TEST', 'another environment')
        whoami(tree, warm_settings(tree, pool), 'other')  # evicts the busy server ...
        (other,) = runs.servers(pool)['playbook']
        assert other != busy
        assert_forked(ancestry(tree, 'controller', 'other'), other)
        assert not runs.exited(busy)  # ... which still serves its run
        assert runs.children(busy)
    finally:
        (tree / 'out' / 'gate').touch()
        thread.join()
    assert results[0].successful, results[0].message
    assert runs.eventually(lambda: runs.exited(busy))  # and then exits


# --- secrets ---

def test_secrets_stay_out_of_the_pool_directory(tree: pathlib.Path, pool: Pool) -> None:
    settings = dataclasses.replace(warm_settings(tree, pool), verbosity=3, log_events='Everything')
    for watch in (role(tree, 'demo'), playbook(tree, 'modules')):
        runner.run(make_job(tree, watch), settings)
    assert (tree / 'out' / 'dir' / 'secret').read_text() == PASSWORD  # via the module server
    assert len(list(pool.directory.glob('*.log'))) >= 2  # a module and a playbook server
    for path in files_under(pool.directory):
        if not path.is_socket():
            assert PASSWORD not in path.read_text(errors='replace'), path
    for pid in pool.pids:  # nor do the servers hold it in their environment or arguments
        for name in ('environ', 'cmdline'):
            assert PASSWORD.encode() not in (pathlib.Path('/proc') / str(pid) / name).read_bytes()
