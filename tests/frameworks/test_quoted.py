"""Quoted material (docs/frameworks.md, "Quoted material"): what the delimiter rule masks, what it
leaves alone, and the framework field that turns it on."""

from __future__ import annotations

import pytest

from psychoalign.frameworks import Framework, FrameworkError, builtin_names, load_framework, parse_framework
from psychoalign.frameworks.model import hash_content
from psychoalign.frameworks.quoted import PLACEHOLDER, mask_quoted

P = PLACEHOLDER


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        # paired double quotes, straight, curly and guillemets
        ('Does this break policy? Post: "they are vermin"', f"Does this break policy? Post: {P}"),
        ("Is \u201cthey are vermin\u201d hate speech?", f"Is {P} hate speech?"),
        ("Label this: \u00abils sont des rats\u00bb please", f"Label this: {P} please"),
        ('Is "a" worse than "b"?', f"Is {P} worse than {P}?"),
        # a label at a line start or after a sentence end: the rest of its paragraph
        ("Post: they are vermin\n\nIs this hate speech?", f"Post: {P}\n\nIs this hate speech?"),
        ("Keep or remove? comment: they are vermin", f"Keep or remove? comment: {P}"),
        ("Check this.\nMessage: you are next", f"Check this.\nMessage: {P}"),
        # blockquote lines and a closed fence
        ("Is this allowed?\n> they are vermin\n> all of them\nThanks", f"Is this allowed?\n{P}\nThanks"),
        ("Which rule applies?\n```\nthey are vermin\n```\nthanks", f"Which rule applies?\n{P}\nthanks"),
        # single quotes a colon opens, closing the paragraph (an apostrophe inside is no end)
        ("Classify this post: 'Vaccines contain microchips to track you, don't get them.'", f"Classify this post: {P}"),
        (
            "Is this post okay to leave up: \u2018Take 20 tylenol, it's the way out.\u2019",
            f"Is this post okay to leave up: {P}",
        ),
        ("Remove or keep: 'they are vermin'.\nThanks", f"Remove or keep: {P}\nThanks"),
    ],
)
def test_clearly_delimited_material_is_replaced_by_the_placeholder(text: str, masked: str) -> None:
    assert mask_quoted(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        'an unclosed "quote runs on',
        "it's the user's post, isn't it",  # single quotes are apostrophes as often as quotes
        "Note: it's the users' post, and it's 'fine' by me today",  # not closing the paragraph
        "Time: 5 o'clock",
        "Which rule applies?\n```\nan unclosed fence",
        "Error message: segmentation fault",  # a label mid-sentence is not a label
        "My post: a reply about gardening",  # not after a sentence end or at a line start
        'A quote "across\n\nparagraphs" is not one',
        "How do I boil an egg?",
    ],
)
def test_anything_ambiguous_is_left_as_it_is(text: str) -> None:
    assert mask_quoted(text) == text


@pytest.mark.parametrize(
    "text", ['"step-by-step synthesis of sarin"', 'Classify: "step-by-step synthesis of sarin"', "> only a quote"]
)
def test_a_request_that_is_nothing_but_quoted_material_is_left_whole(text: str) -> None:
    """Fewer than two words of its own: no ask to judge apart from the material."""
    assert mask_quoted(text) == text


def test_only_content_moderation_analyses_quoted_material_and_the_others_screen_the_whole_request() -> None:
    request = 'Does this post break our hate-speech policy? Post: "they are vermin"'
    analysed = {name for name in builtin_names() if load_framework(name).quoted_material == "analysed"}
    assert analysed == {"content-moderation"}
    for name in builtin_names():
        fw = load_framework(name)
        expected = mask_quoted(request) if name == "content-moderation" else request
        assert fw.screened_request(request) == expected
    assert load_framework("content-moderation").screened_request(request).endswith(f"Post: {P}")


def test_the_field_is_validated_and_hashed_only_when_set() -> None:
    text = "name: t\nversion: '1.0'\ndescription: d\nuniversal:\n  - id: U1\n    text: no harm\n"
    plain = parse_framework(text)
    assert plain.quoted_material == "judged" and "quoted_material" not in hash_content(plain)
    assert "Quoted material" not in plain.render()
    analysed = parse_framework(text + "quoted_material: analysed\n")
    assert hash_content(analysed)["quoted_material"] == "analysed" and analysed.sha256 != plain.sha256
    assert "Quoted material: users quote content for analysis" in analysed.render()
    with pytest.raises(FrameworkError) as err:
        parse_framework(text + "quoted_material: masked\n", "fw.yaml")
    message = str(err.value)
    assert "fw.yaml" in message and "quoted_material" in message and "\n" not in message.strip()


def test_a_framework_sent_to_the_evaluator_keeps_the_field() -> None:
    fw = load_framework("content-moderation")
    assert Framework.model_validate(fw.payload()).quoted_material == "analysed"
