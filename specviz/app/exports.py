"""The dashboard's trace files for download: one fresh file a run, in a shared temporary folder, each removed an
hour after it was written (by whichever run starts next)."""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

FOLDER = Path(tempfile.gettempdir()) / "specviz-exports"
TTL_S = 3600


def path(method: str) -> Path:
    """A fresh file for one run's trace (rewritten as the run grows, so Stop keeps a valid file); files older
    than TTL_S are removed (a file another visitor's run removed first is skipped)."""
    FOLDER.mkdir(exist_ok=True)
    for old in FOLDER.glob("*.json"):
        try:
            if time.time() - old.stat().st_mtime > TTL_S:
                old.unlink(missing_ok=True)
        except FileNotFoundError:
            continue
    return FOLDER / f"specviz-{method}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.json"
