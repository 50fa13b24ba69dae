"""
What ``.status`` should say, as pure functions from the current status to the minimal
merge patch (or ``None`` when nothing would change, so that nothing is written).

The vocabulary is the Operator SDK's: conditions ``Running``, ``Successful`` and
``Failure`` (``type``, ``status`` "True"/"False", ``reason``, ``message``,
``lastTransitionTime``), plus ``observedGeneration`` and ``ansibleResult``
(``ok``, ``changed``, ``skipped``, ``failures``: the SDK's fields without its completion
timestamp, which would change on every run). ``lastTransitionTime`` changes only when
a condition's ``status`` does.

After a run, the role's custom stats (``ansible.builtin.set_stats``) are merged into
``.status`` at the top level; they cannot overwrite ``conditions``,
``observedGeneration`` or ``ansibleResult``; ``null`` values are ignored. A role reports
conditions of its own (``Ready``, say) as the stats key ``conditions``: a list of
``type``/``status``/``reason``/``message`` mappings, merged by type like ours (with
``lastTransitionTime`` kept while the status stays); the three types above stay ours.

``Running`` is set when a run starts for a generation that ``.status`` does not report
yet (a new object, a spec change). Re-runs of a generation already reported (periodic,
resume, retries after a failure) do not flip it: that is what lets an unchanged
reconcile write nothing at all. Conditions of other types are kept as they are.
"""
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_kopf import constants


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


def _conditions(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    conditions = status.get('conditions')
    if not isinstance(conditions, list):
        return []
    return [c for c in conditions if isinstance(c, Mapping)]


def find(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for condition in _conditions(status):
        if condition.get('type') == type_:
            return condition
    return None


def _condition(type_: str, status: str, reason: str, message: str, *,
               previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    keep = previous is not None and previous.get('status') == status
    transition = previous.get('lastTransitionTime') if keep and previous else None
    return {
        'type': type_,
        'status': status,
        'reason': reason,
        'message': message,
        'lastTransitionTime': transition or now,
    }


def _merge_conditions(status: Mapping[str, Any], updates: Iterable[tuple[str, str, str, str]],
                      *, now: str) -> list[dict[str, Any]]:
    """Existing conditions with ours replaced in place (new ones appended), others kept."""
    result = [dict(c) for c in _conditions(status)]
    for type_, value, reason, message in updates:
        previous = find(status, type_)
        condition = _condition(type_, value, reason, message, previous=previous, now=now)
        for index, existing in enumerate(result):
            if existing.get('type') == type_:
                result[index] = condition
                break
        else:
            result.append(condition)
    return result


def role_conditions(custom_stats: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """The conditions a role reported in its stats, less the shim's own types and malformed ones."""
    reported = custom_stats.get('conditions')
    if not isinstance(reported, list):
        return []
    result = []
    for item in reported:
        if not isinstance(item, Mapping):
            continue
        type_, value = item.get('type'), item.get('status')
        if isinstance(value, bool):  # ansible-core < 2.19 turns a templated 'True' into true
            value = str(value)
        if (not isinstance(type_, str) or not type_ or type_ in constants.SHIM_CONDITIONS
                or value not in ('True', 'False', 'Unknown')):
            continue
        result.append((type_, str(value), str(item.get('reason') or type_),
                       str(item.get('message') or '')[:constants.STATUS_MESSAGE_LIMIT]))
    return result


def patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any] | None:
    """The top-level keys of ``new`` that differ from ``old``; ``None`` if there are none."""
    changed = {key: value for key, value in new.items() if old.get(key) != value}
    return changed or None


def reports(status: Mapping[str, Any], generation: int | None) -> bool:
    """Whether ``.status`` already reports a finished run of this generation."""
    return (status.get('observedGeneration') == generation
            and find(status, constants.CONDITION_RUNNING) is not None
            and (find(status, constants.CONDITION_SUCCESSFUL) is not None
                 or find(status, constants.CONDITION_FAILURE) is not None))


def running(status: Mapping[str, Any], *, generation: int | None,
            now: str) -> dict[str, Any] | None:
    """The patch that marks a run in progress, or ``None`` (see the module's docstring)."""
    if reports(status, generation):
        return None
    updates = [(constants.CONDITION_RUNNING, 'True', constants.REASON_RUNNING,
                constants.MESSAGE_RUNNING)]
    successful = find(status, constants.CONDITION_SUCCESSFUL)
    if successful is not None:  # as the SDK does: no longer known to be successful
        updates.append((constants.CONDITION_SUCCESSFUL, 'False',
                        str(successful.get('reason') or constants.REASON_RUNNING),
                        str(successful.get('message') or '')))
    return patch(status, {'conditions': _merge_conditions(status, updates, now=now)})


def finished(
        status: Mapping[str, Any],
        *,
        successful: bool,
        counts: Mapping[str, int],
        message: str | None,
        custom_stats: Mapping[str, Any],
        generation: int | None,
        now: str,
) -> dict[str, Any] | None:
    """The patch that reports a finished run, or ``None`` if the status already says so."""
    updates: list[tuple[str, str, str, str]]
    if successful:
        updates = [
            (constants.CONDITION_RUNNING, 'True', constants.REASON_SUCCESSFUL,
             constants.MESSAGE_AWAITING),
            (constants.CONDITION_SUCCESSFUL, 'True', constants.REASON_SUCCESSFUL,
             constants.MESSAGE_SUCCESSFUL),
            (constants.CONDITION_FAILURE, 'False', constants.REASON_SUCCESSFUL, ''),
        ]
    else:
        text = (message or 'unknown failure')[:constants.STATUS_MESSAGE_LIMIT]
        updates = [
            (constants.CONDITION_RUNNING, 'False', constants.REASON_FAILED,
             'Last reconciliation failed'),
            (constants.CONDITION_SUCCESSFUL, 'False', constants.REASON_FAILED, ''),
            (constants.CONDITION_FAILURE, 'True', constants.REASON_FAILED, text),
        ]
    new: dict[str, Any] = {
        key: value for key, value in custom_stats.items()
        if key not in constants.STATUS_RESERVED_KEYS and value is not None
    }
    updates.extend(role_conditions(custom_stats))
    new['conditions'] = _merge_conditions(status, updates, now=now)
    new['ansibleResult'] = {key: int(counts.get(key, 0))
                            for key in ('ok', 'changed', 'skipped', 'failures')}
    if generation is not None:
        new['observedGeneration'] = generation
    return patch(status, new)
