"""
Who may run when: at most N ansible runs in the process, at most
``maxConcurrentReconciles`` runs per kind, and never two runs for the same object
(kopf's handlers and requeued runs of one object may be due at the same time).

The object lock is taken first, so that a run waiting for its own object does not hold
a process-wide slot. Object locks are dropped when nobody holds or waits for them,
so memory does not grow with the number of objects ever seen.
"""
import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable


class Throttle:

    def __init__(self, max_runs: int) -> None:
        self._runs = asyncio.Semaphore(max_runs)
        self._kinds: dict[Hashable, asyncio.Semaphore] = {}
        self._objects: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    def kind_semaphore(self, kind: Hashable, limit: int) -> asyncio.Semaphore:
        if kind not in self._kinds:
            self._kinds[kind] = asyncio.Semaphore(limit)
        return self._kinds[kind]

    @property
    def objects_tracked(self) -> int:
        return len(self._objects)

    @contextlib.asynccontextmanager
    async def _object(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._objects.get(key, (asyncio.Lock(), 0))
        self._objects[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._objects[key]
            if users <= 1:
                del self._objects[key]
            else:
                self._objects[key] = (lock, users - 1)

    @contextlib.asynccontextmanager
    async def hold(self, *, obj: Hashable, kind: Hashable, kind_limit: int) -> AsyncIterator[None]:
        """Wait for the object, then for the kind, then for a process-wide slot."""
        async with self._object(obj), self.kind_semaphore(kind, kind_limit), self._runs:
            yield
