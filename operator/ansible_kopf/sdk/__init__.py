"""
The Operator SDK's contract, as an SDK user's files and roles see it; nothing here talks to
the API server or starts a run.

    watches      ``watches.yaml``: its keys, defaults and checks, one :class:`watches.Watch`
                 per entry
    extravars    the variables a run gets (``ansible_operator_meta``, the spec, ``_<group>_<kind>``)
    casing       the SDK's snake_case conversion of spec keys
    durations    Go durations (``reconcilePeriod``, ``requeue_after``)
    status       what ``.status`` says after a run (conditions, minimal merge patches)
    metrics      the ``ansible_operator_*`` and ``osdk_metric`` metrics and their endpoint

Imports: :mod:`ansible_kopf.constants` and each other only (``make lint`` checks it).
"""
