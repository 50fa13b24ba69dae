"""sdk.status: the minimal .status patch after a run, and none when nothing changes."""
import copy
from typing import Any

from ansible_kopf.sdk import status

T0 = '2026-01-01T00:00:00Z'
T1 = '2026-01-01T00:05:00Z'
T2 = '2026-01-01T00:10:00Z'
COUNTS = {'ok': 5, 'changed': 2, 'failures': 0, 'skipped': 1, 'unreachable': 0}


def apply(current: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    """What the API server makes of a merge patch on .status (top-level keys replaced)."""
    return {**current, **(patch or {})}


def conditions_by_type(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c['type']: c for c in st['conditions']}


def succeed(current: dict[str, Any], *, now: str, generation: int = 1,
            custom: dict[str, Any] | None = None,
            counts: dict[str, int] | None = None) -> dict[str, Any] | None:
    return status.finished(current, successful=True, counts=counts or COUNTS, message=None,
                           custom_stats=custom or {}, generation=generation, now=now)


def fail(current: dict[str, Any], *, now: str, message: str = 'boom',
         generation: int = 1) -> dict[str, Any] | None:
    return status.finished(current, successful=False, counts=COUNTS, message=message,
                           custom_stats={}, generation=generation, now=now)


def test_first_run_marks_running() -> None:
    patch = status.running({}, generation=1, now=T0)
    assert patch == {'conditions': [{
        'type': 'Running', 'status': 'True', 'reason': 'Running',
        'message': 'Running reconciliation', 'lastTransitionTime': T0,
    }]}


def test_success_sets_the_sdk_conditions_result_and_generation() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    patch = succeed(st, now=T1)
    assert patch is not None
    st = apply(st, patch)
    conditions = conditions_by_type(st)
    assert conditions['Running'] == {
        'type': 'Running', 'status': 'True', 'reason': 'Successful',
        'message': 'Awaiting next reconciliation', 'lastTransitionTime': T0}  # still True
    assert conditions['Successful'] == {
        'type': 'Successful', 'status': 'True', 'reason': 'Successful',
        'message': 'Last reconciliation succeeded', 'lastTransitionTime': T1}
    assert conditions['Failure']['status'] == 'False'
    assert st['ansibleResult'] == {'ok': 5, 'changed': 2, 'skipped': 1, 'failures': 0}
    assert st['observedGeneration'] == 1


def test_unchanged_reconcile_writes_nothing() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    st = apply(st, succeed(st, now=T1, custom={'endpoint': 'db1.apps'}))
    snapshot = copy.deepcopy(st)
    # A periodic re-run of the same generation: no Running mark, no final write.
    assert status.running(st, generation=1, now=T2) is None
    assert succeed(st, now=T2, custom={'endpoint': 'db1.apps'}) is None
    assert st == snapshot


def test_failure_then_retries_with_the_same_error_write_nothing_more() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    patch = fail(st, now=T1, message='cannot reach the API')
    assert patch is not None
    st = apply(st, patch)
    conditions = conditions_by_type(st)
    assert conditions['Failure'] == {
        'type': 'Failure', 'status': 'True', 'reason': 'Failed',
        'message': 'cannot reach the API', 'lastTransitionTime': T1}
    assert conditions['Running']['status'] == 'False'
    assert conditions['Successful']['status'] == 'False'
    assert status.running(st, generation=1, now=T2) is None
    assert fail(st, now=T2, message='cannot reach the API') is None
    # A different error is a change of message, not a transition.
    patch = fail(st, now=T2, message='another error')
    assert patch is not None
    failure = conditions_by_type(apply(st, patch))['Failure']
    assert failure['message'] == 'another error'
    assert failure['lastTransitionTime'] == T1


def test_transition_times_change_only_with_the_status() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    st = apply(st, succeed(st, now=T0))
    # A spec change: generation 2 is not reported yet, so Running is marked again.
    patch = status.running(st, generation=2, now=T1)
    assert patch is not None
    st = apply(st, patch)
    conditions = conditions_by_type(st)
    assert conditions['Running']['reason'] == 'Running'
    assert conditions['Running']['lastTransitionTime'] == T0  # was True, still True
    assert conditions['Successful']['status'] == 'False'
    assert conditions['Successful']['lastTransitionTime'] == T1  # True -> False
    st = apply(st, succeed(st, now=T2, generation=2))
    conditions = conditions_by_type(st)
    assert conditions['Successful']['lastTransitionTime'] == T2  # False -> True
    assert conditions['Failure']['lastTransitionTime'] == T0  # False all along
    assert st['observedGeneration'] == 2


def test_patch_is_minimal() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    st = apply(st, succeed(st, now=T0))
    # Only the run counts differ: only ansibleResult is patched.
    patch = succeed(st, now=T1, counts={**COUNTS, 'changed': 0})
    assert patch == {'ansibleResult': {'ok': 5, 'changed': 0, 'skipped': 1, 'failures': 0}}


def test_custom_stats_are_merged_at_top_level_but_cannot_override_ours() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    patch = succeed(st, now=T1, custom={
        'endpoint': 'db1.apps.svc:3306',
        'backup': {'last': 'ok'},
        'conditions': [{'type': 'Successful', 'status': 'False', 'reason': 'Hacked'},
                       {'type': 'Failure', 'status': 'True'}, 'not a mapping',
                       {'type': 'Odd', 'status': 'yes'}],
        'observedGeneration': 99,
        'ansibleResult': 'mine',
        'ignored': None,
    })
    assert patch is not None
    st = apply(st, patch)
    assert st['endpoint'] == 'db1.apps.svc:3306'
    assert st['backup'] == {'last': 'ok'}
    assert st['observedGeneration'] == 1
    assert {c['type'] for c in st['conditions']} == {'Running', 'Successful', 'Failure'}
    assert isinstance(st['ansibleResult'], dict)
    assert 'ignored' not in st
    assert conditions_by_type(st)['Successful']['status'] == 'True'
    assert conditions_by_type(st)['Failure']['status'] == 'False'


def test_a_role_reports_conditions_of_its_own() -> None:
    st = apply({}, status.running({}, generation=1, now=T0))
    ready = {'type': 'Ready', 'status': 'False', 'reason': 'ServerStarting', 'message': '0 of 1 ready'}
    st = apply(st, succeed(st, now=T1, custom={'conditions': [ready]}))
    assert conditions_by_type(st)['Ready'] == {**ready, 'lastTransitionTime': T1}
    # the same report changes nothing (an unchanged object writes nothing)
    assert succeed(st, now=T2, custom={'conditions': [ready]}) is None
    # a new reason with the same status keeps the transition time; a new status moves it
    starting = {**ready, 'reason': 'CredentialsRejected', 'message': 'access denied'}
    st = apply(st, succeed(st, now=T2, custom={'conditions': [starting]}))
    assert conditions_by_type(st)['Ready']['lastTransitionTime'] == T1
    assert conditions_by_type(st)['Ready']['reason'] == 'CredentialsRejected'
    up = {'type': 'Ready', 'status': 'True', 'reason': 'LoginAccepted', 'message': ''}
    st = apply(st, succeed(st, now=T2, custom={'conditions': [up]}))
    assert conditions_by_type(st)['Ready']['lastTransitionTime'] == T2
    # a failed run carries no stats: the role's condition stays as it was
    st = apply(st, fail(st, now=T2))
    assert conditions_by_type(st)['Ready']['status'] == 'True'


def test_foreign_conditions_and_keys_are_kept() -> None:
    foreign = {'type': 'Ready', 'status': 'True', 'reason': 'PodsReady', 'message': '',
               'lastTransitionTime': T0}
    st = {'conditions': [foreign], 'phase': 'Running'}
    patch = status.running(st, generation=1, now=T1)
    assert patch is not None
    assert patch['conditions'][0] == foreign
    assert 'phase' not in patch  # untouched keys are not part of the patch
    st = apply(st, patch)
    st = apply(st, succeed(st, now=T1))
    assert st['conditions'][0] == foreign
    assert st['phase'] == 'Running'


def test_long_failure_messages_are_capped() -> None:
    patch = fail({}, now=T0, message='x' * 10_000)
    assert patch is not None
    assert len(conditions_by_type(patch)['Failure']['message']) == 4096


def test_odd_existing_status_is_tolerated() -> None:
    assert status.running({'conditions': 'garbage'}, generation=1, now=T0) is not None
    patch = succeed({'conditions': ['garbage', {'type': 'Running'}]}, now=T0)
    assert patch is not None
    assert [c['type'] for c in patch['conditions']] == ['Running', 'Successful', 'Failure']


def test_now_is_rfc3339_utc() -> None:
    value = status.now()
    assert len(value) == 20
    assert value.endswith('Z')
    assert value[10] == 'T'


def test_a_condition_status_templated_to_a_boolean_counts_as_its_word() -> None:
    """ansible-core before 2.19 turns a template that renders "True" into the boolean
    true, so a role's ``status: "{{ 'True' if ready else 'False' }}"`` arrives as a bool."""
    st = apply({}, status.running({}, generation=1, now=T0))
    up = {'type': 'Ready', 'status': True, 'reason': 'LoginAccepted', 'message': ''}
    st = apply(st, succeed(st, now=T1, custom={'conditions': [up]}))
    assert conditions_by_type(st)['Ready']['status'] == 'True'
    down = {**up, 'status': False, 'reason': 'ServerStarting'}
    st = apply(st, succeed(st, now=T2, custom={'conditions': [down]}))
    assert conditions_by_type(st)['Ready']['status'] == 'False'
