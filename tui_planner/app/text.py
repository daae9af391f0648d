"""Text for Textual widgets: our markup with values from outside in it, never parsed as markup.

Screens write rich markup and put each value from outside in through `fmt.esc` (the same rule as the
commands' output); `content` turns that into Textual Content. Textual's own markup cannot take a
value safely (its escape leaves `[B]`, `[$accent]` and a trailing backslash to be read as markup), so
the markup is read by rich, whose escape matches its parser, and each span keeps the tag's text as its
style: Textual reads `[b green]` exactly as its own markup would.
"""

from __future__ import annotations

from rich.text import Text
from textual.content import Content, Span


def content(markup: str) -> Content:
    """Rich markup of ours (values from outside inserted with `fmt.esc`) as Textual Content."""
    t = Text.from_markup(markup, emoji=False)
    return Content(t.plain, [Span(s.start, s.end, s.style if isinstance(s.style, str) else str(s.style))
                             for s in t.spans])
