"""
The launchers' share of a run that does not need Ansible: which interpreter the
inventory names, and the cancellation each hands to ansible-runner (SIGTERM to the
controller once asked, ``True`` for ansible-runner's SIGKILL after the grace period).
"""
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from ansible_kopf.run import launchers
from ansible_kopf.warm.pool import Pool


class Config:
    """The part of ansible-runner's RunnerConfig a launcher touches."""

    def __init__(self) -> None:
        self.command = ['ansible-playbook', 'x.yml']
        self.env: dict[str, str] = {}


def test_cold_runs_use_this_python_and_leave_the_command_alone() -> None:
    cold = launchers.Cold()
    assert cold.interpreter() == sys.executable

    config = Config()
    cold.prepare(config)
    assert config.command == ['ansible-playbook', 'x.yml']


def test_a_closed_pool_makes_warm_runs_cold(tmp_path: pathlib.Path) -> None:
    pool = Pool(tmp_path / 'warm')
    warm = launchers.Warm(pool)
    warm.close()
    assert warm.interpreter() == sys.executable

    config = Config()
    warm.prepare(config)
    assert config.command == ['ansible-playbook', 'x.yml']


@pytest.mark.processes
@pytest.mark.parametrize('launcher', [launchers.Cold(), launchers.Warm(Pool(pathlib.Path('/nonexistent')))],
                         ids=['cold', 'warm'])
def test_cancellation_terms_the_controller_then_gives_way_to_the_sigkill(
        launcher: launchers.Launcher, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchers, 'CANCEL_GRACE', 0.5)
    controller = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        requested = threading.Event()
        cancel = launcher.cancel(requested, lambda: controller.pid)
        assert cancel() is False  # not asked: the run goes on
        assert controller.poll() is None
        requested.set()
        assert cancel() is False  # asked: SIGTERM now, SIGKILL only after the grace period
        assert controller.wait(10) == -signal.SIGTERM
        time.sleep(0.6)
        assert cancel() is True
    finally:
        controller.kill()
        controller.wait()


def test_cancellation_without_a_controller_pid_waits_for_the_sigkill(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchers, 'CANCEL_GRACE', 0.2)
    requested = threading.Event()
    requested.set()
    cancel = launchers.Cold().cancel(requested, lambda: None)
    assert cancel() is False
    time.sleep(0.3)
    assert cancel() is True
