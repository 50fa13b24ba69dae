"""
The variables a role or playbook receives for one object, exactly as the Operator SDK
builds them, so that a role written for one runs under the other:

* every spec key at the top level, in snake_case when ``snakeCaseParameters`` (nested
  keys too, see :mod:`casing`);
* ``ansible_operator_meta``: ``{name, namespace}``;
* ``_<group>_<kind>``: the whole object, and ``_<group>_<kind>_spec``: the raw spec
  (``.`` and ``-`` in the group become ``_``, the kind is lower-cased:
  ``_otus_homework_mysql``);
* the watches entry's ``vars``, then (when finalizing) the finalizer's ``vars``,
  each overriding what came before.

The object is handed over without ``metadata.managedFields``, the
``kubectl.kubernetes.io/last-applied-configuration`` annotation and this operator's own
annotations: they are large and may hold a copy of a password.

**Unsafe marking** (``markUnsafe``, on by default here): every string that came from the
object, at any depth, is written as ``{"__ansible_unsafe": "<text>"}``. ansible-core loads
``-e @file`` with its legacy JSON profile, which turns that form into a string that is
never templated, so ``{{ lookup('pipe', 'id') }}`` typed into a spec stays literal text.
Mapping keys are left as they are (Ansible does not template keys). The watches entry's
``vars`` are the operator author's and are not marked.

Why JSON and not YAML's ``!unsafe`` tag: ansible-core 2.19 re-resolves the scalar under
``!unsafe`` as if it were plain, so ``!unsafe '123'`` loads as the integer 123,
``!unsafe 'true'`` as a boolean and ``!unsafe ''`` as null: spec strings would change type.
The JSON form keeps strings strings.
"""
import json
from collections.abc import Mapping
from typing import Any, Final

from ansible_kopf import constants
from ansible_kopf.sdk import casing, watches

UNSAFE_KEY: Final = '__ansible_unsafe'


def object_key(group: str, kind: str) -> str:
    """``_<group>_<kind>`` with characters Ansible cannot use in a name replaced by ``_``."""
    return f"_{group}_{kind.lower()}".replace('.', '_').replace('-', '_')


def plain(value: Any) -> Any:
    """A deep copy as plain dicts and lists (kopf's bodies are read-only mapping views)."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def mark_unsafe(value: Any) -> Any:
    """Wrap every string at any depth in Ansible's unsafe form; keys are left as they are."""
    if isinstance(value, str):
        return {UNSAFE_KEY: value}
    if isinstance(value, Mapping):
        return {key: mark_unsafe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(item) for item in value]
    return value


def strip(body: Mapping[str, Any]) -> dict[str, Any]:
    """A plain copy of the object without the fields that must not reach Ansible."""
    obj: dict[str, Any] = plain(body)
    metadata = obj.get('metadata')
    if isinstance(metadata, dict):
        metadata.pop('managedFields', None)
        annotations = metadata.get('annotations')
        if isinstance(annotations, dict):
            for key in list(annotations):
                if (key == constants.LAST_APPLIED_ANNOTATION
                        or key.startswith(constants.ANNOTATION_PREFIX + '/')):
                    del annotations[key]
            if not annotations:
                del metadata['annotations']
    return obj


def build(body: Mapping[str, Any], watch: watches.Watch, *, finalizing: bool) -> dict[str, Any]:
    """The extra variables for one run against ``body``, ready for :func:`dumps`."""
    obj = strip(body)
    metadata = obj.get('metadata') or {}
    spec = obj.get('spec')
    spec = spec if isinstance(spec, dict) else {}
    mark = mark_unsafe if watch.mark_unsafe else (lambda value: value)

    parameters: dict[str, Any] = casing.keys_to_snake(spec) if watch.snake_case_parameters \
        else dict(spec)
    parameters = {key: mark(value) for key, value in parameters.items()}
    parameters['ansible_operator_meta'] = mark({
        'name': metadata.get('name', ''),
        'namespace': metadata.get('namespace', ''),
    })
    key = object_key(watch.group, watch.kind)
    parameters[key] = mark(obj)
    parameters[f"{key}_spec"] = mark(spec)
    parameters.update(plain(watch.vars))
    if finalizing and watch.finalizer is not None:
        parameters.update(plain(watch.finalizer.vars))
    return parameters


def dumps(parameters: Mapping[str, Any]) -> str:
    """Serialise for ``ansible-playbook -e @file`` (JSON: see the module's docstring)."""
    return json.dumps(parameters, ensure_ascii=False, separators=(',', ':'))
