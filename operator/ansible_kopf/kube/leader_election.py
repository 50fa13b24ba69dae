"""
Leader election for the SDK's ``--leader-elect``: one operator of several reconciles, the
one that holds a ``coordination.k8s.io/v1`` Lease named ``--leader-election-id`` in
``--leader-election-namespace`` (in a pod, by default, the pod's own namespace).

The Lease is taken and kept as client-go's leader election does, so an SDK operator's
replicas and ours follow the same rules: a candidate takes a Lease that does not exist,
that has no holder (released), or whose record it has seen unchanged for a whole lease
duration (judged by this process's clock, never by the timestamps another host wrote);
the holder renews it every retry period. A holder that cannot renew within the renew
deadline has lost the lease: :meth:`Elector.keep` calls its ``lost`` callback, and the
operator stops (as controller-runtime's manager does), so that two operators never
reconcile at once for longer than that. A holder that stops cleanly releases the Lease
(no holder, a one-second duration) so that a successor takes over at once.

Blocking calls, in the operator's main thread before kopf starts (:meth:`Elector.acquire`)
and in a thread of their own afterwards (:meth:`Elector.keep`): kopf's event loop is never
involved, and nothing here imports kopf.
"""
import dataclasses
import datetime
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from ansible_kopf import constants
from ansible_kopf.kube import errors

logger = logging.getLogger('ansible_kopf.kube.leader_election')

NAMESPACE_FILE: Final = '/var/run/secrets/kubernetes.io/serviceaccount/namespace'


@dataclasses.dataclass(frozen=True)
class LeaseSettings:
    name: str  # the Lease's name (--leader-election-id)
    namespace: str
    lease_duration: float = constants.LEASE_DURATION  # seconds
    renew_deadline: float = constants.RENEW_DEADLINE
    retry_period: float = constants.RETRY_PERIOD
    identity: str = dataclasses.field(  # this candidate's, unique per process
        default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4()}", compare=False)


def pod_namespace() -> str | None:
    """The namespace of the pod this process runs in, if it runs in one."""
    try:
        with open(NAMESPACE_FILE, encoding='utf-8') as file:
            return file.read().strip() or None
    except OSError:
        return None


def _now() -> str:
    """A MicroTime, as the API server writes them."""
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


class Elector:
    """One candidate for one Lease; ``api`` is a ``kubernetes.client.CoordinationV1Api``."""

    def __init__(self, api: Any, settings: LeaseSettings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._api = api
        self.settings = settings
        self._clock = clock
        self._observed: tuple[Any, ...] | None = None  # the holder's record as last seen
        self._observed_at = 0.0
        self.leading = False

    def try_acquire_or_renew(self) -> bool:
        """One attempt: whether this candidate holds the Lease afterwards."""
        s = self.settings
        now = _now()
        try:
            with errors.translated():
                lease = self._api.read_namespaced_lease(s.name, s.namespace)
        except errors.NotFound:
            body = {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                    'metadata': {'name': s.name, 'namespace': s.namespace},
                    'spec': {'holderIdentity': s.identity,
                             'leaseDurationSeconds': round(s.lease_duration),
                             'acquireTime': now, 'renewTime': now, 'leaseTransitions': 0}}
            try:
                with errors.translated():
                    self._api.create_namespaced_lease(s.namespace, body)
            except errors.Conflict:  # another candidate was first
                return False
            self._observed, self._observed_at = None, self._clock()
            return True
        spec = lease.spec
        holder = spec.holder_identity or ''
        record = (holder, spec.lease_duration_seconds, spec.renew_time, spec.acquire_time,
                  spec.lease_transitions)
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        duration = spec.lease_duration_seconds or s.lease_duration
        if holder and holder != s.identity and self._clock() < self._observed_at + duration:
            return False  # held, and renewed within a lease duration of our seeing it
        mine = holder == s.identity
        transitions = spec.lease_transitions or 0
        acquired = spec.acquire_time.strftime('%Y-%m-%dT%H:%M:%S.%fZ') \
            if mine and spec.acquire_time else now
        body = {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                'metadata': {'name': s.name, 'namespace': s.namespace,
                             'resourceVersion': lease.metadata.resource_version},
                'spec': {'holderIdentity': s.identity,
                         'leaseDurationSeconds': round(s.lease_duration),
                         'acquireTime': acquired, 'renewTime': now,
                         'leaseTransitions': transitions if mine else transitions + 1}}
        try:
            with errors.translated():
                self._api.replace_namespaced_lease(s.name, s.namespace, body)
        except errors.Conflict:  # written by another since we read it
            return False
        if not mine:
            logger.info("took over Lease %s/%s from %r", s.namespace, s.name, holder or None)
        return True

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except Exception as e:  # the API server unreachable, say: not this time
            logger.warning("Lease %s/%s: %s", self.settings.namespace, self.settings.name,
                           str(e).splitlines()[0] if str(e) else type(e).__name__)
            return False

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Block until this candidate holds the Lease (True) or ``stop`` is set (False)."""
        s = self.settings
        logger.info("waiting to lead: Lease %s/%s, identity %s", s.namespace, s.name, s.identity)
        told = False
        while not (stop is not None and stop.is_set()):
            if self._attempt():
                self.leading = True
                logger.info("leading: holds Lease %s/%s", s.namespace, s.name)
                return True
            if not told and self._observed is not None:
                logger.info("Lease %s/%s is held by %s; standing by", s.namespace, s.name,
                            self._observed[0])
                told = True
            if stop is not None:
                stop.wait(s.retry_period)
            else:
                time.sleep(s.retry_period)
        return False

    def keep(self, lost: Callable[[], None], stop: threading.Event) -> threading.Thread:
        """Renew every retry period in a daemon thread until ``stop`` is set; call ``lost``
        (once) when a renew deadline passes without a successful renewal."""
        def renew() -> None:
            renewed = self._clock()
            while not stop.wait(self.settings.retry_period):
                if self._attempt():
                    renewed = self._clock()
                elif self._clock() - renewed > self.settings.renew_deadline:
                    self.leading = False
                    logger.error("leader election lost: Lease %s/%s not renewed for %.0f s",
                                 self.settings.namespace, self.settings.name,
                                 self.settings.renew_deadline)
                    lost()
                    return
        thread = threading.Thread(target=renew, name='leader-election', daemon=True)
        thread.start()
        return thread

    def release(self) -> None:
        """Give the Lease up, if this candidate holds it: no holder, a 1 s duration."""
        if not self.leading:
            return
        self.leading = False
        s = self.settings
        try:
            lease = self._api.read_namespaced_lease(s.name, s.namespace)
            if (lease.spec.holder_identity or '') != s.identity:
                return
            now = _now()
            self._api.replace_namespaced_lease(s.name, s.namespace, {
                'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                'metadata': {'name': s.name, 'namespace': s.namespace,
                             'resourceVersion': lease.metadata.resource_version},
                'spec': {'leaseDurationSeconds': 1, 'acquireTime': now, 'renewTime': now,
                         'leaseTransitions': lease.spec.lease_transitions or 0}})
            logger.info("released Lease %s/%s", s.namespace, s.name)
        except Exception as e:  # it expires by itself
            logger.warning("could not release Lease %s/%s: %s", s.namespace, s.name, e)


def stop_self(grace: float) -> None:
    """What losing the lease does: SIGTERM to this process (kopf stops, cancelling runs),
    and its end after ``grace`` seconds if it has not ended by then."""
    import signal  # noqa: PLC0415
    timer = threading.Timer(grace, lambda: os._exit(1))
    timer.daemon = True
    timer.start()
    os.kill(os.getpid(), signal.SIGTERM)
