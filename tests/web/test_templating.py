"""The page renderer's text filters: untrusted text is escaped, isolated and shows its invisible characters."""

from __future__ import annotations

from html.parser import HTMLParser

from psychoalign.web.templating import INVISIBLE, untrusted, visible

SPOOF = "Harmless \u202egnp.exe\u202c"
NAME = "Di \u202eevil\u202c"


def shown_text(html: str) -> str:
    """The text a reader gets from ``html`` (tags dropped, entities decoded)."""
    parts: list[str] = []

    class Text(HTMLParser):
        def handle_data(self, data: str) -> None:
            parts.append(data)

    Text(convert_charrefs=True).feed(html)
    return "".join(parts)


def test_bidi_override_is_shown_as_markers_and_isolated() -> None:
    html = str(untrusted(SPOOF))
    assert html.startswith('<bdi dir="auto">') and html.endswith("</bdi>")
    assert "\u202e" not in html and "\u202c" not in html  # nothing left to reorder the text
    assert shown_text(html) == "Harmless ⟨U+202E⟩gnp.exe⟨U+202C⟩"
    assert 'title="invisible character: RIGHT-TO-LEFT OVERRIDE"' in html
    assert shown_text(str(untrusted(NAME))) == "Di ⟨U+202E⟩evil⟨U+202C⟩"


def test_zero_width_and_isolates_are_shown_but_joiners_stay() -> None:
    text = "pay\u200bpal \u2067x\u2069 \ufeffa \u00adb"
    assert shown_text(str(untrusted(text))) == "pay⟨U+200B⟩pal ⟨U+2067⟩x⟨U+2069⟩ ⟨U+FEFF⟩a ⟨U+00AD⟩b"
    family = "\U0001f468\u200d\U0001f469"  # an emoji sequence needs its zero-width joiner
    assert shown_text(str(untrusted(family))) == family
    assert all(f"⟨U+{c:04X}⟩" == visible(chr(c)) for c in INVISIBLE)


def test_markup_in_untrusted_text_stays_text() -> None:
    html = str(untrusted("<script>alert(1)</script> \u202e&"))
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp;" in html
    assert shown_text(html) == "<script>alert(1)</script> ⟨U+202E⟩&"
    assert str(untrusted(None)) == '<bdi dir="auto"></bdi>'
    assert visible("a\u202eb") == "a⟨U+202E⟩b"
