"""
The message format between the warm Ansible servers (:mod:`forkserver`) and their clients
(:mod:`client`): dictionaries of strings, numbers and lists in :mod:`marshal` format
over a Unix stream socket, each framed by a 4-byte big-endian length, optionally carrying
file descriptors (``SCM_RIGHTS``) with the frame. Both ends are the same interpreter
(the pool starts servers with its own), and only the operator's user can reach a socket
(see :mod:`pool`), so marshal's lack of hardening against hostile input gives nobody
anything they could not do already.

:mod:`client` imports this module in a Python started with ``-I -S`` once per run and
once per module call, so it imports C modules only (``socket``, ``json``, ``typing``
and ``contextlib`` would cost ~40 ms of CPU per process on the 2-core machine).

Also part of the contract: what a server runs (its flavour, :data:`FLAVOURS`), and which
environment variables may differ between the runs one playbook server serves
(:data:`PER_RUN`). ansible-core reads its configuration from the
environment when it is imported, so the pool keys servers on the rest
(:func:`server_env`) and a child checks its request against it.
"""
import _socket
import marshal
import os
from _struct import Struct, calcsize

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping, Sequence
    from typing import Any, Final, Literal

    Flavour = Literal['playbook', 'module']

HEADER: 'Final' = Struct('>I')
MAX_FDS: 'Final' = 4
FD_SIZE: 'Final' = calcsize('i')  # a descriptor in SCM_RIGHTS data: a C int
MAX_MESSAGE: 'Final' = 256 * 1024 * 1024  # a module payload is a few MB at most
# What a warm server runs (its ``--flavour``): ``ansible-playbook`` for a run, or a module for
# a module call. The pool starts servers by it and a server checks requests by it. Strings,
# not an enum: the per-run client imports this module, and ``enum`` costs ~9 ms of CPU there.
PLAYBOOK: 'Final' = 'playbook'
MODULE: 'Final' = 'module'
FLAVOURS: 'Final' = (PLAYBOOK, MODULE)
# may differ between the runs of a server (the run's kubeconfig: its own proxy token)
PER_RUN: 'Final' = frozenset({'AWX_ISOLATED_DATA_DIR', 'K8S_AUTH_KUBECONFIG'})


def server_env(env: 'dict[str, str] | Mapping[str, str]') -> 'dict[str, str]':
    """The part of a run's environment a playbook server must have been started with."""
    return {k: v for k, v in env.items() if k not in PER_RUN}


class WireError(ConnectionError):
    """The peer closed the connection or sent something that is not a message."""


def send(sock: 'socket.socket', message: 'dict[str, Any]', fds: 'Sequence[int]' = ()) -> None:
    """Send one message; ``fds`` travel with its first byte."""
    data = marshal.dumps(message)
    frame = HEADER.pack(len(data)) + data
    if fds:
        ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, Struct(f"{len(fds)}i").pack(*fds))]
        sent = sock.sendmsg([frame[:HEADER.size]], ancillary)
        frame = frame[sent:]
    sock.sendall(frame)


def _exactly(sock: 'socket.socket', size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1024 * 1024))
        if not chunk:
            raise WireError('connection closed in the middle of a message')
        chunks.append(chunk)
        size -= len(chunk)
    return b''.join(chunks)


def receive(sock: 'socket.socket') -> 'tuple[dict[str, Any] | None, list[int]]':
    """
    One message and the descriptors sent with it; ``(None, [])`` at a clean end. The
    descriptors of a message that turns out to be broken are closed, not leaked.
    """
    fds: list[int] = []
    data, ancillary, _, _ = sock.recvmsg(HEADER.size, _socket.CMSG_SPACE(MAX_FDS * FD_SIZE))
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            count = len(payload) // FD_SIZE
            fds.extend(Struct(f"{count}i").unpack(payload[:count * FD_SIZE]))
    try:
        if not data:
            if fds:
                raise WireError('descriptors without a message')
            return None, []
        if len(data) < HEADER.size:
            data += _exactly(sock, HEADER.size - len(data))
        (size,) = HEADER.unpack(data)
        if size > MAX_MESSAGE:
            raise WireError(f"message of {size} bytes is too large")
        try:
            message = marshal.loads(_exactly(sock, size))  # noqa: S302  (see the docstring)
        except (EOFError, ValueError, TypeError) as e:
            raise WireError(f"not a message: {e}") from None
        if not isinstance(message, dict):
            raise WireError('a message must be a dictionary')
    except BaseException:
        for fd in fds:
            try:  # noqa: SIM105  (contextlib: ~8 ms more per run)
                os.close(fd)
            except OSError:
                pass
        raise
    return message, fds
