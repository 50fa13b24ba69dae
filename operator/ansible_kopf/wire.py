"""
The message format between the warm Ansible servers (:mod:`zygote`) and their clients
(:mod:`launch`): JSON objects over a Unix stream socket, each framed by a 4-byte
big-endian length, optionally carrying file descriptors (``SCM_RIGHTS``) with the frame.

Standard library only: :mod:`launch` imports this module in a Python started with
``-I -S`` (no site-packages), to keep the per-run client cheap.
"""
import array
import contextlib
import json
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any, Final

HEADER: Final = struct.Struct('>I')
MAX_FDS: Final = 4
MAX_MESSAGE: Final = 256 * 1024 * 1024  # a module payload is a few MB at most


class WireError(ConnectionError):
    """The peer closed the connection or sent something that is not a message."""


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one message; ``fds`` travel with its first byte."""
    data = json.dumps(message, separators=(',', ':')).encode()
    frame = HEADER.pack(len(data)) + data
    if fds:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', fds).tobytes())]
        sent = sock.sendmsg([frame[:HEADER.size]], ancillary)
        frame = frame[sent:]
    sock.sendall(frame)


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1024 * 1024))
        if not chunk:
            raise WireError('connection closed in the middle of a message')
        chunks.append(chunk)
        size -= len(chunk)
    return b''.join(chunks)


def receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """
    One message and the descriptors sent with it; ``(None, [])`` at a clean end. The
    descriptors of a message that turns out to be broken are closed, not leaked.
    """
    fds = array.array('i')
    data, ancillary, _, _ = sock.recvmsg(HEADER.size, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
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
        message = json.loads(_exactly(sock, size))
        if not isinstance(message, dict):
            raise WireError('a message must be a JSON object')
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return message, list(fds)
