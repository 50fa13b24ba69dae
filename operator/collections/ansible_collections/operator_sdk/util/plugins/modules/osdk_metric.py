#!/usr/bin/python
"""operator_sdk.util.osdk_metric: create or update a Prometheus metric of the operator.

The module validates its arguments and returns them; the operator reads the task's result
(ansible_kopf.run.runner_events) and updates the metric, which its /metrics endpoint then serves.
"""

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: osdk_metric
short_description: Create or update a metric the operator serves at /metrics
description:
  - Exactly one of I(counter), I(gauge), I(histogram) or I(summary) says what to do.
options:
  name:
    description: The metric's name (letters, digits, underscores and colons).
    type: str
    required: true
  description:
    description: Its help text.
    type: str
    required: true
  counter:
    description: C(increment) (true) or C(add) (a number >= 0).
    type: dict
  gauge:
    description: >-
      C(set), C(add), C(subtract) (numbers), C(increment), C(decrement) or
      C(set_to_current_time) (true).
    type: dict
  histogram:
    description: C(observe) (a number).
    type: dict
  summary:
    description: C(observe) (a number).
    type: dict
"""

EXAMPLES = r"""
- name: Count the backups taken
  operator_sdk.util.osdk_metric:
    name: backups_taken
    description: Backups taken by the role
    counter:
      increment: true
"""

RETURN = r"""
name:
  description: The metric's name, as given (with the other arguments).
  returned: success
  type: str
"""

KINDS = ('counter', 'gauge', 'histogram', 'summary')


def main() -> None:
    number = {'type': 'float'}
    flag = {'type': 'bool'}
    module = AnsibleModule(
        argument_spec={
            'name': {'type': 'str', 'required': True},
            'description': {'type': 'str', 'required': True},
            'counter': {'type': 'dict', 'options': {'increment': flag, 'add': number}},
            'gauge': {'type': 'dict', 'options': {
                'set': number, 'add': number, 'subtract': number, 'increment': flag,
                'decrement': flag, 'set_to_current_time': flag}},
            'histogram': {'type': 'dict', 'options': {'observe': number}},
            'summary': {'type': 'dict', 'options': {'observe': number}},
        },
        required_one_of=[KINDS], mutually_exclusive=[KINDS], supports_check_mode=True)
    counter = module.params['counter'] or {}
    if (counter.get('add') or 0) < 0:
        module.fail_json(msg='counter.add: a counter only goes up (expected a number >= 0)')
    module.exit_json(changed=False, **{k: v for k, v in module.params.items()
                                       if v is not None})


if __name__ == '__main__':
    main()
