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
# Control characters (C0, DEL, C1), Unicode's line and paragraph separators, the bidirectional overrides.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What transformers takes as attn_implementation: "eager", "sdpa", "flash_attention_2", "flex_attention", or a
# hub kernel's "kernels-community/flash-attn": never a quote, a bracket or a space.
ATTENTION_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:|-]{0,99}")


def is_id(text: object) -> bool:
    return isinstance(text, str) and ID_PATTERN.fullmatch(text) is not None


def comment(text: object, limit: int = 200) -> str:
    """`text` for one line of a generated file's comment: control characters and line breaks (which would
    end the comment and start a command) become '?', and it is cut at `limit` characters."""
    s = _LINE_BREAKS.sub("?", str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def line(text: object, limit: int = 200) -> str:
    """`text` as part of one line a person reads (an explanation, a message): each control character or line
    break written out as an escape (a newline as \\n, ESC as \\x1b), so a value cannot start a line of its
    own or act on a terminal; cut at `limit` characters."""

    def sub(m: re.Match) -> str:
        c = m.group()
        return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    s = _CONTROLS.sub(sub, str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def is_attention(text: object) -> bool:
    """An attn_implementation a generated line of Python may quote: a name, no quote or bracket."""
    return isinstance(text, str) and ATTENTION_PATTERN.fullmatch(text) is not None
