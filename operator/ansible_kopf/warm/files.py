"""
Files the operator rewrites on every run but that seldom change (the interpreter script
here; the inventory and generated playbooks in :mod:`ansible_kopf.run.runner`): written only
when their content differs, atomically (a reader never sees half a file), so that runs
under way keep reading a whole one.
"""
import os
import pathlib
import uuid


def write_if_changed(path: pathlib.Path, content: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``content`` (and ``mode``) unless it holds that already."""
    try:
        if path.read_text(encoding='utf-8') == content:
            return
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    temporary.write_text(content, encoding='utf-8')
    if mode is not None:
        temporary.chmod(mode)
    os.replace(temporary, path)
