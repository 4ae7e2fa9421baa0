"""``docs/runbooks.md`` as the alarms link it: its anchors, and the page the web dashboard serves at ``/runbooks``.

Each alarm's description ends with ``Runbook: <runbook page>#<anchor>``, so that the alarm's e-mail carries a
link a person can open. The anchor is the heading's, as GitHub and the served page both make it (``anchor``);
the page is a plain rendering of the file's headings, paragraphs, lists and code (no scripts, no styles: the
web dashboard's Content-Security-Policy allows neither inline), built at synth from the file in the checkout, so
it is the runbooks of the code deployed.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

RUNBOOKS_MD = Path(__file__).resolve().parents[1] / "docs" / "runbooks.md"
_HEADING = re.compile(r"^(#{1,3}) (.+)$")
_ITEM = re.compile(r"^(\d+\.|-) (.*)$")
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")
_EMPHASIS = re.compile(r"\*([^*\s][^*]*)\*")


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The anchors of the file's headings (outside code blocks)."""
    found, fenced = set(), False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.add(anchor(match.group(2)))
    return found


def _inline(text: str) -> str:
    """Escaped text with its code spans, links and emphasis; other markup is shown as written."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if _CODE.fullmatch(part):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            text = _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', html.escape(part, quote=False))
            out.append(_EMPHASIS.sub(r"<em>\1</em>", _STRONG.sub(r"<strong>\1</strong>", text)))
    return "".join(out)


def page(markdown: str, title: str = "Job runner runbooks") -> str:
    """The file as one HTML page: each heading an element whose ``id`` is its ``anchor``."""
    rendering = _Page()
    for line in markdown.splitlines():
        rendering.read(line)
    rendering.close_list()
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            "</head>\n<body>\n" + "\n".join(rendering.body) + "\n</body></html>\n")


class _Page:
    """The HTML of the lines read so far: headings, paragraphs, lists at the margin, fenced code."""

    def __init__(self) -> None:
        self.body: list[str] = []
        self.block: list[str] = []      # the lines of the paragraph or list item being read
        self.open_list: str | None = None  # "ol" or "ul"
        self.code: list[str] | None = None

    def read(self, line: str) -> None:
        stripped = line.strip()
        if self.code is not None:  # inside a fenced block: verbatim up to its fence
            self._code_line(line)
        elif stripped.startswith("```"):
            self.close_block()  # a block inside a list item keeps the list open
            self.code = []
        elif heading := _HEADING.match(line):
            self.close_list()
            level, text = len(heading.group(1)), heading.group(2)
            self.body.append(f'<h{level} id="{anchor(text)}">{_inline(text)}</h{level}>')
        elif not stripped:
            self.close_block()
        elif item := _ITEM.match(line):  # an item at the margin (a nested list reads as its item's text)
            self._item("ol" if item.group(1)[0].isdigit() else "ul", item.group(2).strip())
        elif self.open_list and line.startswith(" "):  # the current item goes on
            self.block.append(stripped)
        else:  # a paragraph's line, at the margin: it ends a list
            if self.open_list:
                self.close_list()
            self.block.append(stripped)

    def _code_line(self, line: str) -> None:
        if line.strip().startswith("```"):
            self.body.append(f"<pre><code>{html.escape(chr(10).join(self.code or []))}</code></pre>")
            self.code = None
        elif self.code is not None:
            self.code.append(line)

    def _item(self, tag: str, text: str) -> None:
        if self.open_list != tag:
            self.close_list()
            self.open_list = tag
            self.body.append(f"<{tag}>")
        self.close_block()
        self.block.append(text)

    def close_block(self) -> None:
        if self.block:
            text = _inline(" ".join(self.block))
            self.body.append(f"<li>{text}</li>" if self.open_list else f"<p>{text}</p>")
            self.block.clear()

    def close_list(self) -> None:
        self.close_block()
        if self.open_list:
            self.body.append(f"</{self.open_list}>")
            self.open_list = None
