"""
How a run's ``ansible-playbook`` is started and stopped: the one seam between
:mod:`runner` (which prepares every run alike with ansible-runner's ``init_runner``) and
the process that does the work. Two launchers:

:class:`Cold`
    ansible-runner spawns ``ansible-playbook`` itself; modules run in a fresh
    ``python`` each (the inventory's interpreter is this Python).
:class:`Warm`
    the run is forked by a warm server (:mod:`ansible_kopf.warm`): ansible-runner
    spawns the per-run client instead of ``ansible-playbook``, and the inventory's
    interpreter is a script that hands modules to the module server.

Either way ansible-runner keeps its whole role (pseudo-terminal, events, artifacts,
status, rc), and the launcher that started the process stops it (:meth:`Launcher.cancel`):
cancellation is the callback ansible-runner polls during the run.
"""
import abc
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from ansible_kopf.warm import pool

CANCEL_GRACE: Final = 10.0  # seconds between SIGTERM and ansible-runner's SIGKILL


class Cancellation:
    """
    ansible-runner's ``cancel_callback`` for one run: once ``requested`` is set, SIGTERM
    to ``ansible-playbook`` (``controller()``: its pid, once its first event reported it),
    and after :data:`CANCEL_GRACE` seconds ``True``, on which ansible-runner SIGKILLs the
    process group it spawned.

    Why SIGTERM first, to the controller's process group: ansible-core 2.19's workers call
    ``setsid()``, so ansible-runner's SIGKILL to the spawned process group would leave them
    and their modules running as orphans; ansible-playbook's SIGTERM handler forwards the
    signal to its workers, which kill their own process groups. Under ansible-core 2.18 the
    workers and their modules share the controller's group, which has no such handler:
    SIGTERM to the controller alone would kill it and leave them.
    """

    def __init__(self, requested: threading.Event | None,
                 controller: Callable[[], int | None]) -> None:
        self._requested = requested
        self._controller = controller
        self._terminated_at: float | None = None

    def __call__(self) -> bool:
        if self._requested is None or not self._requested.is_set():
            return False
        if self._terminated_at is None:
            self._terminated_at = time.monotonic()
            pid = self._controller()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    _terminate(pid)
        return time.monotonic() - self._terminated_at > CANCEL_GRACE


def _terminate(pid: int) -> None:
    """SIGTERM to ``pid``'s process group if it leads one (as ansible-playbook does under
    ansible-runner and in a warm child), else to ``pid`` alone."""
    if os.getpgid(pid) == pid:
        os.killpg(pid, signal.SIGTERM)
    else:
        os.kill(pid, signal.SIGTERM)


class Launcher(abc.ABC):
    """Starts and stops the process of each run; one per operator."""

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Around one run, from before its preparation until it has ended."""
        yield

    @abc.abstractmethod
    def interpreter(self) -> str:
        """The inventory's ``ansible_python_interpreter``."""

    @abc.abstractmethod
    def prepare(self, config: Any) -> None:
        """Adapt ansible-runner's prepared ``RunnerConfig`` before the run starts."""

    def cancel(self, requested: threading.Event | None,
               controller: Callable[[], int | None]) -> Cancellation:
        """
        The run's ``cancel_callback``. ``controller`` gives ``ansible-playbook``'s pid
        (from its events; None before the first), the process that gets the SIGTERM.
        Cold, that is the process ansible-runner spawned. Warm, ansible-runner spawned the
        client, and ``ansible-playbook`` is the server's forked child, which leads its own
        session: it gets the SIGTERM directly; if it has not ended after the grace period,
        ansible-runner's SIGKILL ends the client, and the server, seeing its client gone,
        SIGTERMs and later SIGKILLs the child's process group.
        """
        return Cancellation(requested, controller)

    def close(self) -> None:  # noqa: B027  (nothing to do unless a launcher holds processes)
        """The operator stops: nothing of the launcher's is left running."""


class Cold(Launcher):
    """ansible-runner spawns ``ansible-playbook``; modules run in a fresh ``python``."""

    def interpreter(self) -> str:
        return sys.executable

    def prepare(self, config: Any) -> None:
        """Nothing: ansible-runner's command is ``ansible-playbook`` itself."""


class Warm(Launcher):
    """Runs forked by the warm servers of ``servers`` (see :mod:`ansible_kopf.warm`)."""

    def __init__(self, servers: pool.Pool) -> None:
        self.pool = servers

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self.pool.in_use():  # no server stops as idle during the run
            yield

    def interpreter(self) -> str:
        return self.pool.interpreter()

    def prepare(self, config: Any) -> None:
        """The same run, but its command is the client of a playbook server."""
        config.command = self.pool.command(config.command, config.env)

    def close(self) -> None:
        self.pool.close()
