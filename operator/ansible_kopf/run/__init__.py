"""
One ansible-runner run of a role or playbook, from its turn to its outcome.

    concurrency      who may run when (global, per-kind and per-object bounds)
    runner           one run: its files, variables and environment, through ansible-runner
    launchers        how the run's ``ansible-playbook`` process starts: cold, or forked by a
                     warm server (:mod:`ansible_kopf.warm`)
    runner_events    ansible-runner's event stream: what is logged, the run's outcome
    summary          the reconcile summary line, for people and for programs

Imports: :mod:`ansible_kopf.sdk`, :mod:`ansible_kopf.warm`, :mod:`ansible_kopf.constants`
and each other, never the API side (``make lint`` checks it).
"""
