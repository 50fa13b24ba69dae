"""The Lease logic of ``--leader-elect`` (kube.leader_election.Elector) against an in-memory
CoordinationV1Api that answers as the API server does: the client's own models, the client's
own ``ApiException`` with 404 for a missing Lease and 409 for a create of an existing one or a
replace with a stale resourceVersion. Time is the test's clock, never the wall clock."""
import datetime
import threading
from typing import Any

import pytest
from kubernetes.client import V1Lease, V1LeaseSpec, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from ansible_kopf.kube import errors, leader_election

NAME, NAMESPACE = 'op-lock', 'ops'
HTTP_SERVER_ERROR = 500


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Leases:
    """One namespace's Leases, with the API server's optimistic concurrency."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.failing: int | None = None  # a status every call answers with

    def _fail(self) -> None:
        if self.failing is not None:
            raise ApiException(status=self.failing, reason='Internal Server Error')

    def _lease(self, body: dict[str, Any]) -> V1Lease:
        spec = body['spec']
        return V1Lease(
            metadata=V1ObjectMeta(name=body['metadata']['name'],
                                  resource_version=body['metadata']['resourceVersion']),
            spec=V1LeaseSpec(holder_identity=spec.get('holderIdentity'),
                             lease_duration_seconds=spec.get('leaseDurationSeconds'),
                             renew_time=_time(spec.get('renewTime')),
                             acquire_time=_time(spec.get('acquireTime')),
                             lease_transitions=spec.get('leaseTransitions')))

    def _store(self, body: dict[str, Any]) -> None:
        self.version += 1
        body = {**body, 'metadata': {**body['metadata'], 'resourceVersion': str(self.version)}}
        self.stored[body['metadata']['name']] = body

    def read_namespaced_lease(self, name: str, namespace: str) -> V1Lease:
        self._fail()
        if namespace != NAMESPACE or name not in self.stored:
            raise ApiException(status=404, reason='Not Found')
        return self._lease(self.stored[name])

    def create_namespaced_lease(self, namespace: str, body: dict[str, Any]) -> None:
        self._fail()
        if body['metadata']['name'] in self.stored:
            raise ApiException(status=409, reason='AlreadyExists')
        self._store(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self._fail()
        if body['metadata'].get('resourceVersion') != self.stored[name]['metadata']['resourceVersion']:
            raise ApiException(status=409, reason='Conflict')
        self._store(body)

    def renew_as(self, holder: str) -> None:
        """Another candidate's renewal: the record changes."""
        spec = self.stored[NAME]['spec']
        self._store({'metadata': {'name': NAME},
                     'spec': {**spec, 'holderIdentity': holder,
                              'renewTime': f"2026-01-01T00:00:{self.version % 60:02}.000000Z"}})


def _time(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.strptime(value, '%Y-%m-%dT%H:%M:%S.%fZ') if value else None


def elector(api: Leases, clock: Clock, identity: str) -> leader_election.Elector:
    return leader_election.Elector(api, leader_election.LeaseSettings(
        name=NAME, namespace=NAMESPACE, lease_duration=15.0, renew_deadline=10.0,
        retry_period=0.01, identity=identity), clock=clock)


def holder(api: Leases) -> str | None:
    return api.stored[NAME]['spec'].get('holderIdentity')


def test_a_missing_lease_is_created_held_by_the_candidate() -> None:
    api, clock = Leases(), Clock()
    assert elector(api, clock, 'a').try_acquire_or_renew()
    assert holder(api) == 'a'
    assert api.stored[NAME]['spec']['leaseTransitions'] == 0
    assert api.stored[NAME]['spec']['leaseDurationSeconds'] == 15


def test_a_held_lease_is_taken_only_after_a_whole_duration_unchanged_by_our_clock() -> None:
    api, clock = Leases(), Clock()
    assert elector(api, clock, 'a').try_acquire_or_renew()
    b = elector(api, clock, 'b')
    assert not b.try_acquire_or_renew()  # first seen now: held for a duration from now
    clock.now += 14.0
    assert not b.try_acquire_or_renew()
    clock.now += 2.0  # 16 s of an unchanged record: its holder stopped renewing
    assert b.try_acquire_or_renew()
    assert holder(api) == 'b'
    assert api.stored[NAME]['spec']['leaseTransitions'] == 1


def test_a_lease_its_holder_renews_is_never_taken() -> None:
    api, clock = Leases(), Clock()
    assert elector(api, clock, 'a').try_acquire_or_renew()
    b = elector(api, clock, 'b')
    for _ in range(10):
        assert not b.try_acquire_or_renew()
        clock.now += 10.0  # 100 s in all, but the record changes every 10 s
        api.renew_as('a')
    assert holder(api) == 'a'


def test_the_holder_renews_without_a_transition() -> None:
    api, clock = Leases(), Clock()
    a = elector(api, clock, 'a')
    assert a.try_acquire_or_renew()
    version = api.version
    clock.now += 100.0
    assert a.try_acquire_or_renew()
    assert api.version == version + 1 and holder(api) == 'a'
    assert api.stored[NAME]['spec']['leaseTransitions'] == 0


def test_a_write_that_lost_the_race_is_not_leading() -> None:
    api, clock = Leases(), Clock()
    a, b = elector(api, clock, 'a'), elector(api, clock, 'b')
    real_create = api.create_namespaced_lease

    def create_after_the_other(namespace: str, body: dict[str, Any]) -> None:
        real_create(namespace, {**body, 'spec': {**body['spec'], 'holderIdentity': 'b'}})
        real_create(namespace, body)  # ours comes second: 409

    api.create_namespaced_lease = create_after_the_other  # type: ignore[method-assign]
    assert not a.try_acquire_or_renew()
    api.create_namespaced_lease = real_create  # type: ignore[method-assign]

    real_read = api.read_namespaced_lease

    def read_then_renewed(name: str, namespace: str) -> V1Lease:
        lease = real_read(name, namespace)
        api.renew_as('b')  # b writes between our read and our replace
        return lease

    clock.now += 100.0
    api.read_namespaced_lease = read_then_renewed  # type: ignore[method-assign]
    assert b.try_acquire_or_renew() is False  # its own lease, but a stale resourceVersion: 409


def test_other_api_errors_are_typed_and_an_attempt_fails_quietly() -> None:
    api, clock = Leases(), Clock()
    api.failing = HTTP_SERVER_ERROR
    a = elector(api, clock, 'a')
    with pytest.raises(errors.ApiError) as raised:
        a.try_acquire_or_renew()
    assert raised.value.status == HTTP_SERVER_ERROR and type(raised.value) is errors.ApiError
    assert not a.acquire(stop=_set_after(3))  # tries, logs, never raises


def test_a_released_lease_is_taken_at_once() -> None:
    api, clock = Leases(), Clock()
    a, b = elector(api, clock, 'a'), elector(api, clock, 'b')
    assert a.acquire()
    assert not b.try_acquire_or_renew()
    a.release()
    assert holder(api) is None and api.stored[NAME]['spec']['leaseDurationSeconds'] == 1
    assert b.try_acquire_or_renew()  # no holder: no waiting for a duration
    assert holder(api) == 'b'
    a.release()  # no longer leading: leaves b's lease alone
    assert holder(api) == 'b'


def test_a_holder_that_cannot_renew_within_the_deadline_has_lost() -> None:
    api, clock = Leases(), Clock()
    a = elector(api, clock, 'a')
    assert a.acquire()
    lost = threading.Event()
    stop = threading.Event()
    api.failing = HTTP_SERVER_ERROR

    real_fail = api._fail

    def fail_and_tick() -> None:
        clock.now += 1.0  # each failed renewal: one second of the test's clock
        real_fail()

    api._fail = fail_and_tick  # type: ignore[method-assign]
    thread = a.keep(lost.set, stop)
    thread.join(timeout=30)
    stop.set()
    assert lost.is_set() and not a.leading  # after more than the 10 s deadline, not before
    assert clock.now - 1000.0 > 10.0


def _set_after(calls: int) -> threading.Event:
    """A stop event that reads as set after ``calls`` checks."""
    class Countdown(threading.Event):
        def __init__(self) -> None:
            super().__init__()
            self.left = calls

        def is_set(self) -> bool:
            self.left -= 1
            return self.left < 0

        def wait(self, timeout: float | None = None) -> bool:
            return self.is_set()

    return Countdown()
