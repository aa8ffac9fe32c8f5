"""Result files: checked before any work starts, written beside their final place and moved there at the end, so a
failed or stopped run never truncates an earlier result."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

MAX_PATH_CHARS = 1024


def check_output(path: str | Path, what: str = "output file") -> Path:
    """`path` as a file that can be written: not too long, not a folder, under a folder that exists or can be made
    (it is made), and writable there. A ValueError says which of these fails."""
    p = Path(path).expanduser()
    if not str(path).strip() or len(str(path)) > MAX_PATH_CHARS or any(len(part) > 255 for part in p.parts):
        raise ValueError(f"the {what} {str(path)[:60]!r} is not a usable path (at most {MAX_PATH_CHARS} characters)")
    if p.is_dir():
        raise ValueError(f"the {what} {p} is a folder: name a file inside it")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"the {what} {p} cannot be made: {parent} is a file, not a folder")
    try:  # make the folder now and write a scrap file there, so a run never ends on a place it cannot write
        p.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p.parent):
            pass
    except OSError as e:
        reason = e.strerror.lower() if e.strerror else "it cannot be written"
        raise ValueError(f"the {what} {p} cannot be written there ({reason}): name another place") from None
    return p


@contextlib.contextmanager
def replacing(path: str | Path, mode: str = "w") -> Iterator[object]:
    """Open a temporary file beside `path`; on a clean exit it replaces `path`, on an error it is removed."""
    p = check_output(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
