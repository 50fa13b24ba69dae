"""
Which fields of an object the runs wrote, and a digest of an object taken on those fields.

A write's fields are the paths of its body: a created or replaced object, a merge or
strategic-merge patch (its ``$`` directives left out), a JSON patch (each operation's
path) or a server-side apply body (YAML). A path stops at a list: a list is one value. The
object's bookkeeping (``metadata.resourceVersion`` and the like), its type and ``status``
are no written fields. :mod:`dependents` compares an owned object's digest on these fields from
one event to the next: a change elsewhere (the revision annotation the Deployment
controller adds, the volume a PersistentVolumeClaim is bound to) is nothing a run wrote,
so running the owner's role again would write nothing back.

Pure functions, no I/O.
"""
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import yaml

Path = tuple[str, ...]

# never the runs' fields: the API server's bookkeeping, the status, and the type (the
# items of a list come without kind and apiVersion, a watch's objects with them)
_NOT_WRITTEN: Final = frozenset({
    ('status',), ('kind',), ('apiVersion',),
    ('metadata', 'resourceVersion'), ('metadata', 'managedFields'),
    ('metadata', 'creationTimestamp'), ('metadata', 'uid'), ('metadata', 'generation'),
    ('metadata', 'selfLink'), ('metadata', 'deletionTimestamp'),
    ('metadata', 'deletionGracePeriodSeconds'),
})
# always looked at: who owns the object and whether it is being deleted
ALWAYS: Final = frozenset({
    ('metadata', 'ownerReferences'), ('metadata', 'deletionTimestamp'),
    ('metadata', 'annotations', 'operator-sdk/primary-resource'),
    ('metadata', 'annotations', 'operator-sdk/primary-resource-type'),
})
_MISSING: Final = '\0missing'
JSON_PATCH: Final = 'application/json-patch+json'
APPLY_PATCH: Final = 'application/apply-patch+yaml'


def decode(body: bytes, content_type: str) -> Any:
    """A write's body as data (YAML for a server-side apply, else JSON); None when it
    cannot be read."""
    try:
        return yaml.safe_load(body) if content_type == APPLY_PATCH else json.loads(body)
    except (ValueError, yaml.YAMLError):
        return None


def paths_of(body: bytes, content_type: str) -> frozenset[Path] | None:
    """The fields a write's ``body`` sets; None when it cannot be read (then nothing is
    known of what the write changed)."""
    return paths_in(decode(body, content_type), content_type)


def paths_in(data: Any, content_type: str) -> frozenset[Path] | None:
    """:func:`paths_of` for a body already decoded (:func:`decode`)."""
    if data is None:
        return None
    if content_type == JSON_PATCH:
        return _json_patch_paths(data)
    if not isinstance(data, Mapping):
        return None
    return frozenset(_leaves(data, ()))


def _leaves(value: Mapping[Any, Any], prefix: Path) -> Iterable[Path]:
    for key, child in value.items():
        if not isinstance(key, str) or key.startswith('$'):  # strategic-merge directives
            continue
        path = (*prefix, key)
        if path in _NOT_WRITTEN:
            continue
        if isinstance(child, Mapping) and child:
            yield from _leaves(child, path)
        else:
            yield path


def _json_patch_paths(operations: Any) -> frozenset[Path] | None:
    if not isinstance(operations, list):
        return None
    found: set[Path] = set()
    for operation in operations:
        if not isinstance(operation, Mapping):
            return None
        for key in ('path', 'from'):
            pointer = operation.get(key)
            if not isinstance(pointer, str):
                if key == 'path':
                    return None
                continue
            path: list[str] = []
            for step in pointer.split('/')[1:]:
                if step.isdigit() or step == '-':  # into a list: the list is the value
                    break
                path.append(step.replace('~1', '/').replace('~0', '~'))
            if tuple(path) not in _NOT_WRITTEN and path:
                found.add(tuple(path))
    return frozenset(found)


def digest(obj: Mapping[str, Any], paths: Iterable[Path]) -> str:
    """A digest of ``obj`` taken on ``paths`` and :data:`ALWAYS` (an absent field counts
    as absent): equal digests, equal written fields."""
    taken = []
    for path in sorted(set(paths) | ALWAYS):
        value: Any = obj
        for key in path:
            value = value.get(key, _MISSING) if isinstance(value, Mapping) else _MISSING
            if value is _MISSING:
                break
        taken.append([list(path), value])
    return hashlib.sha256(json.dumps(taken, sort_keys=True).encode()).hexdigest()[:32]
