"""
The operator's side of the warm Ansible servers: a :class:`Pool` starts them (see
:mod:`forkserver`), points runs at them, retires and stops them. Runs in the operator
process, in the threads that run ansible-runner.

Where a cold run spends its time, and what the pool removes (figures: bench/README.md):

* ``ansible-playbook`` start-up, mostly imports (~1 s): ansible-runner still spawns a
  command per run, but the command is :mod:`client`, which hands the run to a *playbook
  server* that forks an already-imported ``ansible-playbook``. ansible-runner keeps its
  whole role: pseudo-terminal, event stream, artifacts, status, rc, cancellation.
* the ``kubernetes`` import in every task's worker that runs kubernetes.core lookups
  (~0.6 s per such task): the playbook server has imported it, workers are forks.
* one fresh ``python`` per module call, importing ansible's module_utils, the
  ``kubernetes`` client and kubernetes.core (~1 s per ``kubernetes.core.k8s`` task):
  the inventory's ``ansible_python_interpreter`` is a script that hands pipelined
  payloads to the *module server*, which forks a child that runs the payload.
* plugin loading in every run and every task's worker (collection loader, connection,
  shell, callback, filter and test plugins, the kubernetes.core lookup and its
  module_utils, their documentation's YAML): the playbook server loads them once
  (:func:`preloads.load_playbook_plugins`). Plugins next to a role or playbook are still
  loaded by each run, so edits to roles show at the next run; a collection or
  ansible-core upgraded in place is seen after the operator restarts (as a new image).
* a Python start-up with ``socket``, ``json`` and ``subprocess`` for each run's and each
  module call's client (~40 ms of CPU): :mod:`client` and :mod:`wire` import C modules.

Each server has a :class:`Slot`: the module server one, each playbook server one keyed
by the run's environment (ansible-core reads its configuration at import; see
:func:`wire.server_env`): one per distinct environment, normally one per operator,
at most :data:`MAX_SERVERS` (an evicted one finishes its runs first). There is one
module server. A server that died is started again on the next run; a run whose server
cannot start (nor be reached) runs cold, and so do the runs of the next
:data:`RETRY_AFTER` seconds. Servers exit with the operator (they watch their parent)
and on :meth:`Pool.close`; a run's process dies with its server. With ``idle_timeout``,
servers that served no run for that long stop (the operator then holds only its own
memory); the next run starts them again and waits for their imports (~2 s), as the
first run after the operator started.
"""
import contextlib
import dataclasses
import hashlib
import logging
import os
import pathlib
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Final

from ansible_kopf.warm import entry, files, wire

logger = logging.getLogger(__name__)

MAX_SERVERS: Final = 4  # playbook servers; the least recently used one is stopped beyond
START_TIMEOUT: Final = 120.0  # seconds for a server to import and report ready
RETRY_AFTER: Final = 60.0  # seconds of cold runs after a server failed to start
STOP_TIMEOUT: Final = 10.0
SOCKET_PATH_MAX: Final = 107  # bytes: sockaddr_un.sun_path is 108 with the final NUL
SHEBANG_MAX: Final = 127  # bytes of "#!interpreter arg" that every Linux kernel reads
_LONGEST_SOCKET: Final = 'playbook-0123456789abcdef.sock'
MODULE_SLOT: Final = 'module'
TEMPLATES: Final = 'templates'  # the playbook servers' compiled Jinja templates, in the directory


class ServerProcess:
    """
    One started server process, as the operator sees it. Its ready line is awaited once,
    by whichever run needs it first, under :attr:`_starting`; others wait for that one.
    """

    def __init__(self, flavour: 'wire.Flavour', socket: pathlib.Path,
                 process: subprocess.Popen[bytes]) -> None:
        self.flavour = flavour
        self.socket = socket
        self.process = process
        self.last_used = time.monotonic()
        self._starting = threading.Lock()
        self._ready: bool | None = None  # None: nobody has waited for its ready line yet

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def ready(self) -> bool:
        """It printed ``ready`` (so far as anyone has waited) and has not exited since."""
        return bool(self._ready) and self.alive

    def wait_ready(self) -> bool:
        """Wait for the ``ready`` line (the first caller reads it; others wait for that)."""
        with self._starting:
            if self._ready is None:
                self._ready = _ready(self.process, time.monotonic() + START_TIMEOUT)
                self._close_stdout()
            return self.ready

    def close_stdout(self) -> None:
        """Release the pipe of the ready line (not under a thread still reading it)."""
        with self._starting:
            self._close_stdout()

    def _close_stdout(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def terminate(self) -> None:
        """Ask it to stop: it stops listening and exits once its runs have ended."""
        if self.alive:
            self.process.terminate()

    def wait_stopped(self, deadline: float) -> None:
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()  # its children get SIGTERM (PR_SET_PDEATHSIG)
            self.process.wait()


class Slot:
    """
    The place of one server: the module server's, or the playbook server's of one
    environment. Its fields change only under its own lock (every method takes it;
    nothing else touches them), so runs of different slots never wait for each other,
    and a run waiting for a server's ready line holds no lock of the slot. A slot the
    pool let go of (closed, evicted, idle) is closed: a run that still holds it starts
    no server there (it would be nobody's to stop) and goes cold.
    """

    def __init__(self, flavour: 'wire.Flavour', socket: pathlib.Path,
                 env: Mapping[str, str]) -> None:
        self.flavour = flavour
        self.socket = socket
        self.env = dict(env)  # what its server is started with
        self._lock = threading.Lock()
        self._server: ServerProcess | None = None
        self._retry_at = 0.0  # no new server before (after one failed to start)
        self._closed = False

    def server(self, start: Callable[['Slot'], ServerProcess]) -> ServerProcess | None:
        """
        Its server, started by ``start`` if there is none or it died, unless a start
        failed less than :data:`RETRY_AFTER` ago.
        """
        with self._lock:
            if self._server is not None and self._server.alive:
                return self._server
            if self._closed or time.monotonic() < self._retry_at:
                return None
            self._server = start(self)
            return self._server

    def unreachable(self) -> ServerProcess | None:
        """Its server if it is alive and ready but its socket is gone (a /tmp cleaner)."""
        with self._lock:
            server = self._server
            if server is not None and server.ready and not self.socket.exists():
                self._server = None
                return server
            return None

    def failed(self, server: ServerProcess) -> bool:
        """
        ``server`` did not start: runs go cold for :data:`RETRY_AFTER` seconds. True for
        the first caller of the runs that waited for it, who stops it.
        """
        with self._lock:
            if self._server is not server:
                return False
            self._server = None
            self._retry_at = time.monotonic() + RETRY_AFTER
            return True

    def close(self) -> ServerProcess | None:
        """Close the slot; its server (if any) is the caller's to retire."""
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
            return server

    @property
    def last_used(self) -> float:
        with self._lock:
            return self._server.last_used if self._server is not None else 0.0

    @property
    def pid(self) -> int | None:
        with self._lock:
            server = self._server
        return server.process.pid if server is not None and server.alive else None


def _fits(directory: pathlib.Path) -> bool:
    return len(os.fsencode(directory / _LONGEST_SOCKET)) <= SOCKET_PATH_MAX


def _noexec(directory: pathlib.Path) -> bool:
    return bool(os.statvfs(directory).f_flag & os.ST_NOEXEC)


def _ready(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait for the server's ``ready`` line on its stdout."""
    stdout: IO[bytes] | None = process.stdout
    if stdout is None:
        return False
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([stdout], [], [], min(remaining, 1.0))
        if readable:
            line = stdout.readline()
            if not line:
                return False
            if line.startswith(b'ready'):
                text = line.decode(errors='replace').strip()
                if 'missing=-' not in text:
                    logger.info(f"Warm Ansible server: some preloads failed: {text}")
                return True
        elif process.poll() is not None:
            return False
    return False


def interpreter_script(python: str, socket: pathlib.Path) -> str:
    """
    The ``ansible_python_interpreter`` script: the client's ``python`` mode for the module
    server at ``socket``, the real ``python`` otherwise.
    """
    call = f"entry.python({str(socket)!r}, {python!r}, sys.argv[1:])"
    shebang = f"#!{python} -IS"
    if len(os.fsencode(shebang)) <= SHEBANG_MAX:
        return f"{shebang}\n{entry.code('client', call)}"
    # the kernel would cut the interpreter's path: let the shell start it
    words = [*entry.client(python), 'python', str(socket), python]
    quoted = ' '.join("'" + w.replace("'", "'\\''") + "'" for w in words)
    return f"#!/bin/sh\nexec {quoted} \"$@\"\n"


@dataclasses.dataclass
class _Usage:
    """Runs under way and when the last one ended: whether the servers are idle."""
    active: int = 0
    last_run: float = dataclasses.field(default_factory=time.monotonic)


def module_env(run_env: Mapping[str, str]) -> dict[str, str]:
    """The module server's environment: the operator's, with the runs' collections path
    (every run has the same one), so that the modules of those collections (the operator's
    own operator_sdk.util among them) can run in its children."""
    env = dict(os.environ)
    for key in ('ANSIBLE_COLLECTIONS_PATH', 'ANSIBLE_COLLECTIONS_PATHS'):
        if run_env.get(key):
            env[key] = run_env[key]
    return env


class Pool:
    """
    The warm servers of one operator process (thread-safe: runs call it from threads).

    ``directory`` holds the servers' logs (``*.log``: their stderr, never a run's output),
    the interpreter script and the playbook servers' compiled Jinja templates (``templates/``,
    :mod:`templates`); the sockets too, unless their paths would be too long for
    ``AF_UNIX`` there: then they go to a private directory under the temporary directory.
    The pool makes ``directory`` private to the user (mode 0700): whoever can reach a
    socket can have ansible-playbook run as the operator.

    Locks: :attr:`_lock` guards the pool's own fields (the slots by key, the retired
    servers, usage, the socket directory, closing) and is never held while a server
    starts up or stops; each :class:`Slot` guards its server with its own lock.
    """

    def __init__(self, directory: pathlib.Path, *, python: str = sys.executable,
                 idle_timeout: float = 0.0) -> None:
        self.directory = directory
        self.python = python
        self.idle_timeout = idle_timeout  # seconds without runs before servers stop; 0: never
        self._lock = threading.Lock()
        self._slots: dict[str, Slot] = {}  # MODULE_SLOT, or a playbook environment's key
        self._retired: list[ServerProcess] = []  # finishing their runs before they exit
        self._usage = _Usage()
        self._sockets: pathlib.Path | None = None
        self._own_sockets = False  # True: self._sockets is ours to delete
        self._noexec: bool | None = None  # whether scripts cannot run from self.directory
        self._closed = False
        self._reaper: threading.Thread | None = None
        self._stop_reaper = threading.Event()

    # --- what runs use ---

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Around a run: no server stops as idle while a run is under way."""
        with self._lock:
            self._usage.active += 1
        try:
            yield
        finally:
            with self._lock:
                self._usage.active -= 1
                self._usage.last_run = time.monotonic()

    def interpreter(self) -> str:
        """
        The ``ansible_python_interpreter`` that sends pipelined modules to the module
        server; the real interpreter if the pool is closed, has nowhere to write, or
        its directory does not allow running the script (``noexec``).
        """
        try:
            with self._lock:
                if self._closed:
                    return self.python
                sockets = self._socket_directory()
                if self._noexec is None:  # e.g. a hardened /tmp: the script could not run
                    self._noexec = _noexec(self.directory)
                    if self._noexec:
                        logger.warning(f"Warm Ansible servers: {self.directory} is mounted "
                                       f"noexec; modules run cold")
                if self._noexec:
                    return self.python
            path = self.directory / 'python'
            files.write_if_changed(path, interpreter_script(self.python, sockets / 'module.sock'),
                                   mode=0o700)
            return str(path)
        except OSError as e:
            logger.warning(f"Warm Ansible servers: cannot write the interpreter script ({e}); "
                           f"modules run cold")
            return self.python

    def command(self, command: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """ansible-runner's command, handed to a warm server when there is one."""
        if not command or os.path.basename(command[0]) != 'ansible-playbook':
            return list(command)
        try:
            server = self._playbook_server(env)
        except (OSError, subprocess.SubprocessError) as e:
            logger.warning(f"Warm Ansible server could not start ({e}); the run goes cold")
            server = None
        if server is None:
            return list(command)
        return [*entry.client(self.python), 'playbook', str(server.socket), '--', *command]

    def close(self) -> None:
        """Stop every server (idle ones at once; busy ones after :data:`STOP_TIMEOUT`)."""
        self._stop_reaper.set()
        with self._lock:
            self._closed = True
            slots = list(self._slots.values())
            self._slots.clear()
            servers, self._retired = self._retired, []
            sockets, own = self._sockets, self._own_sockets
        servers += [s for s in (slot.close() for slot in slots) if s is not None]
        for server in servers:
            server.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for server in servers:
            server.wait_stopped(deadline)
            server.close_stdout()
        if own and sockets is not None:
            shutil.rmtree(sockets, ignore_errors=True)

    @property
    def pids(self) -> list[int]:
        """Process ids of the servers that serve runs (not of those being retired)."""
        with self._lock:
            slots = list(self._slots.values())
        return [pid for pid in (slot.pid for slot in slots) if pid is not None]

    # --- files ---

    def _socket_directory(self) -> pathlib.Path:
        """Where the sockets go (called with the lock held); created on first use."""
        if self._sockets is None:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.directory.chmod(0o700)
            if _fits(self.directory.resolve()):
                self._sockets = self.directory.resolve()
            else:
                for base in dict.fromkeys([tempfile.gettempdir(), '/tmp']):  # noqa: S108
                    if _fits(pathlib.Path(base) / 'ansible-kopf-01234567'):
                        self._sockets = pathlib.Path(
                            tempfile.mkdtemp(prefix='ansible-kopf-', dir=base))
                        self._own_sockets = True
                        break
                else:
                    raise OSError(f"no directory short enough for sockets ({self.directory})")
        return self._sockets

    # --- servers ---

    def _start(self, slot: Slot) -> ServerProcess:
        log = (self.directory / f"{slot.socket.stem}.log").open('ab')
        try:
            process = subprocess.Popen(  # noqa: S603
                [*entry.server(self.python), '--flavour', slot.flavour,
                 '--socket', str(slot.socket), '--parent', str(os.getpid()),
                 *(['--templates', str(self.directory / TEMPLATES)]
                   if slot.flavour == wire.PLAYBOOK else [])],
                env=slot.env, cwd=self.directory, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        finally:
            log.close()
        return ServerProcess(slot.flavour, slot.socket, process)

    def _slot(self, key: str, flavour: 'wire.Flavour', socket: pathlib.Path,
              env: Mapping[str, str]) -> Slot:
        """The slot of ``key``, made if new (called with the lock held)."""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = Slot(flavour, socket, env)
        lost = slot.unreachable()
        if lost is not None:
            logger.warning(f"Warm Ansible {flavour} server lost its socket {socket}; "
                           f"starting another")
            self._retire(lost)
        return slot

    def _playbook_server(self, env: Mapping[str, str]) -> ServerProcess | None:
        wanted = wire.server_env(env)
        key = hashlib.sha256(repr(sorted(wanted.items())).encode()).hexdigest()[:16]
        with self._lock:
            if self._closed:
                return None
            self._retired = [s for s in self._retired if s.alive]
            sockets = self._socket_directory()
            module = self._slot(MODULE_SLOT, wire.MODULE, sockets / 'module.sock',
                                module_env(env))
            playbook = self._slot(key, wire.PLAYBOOK, sockets / f"playbook-{key}.sock", wanted)
            self._evict(keep=key)
            self._watch_idleness()
        servers = [(slot, slot.server(self._start)) for slot in (module, playbook)]
        for slot, server in servers:  # both import in parallel; wait for both
            if server is not None and not server.wait_ready():
                self._failed(slot, server)
        server = servers[1][1]
        if server is None or not server.ready:
            return None
        server.last_used = time.monotonic()
        return server

    def _failed(self, slot: Slot, server: ServerProcess) -> None:
        if not slot.failed(server):
            return
        logger.warning(f"Warm Ansible {server.flavour} server did not start; runs go "
                       f"cold for {RETRY_AFTER:.0f}s (see {self.directory})")
        server.terminate()
        server.wait_stopped(time.monotonic() + STOP_TIMEOUT)

    def _watch_idleness(self) -> None:
        """Start the thread that stops idle servers (called with the lock held), once."""
        if self.idle_timeout > 0 and self._reaper is None:
            self._reaper = threading.Thread(target=self._stop_when_idle, name='warm-idle',
                                            daemon=True)
            self._reaper.start()

    def _stop_when_idle(self) -> None:
        """Retire every server once no run has been under way for :attr:`idle_timeout`."""
        interval = min(max(self.idle_timeout / 4, 0.1), 30.0)
        while not self._stop_reaper.wait(interval):
            with self._lock:
                self._retired = [s for s in self._retired if s.alive]  # reaps the exited
                if self._closed or self._usage.active or not self._slots or \
                        time.monotonic() - self._usage.last_run < self.idle_timeout:
                    continue
                for slot in self._slots.values():
                    server = slot.close()
                    if server is not None:
                        self._retire(server)
                self._slots.clear()
            logger.info(f"Warm Ansible servers stopped: no run for {self.idle_timeout:g}s "
                        f"(the next run starts them again)")

    def _evict(self, keep: str) -> None:
        """
        Beyond :data:`MAX_SERVERS` playbook slots, retire the least recently used ones'
        servers (called with the lock held).
        """
        playbooks = [k for k in self._slots if k != MODULE_SLOT]
        while len(playbooks) > max(MAX_SERVERS, 1):
            key = min((k for k in playbooks if k != keep), key=lambda k: self._slots[k].last_used)
            playbooks.remove(key)
            server = self._slots.pop(key).close()
            if server is not None:
                self._retire(server)

    def _retire(self, server: ServerProcess) -> None:
        """Stop a server gracefully (called with the lock held): it finishes its runs."""
        server.terminate()
        self._retired.append(server)
