"""
One run of a role or playbook for one object, through ansible-runner's Python API.

Layout on disk, below the operator's work directory::

    <workdir>/inventory.yml                    localhost, local connection, this Python
    <workdir>/playbooks/role-<name>-<hash>.yml generated once per role: hosts localhost,
                                               connection local, gather_facts false
    <workdir>/<group>/<kind>/<namespace>/<name>/   one private data dir per object
        env/extravars                          the run's variables; exists only during a run
        artifacts/<ident>/                     ansible-runner's artifacts, rotated to
                                               ``maxRunnerArtifacts`` directories

Secrets: the variables (the whole object) exist on disk only in ``env/extravars``
(mode 0600), which is removed when the run ends, whatever the outcome. ansible-runner's
own env files are suppressed (``suppress_env_files``); facts are not cached to disk;
task arguments are not displayed (``ANSIBLE_DISPLAY_ARGS_TO_STDOUT=False``); results of
``no_log`` tasks are censored by ansible-runner's callback before they are written.
What remains in the artifacts is what the role itself prints without ``no_log``, plus
ansible-runner's ``command`` file, which records the operator's environment variables.

Every run is prepared by ansible-runner (``init_runner``) alike; the launcher
(``RunSettings.launcher``, see :mod:`launchers`) decides how its process starts (cold, or
forked by a warm server), which interpreter the inventory names, and how the process is
stopped. Events, artifacts, status and rc remain ansible-runner's; only the writing of
``job_events/`` files is done here (:class:`EventFiles`: the same files, written faster).

The run itself is blocking; :func:`run_async` moves it to a thread and, if the awaiting
task is cancelled (operator shutdown), stops the run (the launcher's cancellation) and
waits until it has stopped.
"""
import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import shlex
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, Final

import ansible_runner.interface
import yaml

from ansible_kopf import constants
from ansible_kopf.run import launchers, runner_events
from ansible_kopf.sdk import extravars, watches
from ansible_kopf.warm.files import write_if_changed

logger = logging.getLogger(__name__)
ansible_logger = logging.getLogger('ansible_kopf.ansible')  # the streamed task results

CLUSTER_SCOPE: Final = '_cluster'  # the "namespace" directory of cluster-scoped objects
# operator_sdk.util as this operator provides it (k8s_status, requeue_after, osdk_metric):
# after the user's collections, so an installed operator_sdk.util comes first
# operator/collections, beside the package (this file is operator/ansible_kopf/run/runner.py)
OWN_COLLECTIONS: Final = pathlib.Path(__file__).resolve().parents[2] / 'collections'
DEFAULT_COLLECTIONS_PATH: Final = '~/.ansible/collections:/usr/share/ansible/collections'


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Process-wide knobs for all runs."""
    workdir: pathlib.Path
    verbosity: int = 0
    log_events: constants.LogEvents = constants.DEFAULT_LOG_EVENTS
    kubeconfig: str | None = None
    launcher: launchers.Launcher = dataclasses.field(default_factory=launchers.Cold)
    ansible_args: tuple[str, ...] = ()  # the SDK's --ansible-args: added to every run


@dataclasses.dataclass(frozen=True)
class Job:
    """What to run, for which object, with which variables."""
    target: watches.Runnable
    roles_path: tuple[pathlib.Path, ...]
    private_data_dir: pathlib.Path
    extravars: Mapping[str, Any]
    max_artifacts: int
    label: str  # for the log: "<group>/<version>/<kind> <namespace>/<name>"
    kubeconfig: str | None = None  # the run's own (through the proxy), else the operator's
    verbosity: int | None = None  # the object's annotation, else its kind's, else the operator's


def private_data_dir(workdir: pathlib.Path, *, group: str, kind: str,
                     namespace: str | None, name: str) -> pathlib.Path:
    return workdir / (group or 'core') / kind / (namespace or CLUSTER_SCOPE) / name


def inventory(workdir: pathlib.Path, interpreter: str = sys.executable) -> pathlib.Path:
    """
    The inventory: localhost, local connection, modules run by this very Python (which
    finds the ``kubernetes`` client), or by the warm module server's interpreter script.
    """
    name = 'inventory.yml' if interpreter == sys.executable else 'inventory-warm.yml'
    path = workdir / name
    write_if_changed(path, yaml.safe_dump({'all': {'hosts': {'localhost': {
        'ansible_connection': 'local',
        'ansible_python_interpreter': interpreter,
    }}}}))
    return path


def inventories(workdir: pathlib.Path, interpreter: str,
                environ: Mapping[str, str]) -> list[str]:
    """
    The run's inventory sources: those of ``ANSIBLE_INVENTORY`` (as under the SDK, e.g. a
    directory with ``group_vars``), then ours, whose connection and interpreter for
    localhost come last and so win.
    """
    users = [source.strip() for source in environ.get('ANSIBLE_INVENTORY', '').split(',')
             if source.strip()]
    return [*users, str(inventory(workdir, interpreter))]


def playbook(target: watches.Runnable, workdir: pathlib.Path) -> pathlib.Path:
    """The playbook to run: the target itself, or a generated one that applies the role."""
    if target.type == 'playbook':
        return target.path
    digest = hashlib.sha256(f"{target.path}:{target.fqcn}".encode()).hexdigest()[:12]
    path = workdir / 'playbooks' / f"role-{target.path.name}-{digest}.yml"
    write_if_changed(path, yaml.safe_dump([{
        'name': f"Reconcile with role {target.fqcn or target.path.name}",
        'hosts': 'localhost',
        'connection': 'local',
        'gather_facts': False,
        # a collection's role by its FQCN: Ansible then resolves its tasks' short module
        # names in that collection, which it would not for the same role given by path
        'roles': [{'role': target.fqcn or str(target.path)}],
    }], sort_keys=False))
    return path


def envvars(job: Job, settings: RunSettings, environ: Mapping[str, str]) -> dict[str, str]:
    """Environment of ansible-playbook, on top of the operator's own."""
    roles_path = [str(p) for p in job.roles_path]
    if job.target.type == 'role' and not job.target.fqcn:
        roles_path.append(str(job.target.path.parent))  # often roles/ itself, listed once
    if environ.get('ANSIBLE_ROLES_PATH'):
        roles_path.append(environ['ANSIBLE_ROLES_PATH'])
    roles_path = list(dict.fromkeys(roles_path))
    bindir = os.path.dirname(sys.executable)  # ansible-playbook of this environment
    path = environ.get('PATH', os.defpath)
    tmp = str(settings.workdir / 'tmp')
    collections = (environ.get('ANSIBLE_COLLECTIONS_PATH')
                   or environ.get('ANSIBLE_COLLECTIONS_PATHS') or DEFAULT_COLLECTIONS_PATH)
    result = {
        'PATH': path if bindir in path.split(os.pathsep) else f"{bindir}{os.pathsep}{path}",
        'ANSIBLE_ROLES_PATH': ':'.join(roles_path),
        'ANSIBLE_GATHERING': 'explicit',
        'ANSIBLE_DISPLAY_ARGS_TO_STDOUT': 'False',
        'ANSIBLE_NOCOLOR': 'True',
        'ANSIBLE_PIPELINING': environ.get('ANSIBLE_PIPELINING', 'True'),
        'ANSIBLE_LOCAL_TEMP': environ.get('ANSIBLE_LOCAL_TEMP', tmp),
        'ANSIBLE_REMOTE_TEMP': environ.get('ANSIBLE_REMOTE_TEMP', tmp),
        'ANSIBLE_COLLECTIONS_PATH': f"{collections}{os.pathsep}{OWN_COLLECTIONS}",
    }
    kubeconfig = job.kubeconfig or settings.kubeconfig
    if kubeconfig:
        result['K8S_AUTH_KUBECONFIG'] = kubeconfig
    return result


class EventFiles:
    """
    The run's ``event_handler``: hands each event to the collector, then writes it to
    ``job_events/<counter>-<uuid>.json`` in the run's artifacts, as ansible-runner does
    (mode 0600, through a ``.tmp`` file renamed into place), and tells ansible-runner not
    to write it again. Why: ansible-runner streams the dict with ``json.dump``, the pure
    Python encoder, one small write at a time; that was the operator process's largest
    cost (about 5 ms an event, over a third of its CPU in the operator tests), and
    ``json.dumps`` (the C encoder) writes the same JSON at a fraction of it.
    """

    def __init__(self, collector: runner_events.Collector) -> None:
        self.collector = collector
        self.directory: pathlib.Path | None = None  # the run's job_events/, once known

    def __call__(self, event: dict[str, Any]) -> bool:
        if self.collector(event) and self.directory is not None and 'uuid' in event:
            final = self.directory / f"{event['counter']}-{event['uuid']}.json"
            temporary = final.with_name(final.name + '.tmp')
            try:
                descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(descriptor, 'w', encoding='utf-8') as file:
                    file.write(json.dumps(event))
                temporary.rename(final)
            except OSError as e:  # as ansible-runner: a lost event file does not fail the run
                logger.debug(f"could not write the event file {final}: {e}")
        return False


def new_ident() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def run(job: Job, settings: RunSettings, *,
        cancel: threading.Event | None = None) -> runner_events.Outcome:
    """Run the job to completion (blocking) and return its outcome."""
    ident = new_ident()
    collector = runner_events.Collector(logger=ansible_logger, label=job.label,
                                 log_events=settings.log_events)
    event_files = EventFiles(collector)
    env_dir = job.private_data_dir / 'env'
    env_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    variables = env_dir / 'extravars'  # ansible-runner passes it as `-e @<path>`
    started = time.monotonic()
    status, rc = 'failed', -1
    launcher = settings.launcher
    with launcher.running():
        try:
            descriptor = os.open(variables, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, 'w', encoding='utf-8') as file:
                file.write(extravars.dumps(job.extravars))
            result = ansible_runner.interface.init_runner(
                private_data_dir=str(job.private_data_dir),
                playbook=str(playbook(job.target, settings.workdir)),
                inventory=inventories(settings.workdir, launcher.interpreter(), os.environ),
                ident=ident,
                rotate_artifacts=job.max_artifacts,
                envvars=envvars(job, settings, os.environ),
                verbosity=(settings.verbosity if job.verbosity is None else job.verbosity) or None,
                cmdline=shlex.join(settings.ansible_args) if settings.ansible_args else None,
                quiet=True,  # do not echo Ansible's output to our stdout; the collector logs it
                suppress_env_files=True,  # no env/envvars etc. written from our arguments
                fact_cache_type='memory',  # no facts cached into the artifacts
                event_handler=event_files,
                cancel_callback=launcher.cancel(cancel, lambda: collector.controller_pid),
            )
            launcher.prepare(result.config)
            event_files.directory = pathlib.Path(result.config.artifact_dir) / 'job_events'
            result.run()
            status, rc = str(result.status), (result.rc if result.rc is not None else -1)
        except Exception as e:  # a broken run must not break the operator: report it as failed
            logger.exception(f"[{job.label}] ansible-runner could not run")
            collector.errors.append(f"ansible-runner error: {e}")
        finally:
            variables.unlink(missing_ok=True)
    return collector.outcome(status=status, rc=rc, ident=ident,
                             duration=time.monotonic() - started)


async def run_async(job: Job, settings: RunSettings) -> runner_events.Outcome:
    """Run in a thread; on cancellation stop ansible and wait for the cleanup."""
    cancel = threading.Event()
    task = asyncio.ensure_future(asyncio.to_thread(run, job, settings, cancel=cancel))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel.set()
        await asyncio.wait({task})  # the extravars file is gone once the thread is done
        raise
