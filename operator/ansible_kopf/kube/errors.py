"""
The failures of the operator's own calls to the Kubernetes API, typed by what a caller does
about them: an object that is not there (:class:`NotFound`), a write that lost a race
(:class:`Conflict`), a call RBAC refuses (:class:`Forbidden`), a watch whose resource version
is too old (:class:`Gone`), anything else the server answered (:class:`ApiError`).

The operator reaches the API server three ways: the ``kubernetes`` client (:mod:`client`,
:mod:`leader_election`), aiohttp (:mod:`dependents`; :mod:`proxy` only forwards the runs'
requests, whose answers are the runs' own), and kopf, whose errors stay inside kopf. Each
caller turns what its way answered into these (:func:`for_status`, :func:`translated`), so
no caller reads a status code off an exception of unknown type.
"""
import contextlib
from collections.abc import Iterator
from typing import ClassVar, Final


class ApiError(Exception):
    """The API server answered a call with an error status (``status``; 0 if it gave none)."""
    STATUS: ClassVar[int] = 0  # the status a subclass stands for

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = self.STATUS if status is None else status


class Forbidden(ApiError):
    STATUS = 403


class NotFound(ApiError):
    STATUS = 404


class Conflict(ApiError):
    STATUS = 409


class Gone(ApiError):
    STATUS = 410


_BY_STATUS: Final[dict[int, type[ApiError]]] = {
    kind.STATUS: kind for kind in (Forbidden, NotFound, Conflict, Gone)}


def for_status(status: int, message: str) -> ApiError:
    """The error of an answer with this HTTP status (which is not a success)."""
    kind = _BY_STATUS.get(status, ApiError)
    return kind(f"{status}: {message}" if message else str(status), status=status)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Raise the ``kubernetes`` client's ``ApiException`` of the block as one of these."""
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415  (slow to import)
    try:
        yield
    except ApiException as e:
        status = e.status if isinstance(e.status, int) else 0
        raise for_status(status, str(e.reason or '')) from e
