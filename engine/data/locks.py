"""Who holds a file's lock, and how: a DuckDB file is locked for reading (shared) by each process that opens
it read-only (the app browsing it, `results`) and for writing (exclusive) by its one writer (a sweep).
DuckDB's own error names a holder but not which; a message must not call a reader a writer.

Read from Linux's /proc/locks; elsewhere nothing is known (an empty list), and the caller says less. No
torch here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Holder(NamedTuple):
    pid: int
    writing: bool  # an exclusive (write) lock; else shared (read)


def holders(path: str | Path, table: str = "/proc/locks") -> list[Holder]:
    """The processes other than this one holding a POSIX or flock lock on `path` (the file itself)."""
    try:
        st = os.stat(path)
        with open(table) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    # "1: POSIX  ADVISORY  READ 5153 fe:00:2147569 0 EOF": the device as major:minor in hex, then the inode.
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    out = []
    for line in lines:
        words = line.split()
        if "->" in words:  # a request blocked on a lock, not a lock held
            continue
        try:
            kind, pid, where = words[3], int(words[4]), words[5].split(":")
            if (int(where[0], 16), int(where[1], 16), int(where[2])) != want or pid == os.getpid():
                continue
        except (IndexError, ValueError):
            continue
        out.append(Holder(pid, kind == "WRITE"))
    return out


def name_of(pid: int) -> str:
    """The command a process runs, for a message: 'tui-planner app', 'python3 ...'; '' if unknown."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    text = " ".join(w.decode("utf-8", "replace") for w in words if w)
    return text if len(text) <= 80 else text[:77] + "..."
