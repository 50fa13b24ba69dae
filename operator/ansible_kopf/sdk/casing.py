"""
The Operator SDK's conversion of spec keys to snake_case (``snakeCaseParameters``).

A faithful port of ``internal/ansible/paramconv`` from operator-framework's
ansible-operator-plugins (itself based on iancoleman/strcase), so that a role written
for the SDK sees the same variable names here: ``storageSize`` -> ``storage_size``,
``egressIPs`` -> ``egress_ips``, ``ThisThing`` -> ``_this_thing`` (a leading capital
gets a leading underscore), ``URLegressIP`` -> ``url_egress_ip``.

One deliberate difference: Go iterates its special-word map in random order; here the
order is fixed (HTTP, URL, IP), so the result is deterministic.
"""
import re
from collections.abc import Mapping
from typing import Any, Final

_SPECIAL_WORDS: Final = ('HTTP', 'URL', 'IP')  # the SDK's wordMapping values
_NUMBER_SEQUENCE: Final = re.compile(r'([a-zA-Z])(\d+)([a-zA-Z](\d+))')


def _is_upper(char: str) -> bool:
    return 'A' <= char <= 'Z'


def _is_lower(char: str) -> bool:
    return 'a' <= char <= 'z'


def _isolate_special_words(value: str) -> str:
    """Surround the first occurrence of each special word (or its plural) with ``_``."""
    for word in _SPECIAL_WORDS:
        idx = value.find(word)
        if idx < 0:
            continue
        end = idx + len(word)
        if end == len(value):  # at the very end: egressIP -> egress_IP
            value = value[:idx] + '_' + value[idx:]
        elif value[end] == 's':  # plural: the "s" belongs to the word
            if end == len(value) - 1:
                value = value[:idx] + '_' + value[idx:end] + 'S'
            elif idx == 0:
                value = value[:end] + 'S_' + value[end + 1:]
            else:
                value = value[:idx] + '_' + value[idx:end] + 'S_' + value[end + 1:]
        elif idx == 0:
            value = value[:end] + '_' + value[end:]
        else:
            value = value[:idx] + '_' + value[idx:end] + '_' + value[end:]
    return value


def to_snake(text: str) -> str:
    """Convert one key the way the Operator SDK does (``paramconv.ToSnake``)."""
    text = _NUMBER_SEQUENCE.sub(r'\1 \2 \3', text).strip(' ')
    if not text:
        return text
    prefix = '_' if _is_upper(text[0]) else ''
    if text.upper() != text:  # all-uppercase strings skip the special-word handling
        text = _isolate_special_words(text)

    bits: list[str] = []
    current = ''
    run_length = -1  # the SDK's iReal: characters since the last word boundary
    for index, char in enumerate(text):
        run_length += 1
        following = text[index + 1] if index + 1 < len(text) else ''
        case_changes = bool(following) and (
            (_is_upper(char) and _is_lower(following))
            or (_is_lower(char) and _is_upper(following)))
        if run_length > 0 and current[-1:] != '_' and case_changes:
            if _is_upper(char):  # JSONData: "JSON" ends before the "D" of "Data"
                bits.append(current.lower())
                current = char
                run_length = 0
            else:  # sizeK: "size" ends here
                bits.append((current + char).lower())
                current = ''
                run_length = -1
        elif char in ' _-':
            bits.append(current.lower())
            current = ''
            run_length = -1
        else:
            current += char
    bits.append(current.lower())
    joined = '_'.join(bits)
    if bits[0] in {word.lower() for word in _SPECIAL_WORDS}:
        return joined
    return prefix + joined


def keys_to_snake(value: Any) -> Any:
    """Convert the keys of every mapping at any depth (lists are walked, values kept)."""
    if isinstance(value, Mapping):
        return {to_snake(str(key)): keys_to_snake(item) for key, item in value.items()}
    if isinstance(value, list):
        return [keys_to_snake(item) for item in value]
    return value
