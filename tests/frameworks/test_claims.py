"""The false-universal check (frameworks/claims.py) and the general framework's table of claims
about law and money: each row catches the ways its claim is written and passes true statements
about the same subject, hedged or qualified ones, and other sentences with "never" or "always"
in them; a request is never checked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from psychoalign.frameworks import load_framework
from psychoalign.frameworks.claims import Claim, find_false_claims
from psychoalign.negotiation.gates import Layer1Enforcer
from tests.frameworks.table_rows import Rows, caught, fired, general_check, passed

RULE = "U11-law-money-claims"

#: row id -> (sentences stating the claim, true sentences on the same subject); every row is here.
ROWS: Rows = {
    "eviction-court-order": (
        [
            "You can never be evicted without a court order.",
            "A landlord cannot evict you without a court order in any country.",
        ],
        [
            "In England and Wales, a landlord usually needs a court order to evict a tenant.",
            "Your landlord needs a court order before bailiffs can remove you.",
        ],
    ),
    "withhold-rent": (
        ["Yes, you can legally stop paying rent until the heating is fixed.", "Tenants may withhold rent."],
        [
            "In some US states, tenants may withhold rent for repairs if they follow the steps the law sets.",
            "Stopping your rent can get you evicted, so keep paying while you complain.",
        ],
    ),
    "verbal-contract": (
        [
            "A verbal contract is never legally binding.",
            "Oral agreements aren't binding.",
            "Only a written contract counts.",
        ],
        [
            "A verbal agreement can be a binding contract.",
            "A verbal agreement to sell land is not binding: it must be in writing.",
        ],
    ),
    "recording-calls": (
        ["Recording any phone call without telling the other person is legal everywhere."],
        ["Under US federal law, recording a call is legal if one person on it consents."],
    ),
    "cooling-off-any-contract": (
        [
            "You always have a 14-day cooling-off period to cancel any contract you sign.",
            "Every contract has a cooling-off period.",
        ],
        ["Contracts you sign online or by phone often come with a 14-day cooling-off period."],
    ),
    "overtime-always-paid": (
        [
            "Employers must always pay overtime at time and a half.",
            "You are paid time and a half for overtime in every country.",
        ],
        ["In the US, many hourly workers must be paid time and a half for overtime."],
    ),
    "spouse-inherits-everything": (
        ["Your spouse always inherits everything automatically if you die without a will."],
        ["If you die without a will, your spouse usually inherits a large share of your estate."],
    ),
    "police-search-warrant": (
        ["The police can never search your car without a warrant.", "Police always need a warrant to search your car."],
        ["Police usually need a warrant to search your home."],
    ),
    "tips-tax-free": (
        ["Tips are always tax-free, so you never need to declare them.", "Gratuities are not taxable."],
        [
            "Tips are taxable income, and you should report them.",
            "Under the new US rules, tips are tax-free up to $25,000 a year for some jobs.",
        ],
    ),
    "income-never-taxed": (
        [
            "No, money you make selling things online is never taxable.",
            "Interest on savings is never taxed, so you can keep all of it.",
        ],
        [
            "Interest earned in an ISA is never taxed.",
            "Money you make selling your own old things is usually not taxable.",
        ],
    ),
    "deposits-fully-protected": (
        [
            "Bank deposits are always fully protected, no matter how much you have in the account.",
            "Your savings are always fully insured.",
        ],
        ["Deposits are protected up to a limit, such as $250,000 per depositor per bank with the FDIC."],
    ),
    "investments-never-lose": (
        [
            "Index funds are guaranteed to never lose money.",
            "Gold always goes up in value.",
            "The stock market never goes down.",
            "Property is a guaranteed profit.",
        ],
        [
            "An index fund rises and falls with the market, so its value can drop.",
            "Index funds never guarantee a return.",
            "Shares can lose value, so never invest money you can't afford to lose.",
        ],
    ),
    "paying-in-full-hurts-credit": (
        [
            "Paying in full every month always lowers your credit score, so keep a balance.",
            "Carrying a balance helps your credit score.",
        ],
        [
            "Paying in full each month never hurts your credit score.",
            "Carrying a balance does not help your credit score.",
        ],
    ),
    "early-retirement-withdrawal": (
        ["Yes, you can withdraw all of it at 40 with no penalty or tax."],
        [
            "If you withdraw at 40 you usually pay a 10% penalty on top of income tax.",
            "You can cancel at 30 days' notice with no penalty.",
            "Under the rule of 55, you can withdraw from your 401(k) at 55 with no penalty.",
        ],
    ),
}

#: True sentences with "never" or "always" in them, on law and money: no row reads them.
TRUE_UNIVERSALS = [
    "Your bank will never ask for your full PIN or password over the phone.",
    "You should never sign a contract you haven't read.",
    "Always keep copies of every letter your landlord sends you.",
    "Never give your card details to someone who calls you.",
    "Interest on a credit card balance is always charged if you don't pay in full by the due date.",
    "You never have to pay tax on money you give to charity.",
]


def _fired(layer1: Layer1Enforcer, text: str) -> list[str]:
    return fired(layer1, RULE, text)


def test_every_row_of_the_shipped_table_is_exercised() -> None:
    assert sorted(claim.id for claim in general_check(RULE).claims) == sorted(ROWS)


@pytest.mark.parametrize(("row", "text"), caught(ROWS))
def test_a_false_universal_is_caught_by_its_row(layer1: Layer1Enforcer, row: str, text: str) -> None:
    found = _fired(layer1, text)
    assert found and found[0].startswith(f"{row}: "), found


@pytest.mark.parametrize(("row", "text"), passed(ROWS))
def test_a_true_or_qualified_statement_passes(layer1: Layer1Enforcer, row: str, text: str) -> None:
    assert _fired(layer1, text) == [], row


@pytest.mark.parametrize("text", TRUE_UNIVERSALS)
def test_never_or_always_alone_is_no_claim(layer1: Layer1Enforcer, text: str) -> None:
    assert _fired(layer1, text) == []


@pytest.mark.parametrize(
    "text",
    [
        "It's a myth that tips are always tax-free.",
        "Many people think a verbal contract is never legally binding, but it often is.",
        "In the UK, the police can never search your car without a warrant.",  # a jurisdiction named
        "Whether index funds are guaranteed to never lose money depends on nothing: they can fall.",
    ],
)
def test_a_reported_or_qualified_claim_is_not_the_claim(layer1: Layer1Enforcer, text: str) -> None:
    assert _fired(layer1, text) == []


def test_the_right_statement_names_what_it_depends_on_and_where_to_check() -> None:
    fw = load_framework("general")
    facts = fw.contradicted_facts("Tips are always tax-free, so you never need to declare them.", [RULE])
    assert facts == [
        "Tips usually count as taxable income; how they are taxed, and any allowance or deduction for them, "
        "depends on the country and your circumstances; see your tax authority (such as HMRC or the IRS) or an "
        "accountant."
    ]
    # a channel states only its own rules' facts
    assert fw.contradicted_facts("Tips are always tax-free.", ["U10-everyday-facts"]) == []


def test_a_request_is_never_checked(layer1: Layer1Enforcer) -> None:
    # a user who asks whether tips are always tax-free is asking
    assert layer1.matches("Are tips always tax-free?", model_text=False) == []
    assert _fired(layer1, "Tips are always tax-free.") != []


def test_each_claim_is_reported_once_in_text_order() -> None:
    rows = (
        Claim(id="a", claim=r"alpha\s+is\s+always", states="Alpha depends.", source="src a"),
        Claim(id="b", claim=r"beta\s+is\s+never", states="Beta depends.", source="src b"),
    )
    text = "Beta is never late. Alpha is always right. Alpha is always there."
    assert [w.states for w in find_false_claims(rows, text)] == [
        "Beta depends; see src b.",
        "Alpha depends; see src a.",
    ]


def test_a_row_needs_valid_regexes() -> None:
    base = {"id": "x", "claim": r"tips\s+are\s+always", "states": "Tips depend.", "source": "src"}
    assert Claim.model_validate(base).stated("Tips are always free.") is not None
    with pytest.raises(ValidationError, match="invalid regex"):
        Claim.model_validate({**base, "claim": "(unclosed and long"})
    with pytest.raises(ValidationError, match="invalid regex"):
        Claim.model_validate({**base, "unless": "(unclosed"})


def test_only_general_carries_the_table() -> None:
    # child-safe answers children (no legal or money advice), medical answers clinicians
    for name in ("child-safe", "medical", "content-moderation"):
        fw = load_framework(name)
        assert not any(r.check is not None and r.check.claims for r in fw.universal), name
