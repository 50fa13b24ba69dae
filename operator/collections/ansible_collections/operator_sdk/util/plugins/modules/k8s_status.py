#!/usr/bin/python
"""operator_sdk.util.k8s_status: set fields and conditions of an object's status.

Through the status subresource, with kubernetes.core's client and authentication options
(so a run of the operator reaches the API server the way its other tasks do). By default
the given fields are merged into the current status and conditions are merged by type; a
condition whose status changes gets ``lastTransitionTime`` now unless one is given, one
whose status stays keeps its time. Nothing is written when the status already holds what
was asked (``changed: false``). ``force: true`` replaces the whole status instead.
"""

import copy
import datetime
import re
from typing import Any

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule

DOCUMENTATION = r"""
module: k8s_status
short_description: Set the status of a Kubernetes object
description:
  - Writes fields and conditions into the status of an object whose kind has the status
    subresource, typically the custom resource a role reconciles.
options:
  api_version:
    description: The object's apiVersion.
    type: str
    default: v1
    aliases: [api, version]
  kind:
    description: The object's kind.
    type: str
    required: true
  name:
    description: The object's name.
    type: str
    required: true
  namespace:
    description: The object's namespace (none for a cluster-scoped kind).
    type: str
  status:
    description: Fields to set in the status. One of I(status) or I(conditions) is required.
    type: dict
  conditions:
    description:
      - Conditions to set, merged by C(type) into the current ones unless I(force) is true.
      - Each has C(type) and C(status) (C(True), C(False) or C(Unknown)), and may have
        C(reason) (one CamelCase word), C(message), C(lastTransitionTime) and
        C(lastHeartbeatTime) (RFC 3339 times).
    type: list
    elements: dict
  force:
    description: Replace the whole status (PUT) instead of merging into it.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
"""

EXAMPLES = r"""
- name: Report progress on the object being reconciled
  operator_sdk.util.k8s_status:
    api_version: "{{ ansible_operator_meta.api_version | default('apps.example.com/v1') }}"
    kind: Memcached
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      replicas: 3
    conditions:
      - type: Available
        status: "True"
        reason: AllReplicasReady
"""

RETURN = r"""
result:
  description: The object after the change (or as found, when nothing changed).
  returned: success
  type: dict
"""

CONDITION_KEYS = ('type', 'status', 'reason', 'message', 'lastTransitionTime',
                  'lastHeartbeatTime')
CAMEL_CASE = re.compile(r'^[A-Za-z][A-Za-z0-9]*$')
RFC3339 = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:\d\d)$')


def invalid_condition(index: int, condition: Any) -> str | None:
    """Why a condition cannot be written, or None."""
    if not isinstance(condition, dict):
        return f"conditions[{index}]: expected a mapping"
    if isinstance(condition.get('status'), bool):
        condition['status'] = 'True' if condition['status'] else 'False'
    unknown = sorted(set(condition) - set(CONDITION_KEYS))
    checks = [
        (bool(unknown), f"unknown field {', '.join(unknown)} (known: {', '.join(CONDITION_KEYS)})"),
        (not condition.get('type'), "'type' is required"),
        (condition.get('status') not in ('True', 'False', 'Unknown'),
         "'status' must be True, False or Unknown"),
        (bool(condition.get('reason')) and not CAMEL_CASE.match(str(condition.get('reason'))),
         "'reason' must be one CamelCase word"),
        *((bool(condition.get(key)) and not RFC3339.match(str(condition.get(key))),
           f"{key!r} must be an RFC 3339 time")
          for key in ('lastTransitionTime', 'lastHeartbeatTime')),
    ]
    return next((f"conditions[{index}]: {message}" for failed, message in checks if failed),
                None)


def contains(current: Any, wanted: Any) -> bool:
    """Whether ``current`` already holds ``wanted`` (mappings and lists as subsets)."""
    if isinstance(wanted, dict):
        return isinstance(current, dict) and all(contains(current.get(k), v)
                                                 for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(current, list) and all(any(contains(c, w) for c in current)
                                                 for w in wanted)
    return current == wanted


def merged_conditions(current: list[dict[str, Any]], wanted: list[dict[str, Any]],
                      now: str) -> list[dict[str, Any]]:
    result = copy.deepcopy(current)
    for condition in wanted:
        new = dict(condition)
        index = next((i for i, c in enumerate(result) if c.get('type') == new['type']), None)
        old = result[index] if index is not None else None
        if 'lastTransitionTime' not in new:
            same = old is not None and old.get('status') == new['status']
            new['lastTransitionTime'] = old.get('lastTransitionTime', now) if same and old else now
        if index is None:
            result.append(new)
        else:
            result[index] = new
    return result


def desired_status(current: dict[str, Any], wanted: dict[str, Any], *,
                   force: bool) -> dict[str, Any] | None:
    """The status to write, or None when ``current`` already is (holds) what is wanted."""
    now = datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')
    if force:
        if current == wanted:
            return None
        desired = dict(wanted)
        if 'conditions' in desired:
            desired['conditions'] = merged_conditions([], desired['conditions'], now)
        return desired
    compared = copy.deepcopy(wanted)
    for condition in compared.get('conditions') or []:
        condition.pop('lastTransitionTime', None)
    if contains(current, compared):
        return None
    desired = {**current, **wanted}
    if 'conditions' in wanted:
        desired['conditions'] = merged_conditions(current.get('conditions') or [],
                                                  wanted['conditions'], now)
    return desired


def main() -> None:
    spec: dict[str, Any] = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update({
        'api_version': {'type': 'str', 'default': 'v1', 'aliases': ['api', 'version']},
        'kind': {'type': 'str', 'required': True},
        'name': {'type': 'str', 'required': True},
        'namespace': {'type': 'str'},
        'status': {'type': 'dict'},
        'conditions': {'type': 'list', 'elements': 'dict'},
        'force': {'type': 'bool', 'default': False},
    })
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True,
                              required_one_of=[('status', 'conditions')])
    params = module.params
    wanted = dict(params['status'] or {})
    conditions = params['conditions'] or []
    if conditions and 'conditions' in wanted:
        module.fail_json(msg="conditions given both in 'status' and in 'conditions'")
    for index, condition in enumerate(conditions or wanted.get('conditions') or []):
        problem = invalid_condition(index, condition)
        if problem:
            module.fail_json(msg=problem)
    if conditions:
        wanted['conditions'] = conditions

    client = get_api_client(module=module)
    resource = client.resource(params['kind'], params['api_version'])
    if 'status' not in resource.subresources:
        module.fail_json(msg=f"{params['api_version']} {params['kind']} has no status "
                             f"subresource")
    instance = client.get(resource, name=params['name'],
                          namespace=params['namespace']).to_dict()
    desired = desired_status(instance.get('status') or {}, wanted, force=params['force'])
    if desired is None:
        module.exit_json(changed=False, result=instance)
    if module.check_mode:
        module.exit_json(changed=True, result={**instance, 'status': desired})
    if params['force']:
        body = {**instance, 'status': desired}
        result = client.replace(resource.status, body, name=params['name'],
                                namespace=params['namespace'])
    else:
        result = client.patch(resource.status, {'status': desired}, name=params['name'],
                              namespace=params['namespace'],
                              content_type='application/merge-patch+json')
    module.exit_json(changed=True, result=result.to_dict())


if __name__ == '__main__':
    main()
