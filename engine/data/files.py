"""A cache file written whole or not at all.

    write_quietly(path, text) -> bool   text to path through a temporary file beside it and os.replace; False where
                                        the folder cannot be written (a cache that misses costs a later call time)
"""

from __future__ import annotations

import os
from pathlib import Path


def write_quietly(path: Path, text: str) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
