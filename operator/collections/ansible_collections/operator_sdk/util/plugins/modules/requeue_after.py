#!/usr/bin/python
"""operator_sdk.util.requeue_after: ask the operator to run the role for this object again.

The module only validates and returns the period; the operator reads it from the task's
result (ansible_kopf.run.runner_events) and schedules the next run of the object after it.
"""

import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: requeue_after
short_description: Run the role for the current object again after a delay
description:
  - The operator running the role reads C(period) from this task's result and reconciles
    the object again once it has passed (in addition to events and the reconcile period).
options:
  time:
    description: A Go duration made of hours, minutes and seconds, such as C(30s) or C(1h30m).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Look again in five minutes
  operator_sdk.util.requeue_after:
    time: 5m
"""

RETURN = r"""
period:
  description: The delay, as given.
  returned: success
  type: str
"""

DURATION = re.compile(r'^(?:\d+(?:\.\d+)?[hms])+$')


def main() -> None:
    module = AnsibleModule(argument_spec={'time': {'type': 'str', 'required': True}},
                           supports_check_mode=True)
    period = module.params['time'].strip()
    if not DURATION.match(period):
        module.fail_json(msg=f"time={period!r}: expected a duration such as 30s, 5m or 1h30m")
    module.exit_json(changed=False, period=period)


if __name__ == '__main__':
    main()
