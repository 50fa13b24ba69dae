"""kube.errors: one typed error per status a caller acts on, from either way to the API."""
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_kopf.kube import errors


@pytest.mark.parametrize(('status', 'kind'), [(403, errors.Forbidden), (404, errors.NotFound),
                                              (409, errors.Conflict), (410, errors.Gone),
                                              (500, errors.ApiError), (422, errors.ApiError)])
def test_a_status_becomes_its_error(status: int, kind: type[errors.ApiError]) -> None:
    error = errors.for_status(status, 'the message')
    assert type(error) is kind and error.status == status
    assert str(error) == f"{status}: the message"


def test_the_clients_exception_is_raised_as_the_typed_error_with_its_cause() -> None:
    with pytest.raises(errors.Conflict) as raised, errors.translated():
        raise ApiException(status=409, reason='Conflict')
    assert isinstance(raised.value.__cause__, ApiException)
    with pytest.raises(errors.ApiError) as other, errors.translated():
        raise ApiException(status=0, reason='connection refused')
    assert other.value.status == 0


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), errors.translated():
        raise KeyError('x')
