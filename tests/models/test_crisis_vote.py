"""The crisis check's character vote (v9): its n-grams are scikit-learn's ``char_wb`` analyzer's,
and its value is the fitted logistic model's decision function, so the runtime needs no scikit-learn."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from psychoalign.models.heads import CharVote, char_ngrams

TEXTS = [
    "Chcę się zabić, nie daję rady",
    "ölmek istiyorum artık",
    "mujhe   ab jeena nahi hai",
    "How do I repot a basil plant?",
    "a",
    "I'm done. Tonight is the night",
    "Çok yorgunum, uyumak istiyorum",
    "what's the dose of ibuprofen for a child",
]


def test_the_ngrams_are_scikit_learns_char_wb() -> None:
    text = pytest.importorskip("sklearn.feature_extraction.text")
    analyzer = text.TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), lowercase=True).build_analyzer()
    for t in TEXTS:
        assert char_ngrams(t) == analyzer(t)


def test_the_vote_is_the_fitted_models_decision_function() -> None:
    text = pytest.importorskip("sklearn.feature_extraction.text")
    linear = pytest.importorskip("sklearn.linear_model")
    y = np.array([True, True, True, False, False, True, False, False])
    vec = text.TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), lowercase=True, sublinear_tf=True)
    lr = linear.LogisticRegression(C=3.0, class_weight="balanced", max_iter=2000).fit(vec.fit_transform(TEXTS), y)
    terms = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
    vote = CharVote(
        terms=terms,
        idf=base64.b64encode(np.asarray(vec.idf_, dtype="<f4").tobytes()).decode("ascii"),
        coef=base64.b64encode(np.asarray(lr.coef_[0], dtype="<f4").tobytes()).decode("ascii"),
        intercept=float(lr.intercept_[0]),
        threshold=0.0,
    )
    fresh = [*TEXTS, "zabić się chcę", "no known n-gram: ###"]
    expected = lr.decision_function(vec.transform(fresh))
    assert [vote.value(t) for t in fresh] == pytest.approx(list(expected), abs=1e-4)
    assert [vote.fires(t) for t in TEXTS] == [bool(v >= 0.0) for v in expected[: len(TEXTS)]]


@pytest.mark.parametrize(
    "text",
    [
        "Chcę się zabić",
        "ölmek istiyorum",
        "main marna chahta hoon",
        "mujhe ab jeena nahi hai",
        "me quiero morir",
        "je veux mourir",
        "ich will nur noch sterben",
        "хочу умереть",
        "我想死",
        "死にたい",
    ],
)
def test_the_lexicon_matches_a_first_person_wish_to_die(text: str) -> None:
    from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES, says_self_harm

    assert says_self_harm(text, MULTILINGUAL_PHRASES)


@pytest.mark.parametrize(
    "text",
    [
        "me quiero morir de vergüenza",
        "je veux mourir de rire",
        "ça va me tuer",
        "What does 'intihar' mean in Turkish?",
        "Wie viele Menschen sterben jährlich an Grippe?",
    ],
)
def test_the_lexicon_leaves_idioms_and_other_people_alone(text: str) -> None:
    from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES, says_self_harm

    assert not says_self_harm(text, MULTILINGUAL_PHRASES)


def test_a_known_limit_of_the_lexicon() -> None:
    """Polish "chce" is "I want" typed without its diacritic and also "he wants": a friend's words match."""
    from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES, says_self_harm

    assert says_self_harm("Mój przyjaciel chce umrzeć, jak mu pomóc?", MULTILINGUAL_PHRASES)
