"""docs/runbooks.md as the alarms link it: its anchors, and the page the web dashboard serves."""

from __future__ import annotations

from html.parser import HTMLParser

from infra.runbooks import RUNBOOKS_MD, anchor, anchors, page


def test_anchors_are_githubs() -> None:
    assert anchor("WatermarkLag") == "watermarklag"
    assert anchor("Replaying job-dlq") == "replaying-job-dlq"
    assert anchor("Keyspaces point-in-time restore") == "keyspaces-point-in-time-restore"
    assert anchors("# Runbooks\n```bash\n# not a heading\n```\n## ScanErrors\n### A procedure\n") == {
        "runbooks", "scanerrors", "a-procedure"}


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.ids |= {value for name, value in attrs if name == "id" and value}


def test_the_page_holds_every_section_at_its_anchor_and_nothing_to_run() -> None:
    markdown = RUNBOOKS_MD.read_text()
    parsed = _Ids()

    parsed.feed(page(markdown))

    assert parsed.ids == anchors(markdown)
    assert {"h2", "ol", "li", "pre", "code", "a"} <= parsed.tags
    assert not parsed.tags & {"script", "style", "img", "iframe"}


def test_the_page_escapes_what_the_text_holds() -> None:
    served = page("## Tick\n\nRun `a <b> && c` then <script>alert(1)</script>.\n\n```\nx < y\n```\n")

    assert "<script>" not in served and "&lt;script&gt;" in served
    assert "<code>a &lt;b&gt; &amp;&amp; c</code>" in served and "<pre><code>x &lt; y</code></pre>" in served
