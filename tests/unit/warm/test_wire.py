"""The frames between warm servers and their clients: marshalled dictionaries, descriptors alongside."""
import marshal
import os
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from ansible_kopf.warm import wire


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        yield left, right


def test_a_message_and_its_descriptors_arrive(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    read, write = os.pipe()
    message = {'argv': ['ansible-playbook', 'x.yml'], 'env': {'A': 'ü'}, 'big': 'x' * 3_000_000}
    sender = threading.Thread(target=wire.send, args=(left, message, [write]))
    sender.start()  # a message larger than the socket's buffer: read while it is sent
    received, fds = wire.receive(right)
    sender.join()
    os.close(write)
    assert received == message
    (duplicate,) = fds
    os.write(duplicate, b'through the copy')
    os.close(duplicate)
    assert os.read(read, 100) == b'through the copy'
    os.close(read)


def test_a_closed_peer_is_a_clean_end(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    wire.send(left, {'pid': 1})
    left.close()
    assert wire.receive(right) == ({'pid': 1}, [])
    assert wire.receive(right) == (None, [])


def test_a_message_cut_short_is_an_error(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    left.sendall(struct.pack('>I', 100) + b'{"a":')
    left.close()
    with pytest.raises(wire.WireError):
        wire.receive(right)


@pytest.mark.parametrize('data', [
    struct.pack('>I', wire.MAX_MESSAGE + 1),
    struct.pack('>I', 2) + b'[]',  # not marshal data
    struct.pack('>I', len(marshal.dumps([1]))) + marshal.dumps([1]),  # not a dictionary
])
def test_a_broken_message_closes_the_descriptors_it_brought(
        pair: tuple[socket.socket, socket.socket], data: bytes) -> None:
    left, right = pair
    read, write = os.pipe()
    left.sendmsg([data[:4]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack('i', write))])
    left.sendall(data[4:])
    os.close(write)
    with pytest.raises(wire.WireError):
        wire.receive(right)
    assert os.read(read, 1) == b''  # no writer left: the received copy was closed
    os.close(read)


def test_messages_are_marshalled_dictionaries(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    wire.send(left, {'status': 256})
    data = right.recv(100)
    assert marshal.loads(data[4:]) == {'status': 256}  # noqa: S302  (our own bytes)
    assert struct.unpack('>I', data[:4]) == (len(data) - 4,)
