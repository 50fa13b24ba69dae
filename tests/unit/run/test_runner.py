"""
These tests really run ansible-runner and ansible-playbook against localhost (no
Kubernetes): each takes a few seconds. They are what proves that the variables reach
Ansible as intended, that unsafe marking holds under ansible-core's trust model, and
that nothing secret stays on disk.
"""
import asyncio
import dataclasses
import json
import logging
import pathlib
import time

import pytest
import yaml

from ansible_kopf.run import launchers, runner
from ansible_kopf.sdk import watches
from tests import runs
from tests.runs import (
    INJECTION,
    PASSWORD,
    files_under,
    make_job,
    make_watch,
    processes_mentioning,
    write,
)

pytestmark = pytest.mark.ansible


def test_private_data_dir_layout(tmp_path: pathlib.Path) -> None:
    assert runner.private_data_dir(tmp_path, group='otus.homework', kind='MySQL',
                                   namespace='apps', name='db1') \
        == tmp_path / 'otus.homework' / 'MySQL' / 'apps' / 'db1'
    assert runner.private_data_dir(tmp_path, group='', kind='Node', namespace=None, name='n') \
        == tmp_path / 'core' / 'Node' / '_cluster' / 'n'


def test_generated_playbook_and_inventory(tmp_path: pathlib.Path) -> None:
    target = watches.Runnable(type='role', path=tmp_path / 'roles' / 'mysql')
    path = runner.playbook(target, tmp_path)
    (play,) = yaml.safe_load(path.read_text())
    assert play['hosts'] == 'localhost'
    assert play['connection'] == 'local'
    assert play['gather_facts'] is False
    assert play['roles'] == [{'role': str(tmp_path / 'roles' / 'mysql')}]
    mtime = path.stat().st_mtime_ns
    assert runner.playbook(target, tmp_path) == path
    assert path.stat().st_mtime_ns == mtime  # not rewritten when unchanged
    collection = watches.Runnable(type='role', path=tmp_path / 'c' / 'roles' / 'dummy',
                                fqcn='acme.tools.dummy')
    (play,) = yaml.safe_load(runner.playbook(collection, tmp_path).read_text())
    assert play['roles'] == [{'role': 'acme.tools.dummy'}]  # by name: its collection's modules resolve
    own = watches.Runnable(type='playbook', path=tmp_path / 'p.yml')
    assert runner.playbook(own, tmp_path) == tmp_path / 'p.yml'
    hosts = yaml.safe_load(runner.inventory(tmp_path).read_text())['all']['hosts']
    assert hosts['localhost']['ansible_connection'] == 'local'


def test_envvars(tmp_path: pathlib.Path) -> None:
    target = watches.Runnable(type='role', path=tmp_path / 'roles' / 'mysql')
    job = runner.Job(target=target, roles_path=(tmp_path / 'roles',),
                     private_data_dir=tmp_path, extravars={}, max_artifacts=1, label='x')
    env = runner.envvars(job, runner.RunSettings(workdir=tmp_path, kubeconfig='/k/cfg'),
                         {'PATH': '/usr/bin', 'ANSIBLE_ROLES_PATH': '/extra'})
    assert env['ANSIBLE_GATHERING'] == 'explicit'
    assert env['ANSIBLE_ROLES_PATH'] == f"{tmp_path / 'roles'}:/extra"  # roles/ once
    assert env['K8S_AUTH_KUBECONFIG'] == '/k/cfg'
    assert env['ANSIBLE_DISPLAY_ARGS_TO_STDOUT'] == 'False'
    assert env['PATH'].endswith(':/usr/bin')
    assert 'K8S_AUTH_KUBECONFIG' not in runner.envvars(job, runner.RunSettings(workdir=tmp_path), {})


def test_successful_run_keeps_literals_and_leaves_no_secret_on_disk(tree: pathlib.Path, settings: runner.RunSettings) -> None:
    watch = make_watch(tree, watches.Runnable(type='role', path=tree / 'roles' / 'demo'))
    job = make_job(tree, watch)
    started = time.monotonic()
    outcome = runner.run(job, settings)
    elapsed = time.monotonic() - started

    assert outcome.successful, outcome.message
    assert outcome.rc == 0
    assert outcome.counts.ok == 5
    assert outcome.counts.changed == 3
    assert outcome.counts.failures == 0
    # set_stats data, aggregated over the run.
    assert outcome.custom_stats == {'endpoint': 'db1.apps', 'replicas': 3}
    assert 0 < outcome.duration <= elapsed

    # The injected template reached the role as text and was written as text.
    assert (tree / 'out' / 'database.txt').read_text() == INJECTION
    # Unsafe strings keep their type (YAML's !unsafe would have made these int/None);
    # ansible-core 2.18 names an unsafe string's type AnsibleUnsafeText, a str.
    types = json.loads((tree / 'out' / 'types.json').read_text())
    assert {key: 'str' if kind == 'AnsibleUnsafeText' else kind for key, kind in types.items()} == {
        'server_id': 'int', 'port_string': 'str', 'port_string_value': '0123',
        'empty': 'str', 'name': 'db1'}
    # The role did get the password (in a no_log task) ...
    assert (tree / 'out' / 'password.txt').read_text() == PASSWORD

    # ... but nothing under the private data dir holds it, nor the lookup's output.
    assert not (job.private_data_dir / 'env' / 'extravars').exists()
    artifacts = files_under(job.private_data_dir / 'artifacts')
    assert any(p.name == 'stdout' for p in artifacts)  # the artifacts really are there
    for path in files_under(job.private_data_dir):
        content = path.read_text(errors='replace')
        assert PASSWORD not in content, path
        assert 'uid=' not in content, path


def test_every_event_is_written_to_job_events_as_ansible_runner_names_it(
        tree: pathlib.Path, settings: runner.RunSettings) -> None:
    # runner.EventFiles writes them in ansible-runner's place: same names, content, mode.
    job = make_job(tree, make_watch(tree, watches.Runnable(type='role', path=tree / 'roles' / 'demo')))
    outcome = runner.run(job, settings)
    directory = job.private_data_dir / 'artifacts' / outcome.ident / 'job_events'
    files = sorted(directory.iterdir(), key=lambda p: int(p.name.split('-')[0]))
    events = [json.loads(p.read_text()) for p in files]
    assert [p.name for p in files] == [f"{e['counter']}-{e['uuid']}.json" for e in events]
    assert [e['counter'] for e in events] == list(range(1, len(events) + 1))  # none lost
    assert {e['runner_ident'] for e in events} == {outcome.ident}
    assert {p.stat().st_mode & 0o777 for p in files} == {0o600}
    assert events[0]['event'] == 'playbook_on_start' and events[-1]['event'] == 'playbook_on_stats'
    assert sum(e['event'] == 'runner_on_ok' for e in events) == outcome.counts.ok


def test_without_marking_ansible_would_evaluate_the_spec(tree: pathlib.Path, settings: runner.RunSettings) -> None:
    # The control for the test above: the danger is real under this ansible-core.
    watch = make_watch(tree, watches.Runnable(type='role', path=tree / 'roles' / 'demo'),
                       mark_unsafe=False)
    outcome = runner.run(make_job(tree, watch), settings)
    assert outcome.successful, outcome.message
    assert (tree / 'out' / 'database.txt').read_text().startswith('uid=')


def test_failed_run_reports_the_task_and_its_message(tree: pathlib.Path, settings: runner.RunSettings) -> None:
    watch = make_watch(tree, watches.Runnable(type='role', path=tree / 'roles' / 'failing'))
    outcome = runner.run(make_job(tree, watch), settings)
    assert not outcome.successful
    assert outcome.status == 'failed'
    assert outcome.rc != 0
    assert outcome.failed_task == 'Fail loudly'
    assert outcome.message == 'backup of db1 failed'
    assert outcome.counts.ok == 1
    assert outcome.counts.failures == 1


def test_no_log_failure_message_is_censored(
        tree: pathlib.Path, settings: runner.RunSettings, caplog: pytest.LogCaptureFixture) -> None:
    # ansible-core 2.19 prints a no_log task's failure message; it must not reach the disk.
    watch = make_watch(tree, watches.Runnable(type='role', path=tree / 'roles' / 'secretfail'))
    job = make_job(tree, watch)
    with caplog.at_level(logging.DEBUG):
        outcome = runner.run(job, dataclasses.replace(settings, log_events='Everything'))
    assert not outcome.successful
    assert outcome.failed_task == 'Fail with a secret in the message'
    assert outcome.message is not None
    assert 'no_log' in outcome.message
    assert PASSWORD not in outcome.message
    assert PASSWORD not in caplog.text
    stdout = [p for p in files_under(job.private_data_dir) if p.name == 'stdout']
    assert stdout  # the transcript is still kept
    assert 'output hidden (no_log)' in stdout[0].read_text()
    for path in files_under(job.private_data_dir):
        assert PASSWORD not in path.read_text(errors='replace'), path


def test_broken_playbook_fails_with_ansible_error(tree: pathlib.Path, settings: runner.RunSettings) -> None:
    write(tree / 'playbooks' / 'broken.yml', """
        - hosts: localhost
          roles: [no_such_role_anywhere]
    """)
    watch = make_watch(tree, watches.Runnable(type='playbook',
                                            path=tree / 'playbooks' / 'broken.yml'))
    outcome = runner.run(make_job(tree, watch), settings)
    assert not outcome.successful
    assert outcome.message is not None
    assert 'no_such_role_anywhere' in outcome.message


def test_artifacts_are_rotated_to_the_maximum(tree: pathlib.Path, settings: runner.RunSettings) -> None:
    watch = make_watch(tree, watches.Runnable(type='playbook',
                                            path=tree / 'playbooks' / 'quick.yml'))
    job = make_job(tree, watch, max_artifacts=2)
    idents = [runner.run(job, settings).ident for _ in range(3)]
    kept = sorted(p.name for p in (job.private_data_dir / 'artifacts').iterdir())
    assert kept == sorted(idents[1:])


def test_cancelled_run_stops_ansible_and_removes_the_variables(tree: pathlib.Path, settings: runner.RunSettings) -> None:
    watch = make_watch(tree, watches.Runnable(type='playbook',
                                            path=tree / 'playbooks' / 'slow.yml'))
    job = make_job(tree, watch)
    variables = job.private_data_dir / 'env' / 'extravars'
    # ansible-runner asks for cancellation when output comes, or every pexpect_timeout (5 s)
    write(job.private_data_dir / 'env' / 'settings', 'pexpect_timeout: 0.2\n')

    async def main() -> float:
        task = asyncio.create_task(runner.run_async(job, settings))
        for _ in range(300):
            await asyncio.sleep(0.1)
            if processes_mentioning(runs.slow_command(tree)):
                break
        assert variables.exists()  # the run has started with its variables on disk
        assert processes_mentioning(runs.slow_command(tree))  # and reached its task
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    stopped_in = asyncio.run(main())
    assert stopped_in < 20  # not the 60 s of the sleep
    assert not variables.exists()
    # No process of the run is left behind: ansible-core 2.19's workers call setsid(),
    # so a SIGKILL to ansible-playbook's process group alone would orphan them.
    # (A module's processes end a moment after the run: cold, they get the SIGTERM of their
    # worker's process group; warm, of the module server once the module's client is gone.
    # An orphan would outlive the 30 s wait: the sleep takes 60.)
    assert processes_mentioning(str(variables)) == []
    assert runs.eventually(lambda: processes_mentioning(runs.slow_command(tree)) == [], 30)
    if isinstance(settings.launcher, launchers.Warm):  # the servers live on, with no child left
        pool = settings.launcher.pool
        assert pool.pids
        assert runs.eventually(lambda: all(runs.children(pid) == [] for pid in pool.pids), 30)


def test_the_operators_own_collections_are_found() -> None:
    """operator_sdk.util, which SDK roles call by name, is in the collections path runs get."""
    assert (runner.OWN_COLLECTIONS / 'ansible_collections' / 'operator_sdk' / 'util' / 'plugins' / 'modules'
            / 'k8s_status.py').is_file(), runner.OWN_COLLECTIONS
