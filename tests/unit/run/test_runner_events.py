"""run.runner_events: what is logged of ansible-runner's event stream and the outcome kept of it."""
import logging
from typing import Any

import pytest

from ansible_kopf.run import runner_events

CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified"


def collector(log_events: str = 'Tasks') -> runner_events.Collector:
    return runner_events.Collector(logger=logging.getLogger('test.ansible'), label='g/v1/K ns/n',
                            log_events=log_events)


def ok(task: str, changed: bool = False) -> dict[str, Any]:
    return {'event': 'runner_on_ok', 'event_data': {'task': task, 'res': {'changed': changed}}}


def failed(task: str, res: Any, ignore_errors: bool = False) -> dict[str, Any]:
    return {'event': 'runner_on_failed',
            'event_data': {'task': task, 'res': res, 'ignore_errors': ignore_errors}}


STATS = {
    'event': 'playbook_on_stats',
    'event_data': {
        'ok': {'localhost': 4}, 'changed': {'localhost': 2}, 'failures': {},
        'skipped': {'localhost': 1}, 'dark': {}, 'rescued': {}, 'ignored': {},
        'artifact_data': {'endpoint': 'db1.apps.svc', 'replicas': 3},
    },
}


def test_successful_run_keeps_counts_and_custom_stats() -> None:
    c = collector()
    for event in (ok('Create secret', changed=True), ok('Check'), STATS):
        assert c(event) is True  # events are still written to the artifacts
    outcome = c.outcome(status='successful', rc=0, ident='i1', duration=1.5)
    assert outcome.successful
    assert outcome.counts == runner_events.Counts(ok=4, changed=2, failures=0, skipped=1, unreachable=0)
    assert outcome.counts.as_dict() == {'ok': 4, 'changed': 2, 'failures': 0, 'skipped': 1,
                                        'unreachable': 0}
    assert outcome.custom_stats == {'endpoint': 'db1.apps.svc', 'replicas': 3}
    assert outcome.failed_task is None
    assert outcome.message is None


def test_failure_name_and_message_come_from_the_failed_event() -> None:
    c = collector()
    c(ok('Render'))
    c(failed('Apply the deployment', {'msg': 'Forbidden: cannot create deployments'}))
    c({'event': 'playbook_on_stats', 'event_data': {'ok': {'localhost': 1},
                                                    'failures': {'localhost': 1}}})
    outcome = c.outcome(status='failed', rc=2, ident='i2', duration=1.0)
    assert not outcome.successful
    assert outcome.failed_task == 'Apply the deployment'
    assert outcome.message == 'Forbidden: cannot create deployments'
    assert outcome.counts.failures == 1


def test_ignored_failures_are_not_the_reason() -> None:
    c = collector()
    c(failed('Optional probe', {'msg': 'not there'}, ignore_errors=True))
    c(failed('Real failure', {'msg': 'boom'}))
    outcome = c.outcome(status='failed', rc=2, ident='i', duration=0)
    assert (outcome.failed_task, outcome.message) == ('Real failure', 'boom')


def test_failures_in_a_successful_run_are_not_reported() -> None:
    c = collector()
    c(failed('Rescued step', {'msg': 'recovered by rescue'}))
    outcome = c.outcome(status='successful', rc=0, ident='i', duration=0)
    assert outcome.failed_task is None
    assert outcome.message is None


def test_unreachable_is_a_failure() -> None:
    c = collector()
    c({'event': 'runner_on_unreachable',
       'event_data': {'task': 'Connect', 'res': {'msg': 'host gone'}}})
    outcome = c.outcome(status='failed', rc=4, ident='i', duration=0)
    assert (outcome.failed_task, outcome.message) == ('Connect', 'host gone')


@pytest.mark.parametrize(('res', 'message'), [
    ({'msg': 'plain'}, 'plain'),
    ({'censored': CENSORED}, CENSORED),
    ({'stderr': 'command failed', 'rc': 1}, 'command failed'),
    ({'msg': ['a', 'b']}, '["a", "b"]'),
    ({'msg': 'One or more items failed',
      'results': [{'failed': False, 'msg': 'fine'}, {'failed': True, 'msg': 'item two broke'}]},
     'One or more items failed: item two broke'),
    ({}, runner_events.UNKNOWN_FAILURE),
    (None, runner_events.UNKNOWN_FAILURE),
])
def test_failure_message(res: Any, message: str) -> None:
    assert runner_events.failure_message(res) == message


def test_errors_outside_tasks_explain_a_failed_run() -> None:
    c = collector()
    c({'event': 'verbose', 'stdout': "[ERROR]: the role 'nope' was not found"})
    c({'event': 'verbose', 'stdout': 'some noise'})
    outcome = c.outcome(status='failed', rc=1, ident='i', duration=0)
    assert outcome.message == "[ERROR]: the role 'nope' was not found"
    assert outcome.failed_task is None


def test_a_failed_run_always_has_a_message() -> None:
    outcome = collector().outcome(status='timeout', rc=254, ident='i', duration=0)
    assert outcome.message == "ansible-playbook ended with status 'timeout', rc=254"


def test_tasks_are_logged_with_names_and_failures_as_warnings(
        caplog: pytest.LogCaptureFixture) -> None:
    c = collector()
    with caplog.at_level(logging.DEBUG, logger='test.ansible'):
        c(ok('Create secret', changed=True))
        c(ok('Check'))
        c({'event': 'runner_on_ok', 'event_data': {'task': 'Hidden', 'res': {'censored': CENSORED}}})
        c({'event': 'runner_on_skipped', 'event_data': {'task': 'Maybe'}})
        c(failed('Optional', {'msg': 'meh'}, ignore_errors=True))
        c(failed('Apply', {'msg': 'boom'}))
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        (logging.INFO, "[g/v1/K ns/n] task 'Create secret': changed"),
        (logging.INFO, "[g/v1/K ns/n] task 'Check': ok"),
        (logging.INFO, "[g/v1/K ns/n] task 'Hidden': done (no_log)"),
        (logging.DEBUG, "[g/v1/K ns/n] task 'Maybe': skipped"),
        (logging.INFO, "[g/v1/K ns/n] task 'Optional': failed (ignored)"),
        (logging.WARNING, "[g/v1/K ns/n] task 'Apply' failed: boom"),
    ]


def test_nothing_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    c = collector('Nothing')
    with caplog.at_level(logging.DEBUG, logger='test.ansible'):
        c(ok('Create'))
        c(failed('Apply', {'msg': 'boom'}))
        c.outcome(status='failed', rc=2, ident='i', duration=0)
    assert caplog.records == []


def test_everything_logs_the_printed_text(caplog: pytest.LogCaptureFixture) -> None:
    c = collector('Everything')
    with caplog.at_level(logging.DEBUG, logger='test.ansible'):
        c({'event': 'playbook_on_task_start', 'stdout': 'TASK [Create] ****',
           'event_data': {'task': 'Create'}})
        c({**ok('Create'), 'stdout': 'ok: [localhost]'})
    assert [r.getMessage() for r in caplog.records] == [
        '[g/v1/K ns/n] TASK [Create] ****',
        '[g/v1/K ns/n] ok: [localhost]',
    ]


def test_printed_text_of_censored_results_is_replaced_before_it_is_written(
        caplog: pytest.LogCaptureFixture) -> None:
    # ansible-core 2.19 prints a no_log failure's message even though `res` is censored.
    c = collector('Everything')
    event = {'event': 'runner_on_failed',
             'stdout': '[ERROR]: Task failed: Action failed: bad password hunter2',
             'event_data': {'task': 'Log in', 'res': {'censored': CENSORED}}}
    with caplog.at_level(logging.DEBUG, logger='test.ansible'):
        assert c(event) is True
    assert event['stdout'] == 'runner_on_failed: Log in: output hidden (no_log)'
    assert 'hunter2' not in caplog.text


@pytest.mark.parametrize(('res', 'expected'), [
    ({'censored': CENSORED}, True),
    ({'results': [{'ok': 1}, {'censored': CENSORED}]}, True),
    ({'msg': 'fine'}, False),
    ({'results': [{'msg': 'fine'}]}, False),
    (None, False),
])
def test_censored(res: Any, expected: bool) -> None:
    assert runner_events.censored(res) is expected


# An API server's refusal as kubernetes.core.k8s reported it on the local cluster (1.20), the
# body as the kubernetes client handed it over (JSON text, with its newline).
FORBIDDEN_BODY = (
    '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps'
    ' \\"web-config\\" is forbidden: User \\"system:serviceaccount:ns1:mysql-operator\\" cannot'
    ' get resource \\"configmaps\\" in API group \\"\\" in the namespace \\"ns1\\"",'
    '"reason":"Forbidden","details":{"name":"web-config","kind":"configmaps"},"code":403}\n')
FORBIDDEN = ('configmaps "web-config" is forbidden: User "system:serviceaccount:ns1:mysql-operator"'
             ' cannot get resource "configmaps" in API group "" in the namespace "ns1"'
             ' (Forbidden, HTTP 403)')
HEADERS = "HTTPHeaderDict({'Audit-Id': 'a1', 'Content-Type': 'application/json'})"


@pytest.mark.parametrize(('text', 'expected'), [
    # kubernetes.core.k8s: "Failed to <verb> object: <body>"
    (f"Failed to retrieve requested object: {FORBIDDEN_BODY}",
     f"Failed to retrieve requested object: {FORBIDDEN}"),
    # the same with a client that hands over bytes: their repr
    (f"Failed to create object: {FORBIDDEN_BODY.encode()!r}", f"Failed to create object: {FORBIDDEN}"),
    # kubernetes.core.k8s_info prints the dynamic client's exception: status line and headers dropped
    (f"Exception '403\nReason: Forbidden\nHTTP response headers: {HEADERS}\nHTTP response body: "
     f"{FORBIDDEN_BODY.encode()!r}\n' raised while trying to get resource using (name=None)",
     f"Exception '{FORBIDDEN}' raised while trying to get resource using (name=None)"),
    # the plain client's exception
    (f"(403)\nReason: Forbidden\nHTTP response headers: {HEADERS}\nHTTP response body: {FORBIDDEN_BODY}",
     FORBIDDEN),
    # a Status with only a message
    ('Failed to patch object: {"kind":"Status","message":"the server is shutting down"}',
     'Failed to patch object: the server is shutting down'),
    # not a Status, or not JSON: left as it is
    ('Failed: {"kind":"Pod","message":"x"} and {"kind": "Status"', 'Failed: {"kind":"Pod","message":"x"}'
     ' and {"kind": "Status"'),
    ("b'{not json}' Status b\"{", "b'{not json}' Status b\"{"),
    ('plain text', 'plain text'),
])
def test_api_errors_become_their_message(text: str, expected: str) -> None:
    assert runner_events.api_errors(text) == expected


def test_a_refused_request_is_the_run_s_message() -> None:
    c = collector()
    c(failed('Apply the ConfigMap', {'msg': f"Failed to retrieve requested object: {FORBIDDEN_BODY}",
                                     'reason': 'Forbidden', 'failed': True}))
    outcome = c.outcome(status='failed', rc=2, ident='i', duration=0)
    assert outcome.message == f"Failed to retrieve requested object: {FORBIDDEN}"
    looped = {'msg': 'One or more items failed',
              'results': [{'failed': True, 'msg': f"Failed to create object: {FORBIDDEN_BODY}"}]}
    assert runner_events.failure_message(looped) == f"One or more items failed: Failed to create object: {FORBIDDEN}"


def requeue(action: str, period: Any) -> dict[str, Any]:
    return {'event': 'runner_on_ok',
            'event_data': {'task': 'Look again', 'task_action': action,
                           'res': {'changed': False, 'period': period}}}


@pytest.mark.parametrize(('action', 'period', 'seconds'), [
    ('operator_sdk.util.requeue_after', '1m30s', 90.0),
    ('requeue_after', '5s', 5.0),
    ('operator_sdk.util.requeue_after', 'soon', None),  # not a duration: no requeue
    ('ansible.builtin.debug', '5s', None),  # another module's `period` means nothing
])
def test_requeue_after_is_read_from_its_task(action: str, period: Any, seconds: float | None) -> None:
    c = collector()
    c(requeue(action, period))
    assert c.outcome(status='successful', rc=0, ident='i', duration=1.0).requeue_after == seconds


def test_a_failed_run_is_not_requeued_by_its_request() -> None:
    c = collector()
    c(requeue('operator_sdk.util.requeue_after', '5s'))
    c(failed('Later task', {'msg': 'boom'}))
    assert c.outcome(status='failed', rc=2, ident='i', duration=1.0).requeue_after is None
