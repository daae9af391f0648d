"""Text from outside (a preset, a results file, a flag) on its way into generated code or a command line.

Results files and presets get shared, so nothing read from them may run: a value that reaches a shell line
is validated to a safe alphabet or quoted with shlex.quote; one that reaches a comment cannot end the line.
"""

from __future__ import annotations

import re

# Preset ids (models, GPUs) name files, database keys and command-line arguments: letters, digits and . _ + -
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
# A PyTorch allocator setting: "expandable_segments:True,max_split_size_mb:512" and the like.
ALLOC_CONF_PATTERN = re.compile(r"[A-Za-z0-9_.:,]{1,200}")
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def is_id(text: object) -> bool:
    return isinstance(text, str) and ID_PATTERN.fullmatch(text) is not None


def comment(text: object, limit: int = 200) -> str:
    """`text` for one line of a generated file's comment: control characters and line breaks (which would
    end the comment and start a command) become '?', and it is cut at `limit` characters."""
    s = _LINE_BREAKS.sub("?", str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."
