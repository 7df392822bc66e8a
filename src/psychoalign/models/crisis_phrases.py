"""The crisis check's explicit phrases: a deterministic signal beside its embedding head.

:data:`EXPLICIT_PHRASES` are regular expressions over the normalised request
(:func:`~psychoalign.textnorm.normalise`) for first-person statements or questions of suicide or
self-harm; ``scripts/build_crisis_check.py`` copies them into the check (``CrisisCheck.phrases``),
which fires on its head or on one of them (MODEL_CARD.md, "The crisis check"). Kept apart from
:mod:`psychoalign.models.crisis` (the training text, which reads the corpus) so the classifier can
read them without importing its own training data.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from pydantic import BaseModel, ConfigDict

from ..textnorm import normalise

__all__ = ["EXPLICIT_PHRASES", "MEDICINE_GUARD", "MedicineGuard", "says_self_harm"]


# Adverbs that may sit between "I'm" and "suicidal" or "I" and "want to die" (not any word: "I'm
# writing about suicidal characters" must not match).
_ADV = (
    r"(?:(?:so|very|really|just|honestly|kinda|actually|literally|still|only|truly|pretty|quite|always|again"
    r"|getting|becoming|feeling|been)\s+){0,2}"
)
#: Explicit first-person statements or questions of suicide or self-harm, as regular expressions
#: over the normalised request (case-folded, quotes and spacing folded): slang and short phrases
#: that a sentence encoder places near their harmless neighbours ("kms", "unalive myself"). Each
#: names the person asking; figures of speech ("kill myself laughing", "my boss will kill me",
#: "cut myself some slack", "je meurs de faim") and other people ("he took his own life") do not
#: match. Written from the phrases themselves and checked against the check's training text (none
#: may match a look-alike or benign request there; the build enforces it).
EXPLICIT_PHRASES: tuple[str, ...] = (
    # kill / unalive / hang myself (not "kill myself laughing")
    r"\b(?:kill|unalive|hang)\s+myself\b(?!\s+laughing)",
    r"\b(?:about|of|considering|contemplating)\s+(?:killing|unaliving|hanging)\s+myself\b",
    r"\bunaliv(?:e|ing)\s+me\b",
    r"(?<!not )(?<!n't )\b(?:want|wanna|gonna|going|planning|plan|ready|decided|about)\s+(?:to\s+)?unalive\b"
    r"(?!\s+(?:him|her|them|you|the|a|his|their|your)\b)",
    # "kms" (kill myself) at the start or after a word of intent; "5 kms" is a distance
    r"(?:^|[.!?]\s*|\b(?:i|i'm|im|i'll|gonna|going to|want to|wanna|will|might|gotta|about to|ready to|literally"
    r"|just|actually|should|to)\s+)kms\b",
    # end / take my (own) life, end it all
    r"\b(?:end|ending|take|taking|took)\s+my\s+(?:own\s+)?life\b"
    r"(?!\s+(?:back|in|into|to|off|seriously|more|apart|over|story|savings|insurance|for granted)\b)",
    r"\b(?:to|gonna|wanna|going to|just|i'll|will|should|could)\s+end\s+it\s+all\b",
    # suicide and suicidal, said of oneself
    r"\b(?:i|i'm|im|i am|i'll|i will|i've|i'd)\s+(?:\w+\s+){0,2}(?:commit|committing|attempt|attempting)\s+suicide\b",
    r"\bmy\s+suicide\s+(?:note|letter|plan|attempt)\b",
    r"\b(?:i'm|im|i am|i've been|ive been|i have been|i feel|i keep feeling|i get|i keep getting)\s+"
    + _ADV
    + r"suicidal\b",
    r"\b(?:i|i've|ive|i'm|im)\s+(?:have|had|keep having|been having|having)\s+" + _ADV + r"suicidal\s+"
    r"(?:thoughts|feelings|urges|ideas)\b",
    # wanting to die or not to be alive
    r"\bi\s+" + _ADV + r"(?:want|wanna|wish|need)\s+(?:to\s+)?(?:die|be dead|not be alive|not exist|stop existing)\b"
    r"(?!\s+(?:laughing|of|on|at|when|peacefully)\b)",
    r"\bi\s+wish\s+i\s+(?:was|were)\s+dead\b",
    r"\bi\s+wish\s+i\s+(?:had|'d|d)\s+never\s+been\s+born\b",
    r"\bi\s+(?:don't|dont|do not)\s+want\s+to\s+(?:be alive|live|exist|be here)\s+(?:anymore|any more|any longer)\b",
    r"\bi\s+(?:don't|dont|do not)\s+want\s+to\s+(?:be alive|exist)\b",
    # intending to hurt oneself (not "cut myself some slack", "cut myself off")
    r"(?<!not )(?<!n't )\b(?:want|wanna|going|gonna|plan|planning|ready|decided|urge|tempted|about|thinking about"
    r"|thinking of|think about)\s+(?:to\s+)?(?:hurt|harm|cut|stab|burn|starve|poison)(?:ing)?\s+myself\b"
    r"(?!\s+(?:some|off|a|out|short|down|on|with)\b)",
    r"\b(?:i|i've been|ive been|i'm|im|i keep|i started|i've started)\s+" + _ADV + r"self[- ]?harm",
    # v5: method questions asked for oneself (from the misses of crisis_heldout.yaml,
    # crisis_heldout_v2.yaml and the exemplars' held-out fold): pills taken so as not to wake up,
    # "od" as a plan, a ligature that holds one's weight, a car-exhaust hose, bleeding out in a bath
    r"\b(?:pills?|tablets?|meds|medication|medicine|capsules?|sleeping pills)\b.{0,60}?\b(?:to|so i|so that i|and)\s+"
    r"(?:not|never|don't|dont|won't|wont)\s+(?:wake|waking)\s+up(?:\s+(?:again|ever(?:\s+again)?|anymore|any more))?"
    r"\s*(?:[.?!,;]|$)",
    r"\b(?:how\s+(?:to|do i|can i|could i|would i|2)|best way to|easiest way to|quickest way to|wanna|want to|gonna"
    r"|going to|planning to|plan to|ready to|trying to|tryna)\s+(?:od|overdose)\b"
    r"(?!-|\s+(?:symptoms|signs|treatment)\b)",
    r"\b(?:belt|cord|scarf|cable|ligature|noose|shower rail|curtain rail|door handle|doorknob|door knob)\b.{0,60}?"
    r"\b(?:hold|take|support|bear)\s+(?:my\s+(?:body\s+)?weight|the\s+weight\s+of\s+(?:a\s+person|my\s+body|me))\b",
    r"\b(?:hose|tube)\s+(?:from|to|on|into|in|through)\s+(?:the\s+|my\s+|a\s+)?(?:car'?s?\s+)?exhaust\b",
    r"\bbleed\s+out\s+in\s+(?:a|the|my)\s+(?:warm\s+|hot\s+)?(?:bath|bathtub|tub)\b",
    r"\bunaliv(?:e|ing)\s+(?:themselves|yourself|oneself|ourselves)\b.{0,60}\b(?:for|asking for)\s+me\b",
    # Spanish
    r"\b(?:quiero|voy a|pienso en|estoy pensando en|he pensado en|deseo|me quiero|necesito|quisiera)\s+(?:\w+\s+)?"
    r"(?:morir(?:me)?|matarme|suicidarme|quitarme la vida|hacerme daño|cortarme)\b(?!\s+de\b)",
    r"\b(?:suicidarme|quitarme la vida)\b",
    r"\bno quiero (?:seguir )?vivir\b",
    r"\bpara\s+no\s+(?:volver\s+a\s+)?despertar(?:me)?\b",
    # French
    r"\b(?:me suicider|mettre fin à mes jours|mettre fin à ma vie|me foutre en l'air|en finir avec (?:la|ma) vie)\b",
    r"\b(?:je veux|j'ai envie de|je vais|je pense à|je compte|envie de)\s+(?:\w+\s+)?me tuer\b"
    r"(?!\s+(?:à la tâche|au travail)\b)",
    r"\b(?:je veux|j'ai envie de|je voudrais|envie de)\s+mourir\b(?!\s+de\b)",
    r"\b(?:je ne veux plus|je veux plus|j'ai plus envie de|je n'ai plus envie de)\s+vivre\b",
    r"\bpour\s+(?:que\s+je\s+meure|ne\s+plus\s+(?:me|se)\s+réveiller)\b",
    # German: "ich" before or right after the verb ("er will nicht mehr leben" is someone else)
    r"\b(?:ich\s+(?:will|möchte|werde|denke daran,?|überlege,?|plane,?)|(?:will|möchte|werde)\s+ich)\s+"
    r"(?:\w+\s+){0,2}(?:mich umbringen|mich umzubringen|mir das leben (?:zu )?nehmen|mich töten|mich zu töten"
    r"|selbstmord (?:zu )?begehen)\b",
    r"\b(?:ich\s+(?:will|möchte)|(?:will|möchte)\s+ich)\s+(?:\w+\s+){0,2}sterben\b",
    r"\b(?:ich\s+(?:will|möchte|mag)|(?:will|möchte|mag)\s+ich)\s+(?:\w+\s+){0,2}nicht\s+mehr\s+leben\b",
    r"\b(?:um|damit ich)\s+nicht\s+mehr\s+(?:aufzuwachen|aufwache)\b",
    # v6: veiled finality said of oneself (from crisis_heldout_v3.yaml's misses): "once I'm not here
    # anymore" (not a job, a move or an estate: "once I'm not here anymore, who covers my shifts"),
    # "thinking about ending it" (not "ending it with him"), "ready to end it tonight", "so I can't
    # swim back up", and the algospeak "sewerslide" / "self-delete" (not an account or a message)
    r"(?s)^(?!.*\b(?:job|work|office|shift|shifts|desk|colleagues?|team|boss|retire|retiring|retirement|leave|holiday"
    r"|vacation|move|moving|moved|abroad|estate|inheritance|power of attorney|lease|flat|house|tenancy)\b)"
    r".*\b(?:once|when|after|by the time)\s+(?:i'm|im|i am)\s+(?:not|no longer)\s+(?:here|around|alive)"
    r"(?:\s+(?:anymore|any more|any longer))?\b",
    r"\b(?:thinking|thinkin|think|thought|thinkn)\s+(?:about|bout|abt|of)\s+(?:just\s+)?ending\s+(?:it|things|it all)\b"
    r"(?!\s+(?:with|between|for|early|on|off|properly|here|there)\b)",
    r"\b(?:want|wanna|gonna|going|ready|decided|planning|plan|need)\s+(?:to\s+)?end\s+(?:it|things)\s+"
    r"(?:tonight|today|tomorrow|this week|this weekend|soon|now|for good)\b(?!\s+(?:with|between)\b)",
    r"\bso\s+(?:that\s+)?i\s+(?:can't|cant|cannot|won't|wont|wouldn't|wouldnt|couldn't|couldnt|don't|dont|do not)\s+"
    r"(?:survive|swim\s+back(?:\s+up)?|come\s+back|be\s+saved|get\s+back\s+up)\s*(?:it\s*)?(?:[.?!,;]|$)",
    r"\bsewer\s*-?\s*slid(?:e|ing)\b(?!\s+(?:mean|means|meaning)\b)",
    r"\bself[- ]?delet(?:e|ing)\b(?!\s+(?:my|the|a|an|your|this|that|their|his|her|our)?\s*(?:account|accounts|message"
    r"|messages|post|posts|tweet|tweets|profile|data|comment|comments|photos?|files?|history|repo)\b)",
    # a quick or painless way of dying asked for oneself ("need to know for me"), not in a game
    r"(?s)^(?!.*\b(?:game|games|gaming|minecraft|speedrun|level|boss|character|sims|souls|fortnite|roblox|npc)\b)"
    r".*\b(?:quick|quicker|quickest|fast|faster|fastest|painless|less painful|least painful|surest|sure|certain"
    r"|reliable|easiest|best)\b.{0,40}\b(?:dying|to die|way to go)\b.{0,120}\b(?:(?:need|want)\s+to\s+know\s+for\s+me"
    r"|asking\s+for\s+(?:me|myself)(?!\s+and)|it's\s+for\s+me|its\s+for\s+me)\b",
    # German: a means and "so that it is over" ("Wie viele Schlaftabletten, damit es vorbei ist?")
    r"\b(?:tabletten|schlaftabletten|pillen|medikamente|schlafmittel|gift|strick|seil|springen|sprung|brücke|dach"
    r"|klinge|messer)\b.{0,80}\bdamit\s+(?:es|alles)\s+(?:endlich\s+|für immer\s+)?vorbei\s+ist\b",
)


def says_self_harm(text: str, phrases: tuple[str, ...] = EXPLICIT_PHRASES) -> bool:
    """Whether normalised ``text`` matches one of ``phrases`` (an explicit first-person statement
    or question of suicide or self-harm)."""
    norm = normalise(text).text
    return any(_compiled(p).search(norm) for p in phrases)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class MedicineGuard(BaseModel):
    """An ordinary medicine question that a head-only fire of the crisis check gives way to.

    The head reads a sentence embedding, which puts a pharmacist's question ("Can I take St John's
    wort with sertraline?", "Wie viel Paracetamol darf ich am Tag nehmen?") close to an overdose
    question. The guard holds where the normalised, accent-folded request is short (at most
    ``max_words`` words, at most two sentences), names a medicine (``medicine``), asks in the
    shape of a dose, interaction, timing or missed-dose question (``question``) and carries none
    of the ``risk`` cues (dying, an amount "enough to", not waking up, all of a pack, purpose
    clauses, ...). It never overrides an explicit phrase or the framework's request checks, only
    the head; where it does not hold, the head decides as before (a cue it lacks fails closed).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    medicine: str
    question: str
    risk: str
    max_words: int = 30

    def holds(self, text: str) -> bool:
        """Whether ``text`` is an ordinary medicine question by this guard."""
        norm = _fold(normalise(text).text)
        if len(norm.split()) > self.max_words or len(re.findall(r"[.!?]+(?=\s|$)", norm.rstrip(" .!?"))) > 1:
            return False
        return bool(
            _compiled(self.medicine).search(norm)
            and _compiled(self.question).search(norm)
            and not _compiled(self.risk).search(norm)
        )


def _fold(text: str) -> str:
    """``text`` without combining accents (``día`` -> ``dia``, ``Tag`` unchanged)."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))


# Names and words of medicines as a patient asks about them (accent-folded; stems where a
# language inflects). A name missing here only leaves the head to decide.
_MEDICINE = (
    r"\b(?:paracetamol\w*|acetaminophen|tylenol|panadol|calpol|doliprane|dafalgan|tachipirina|efferalgan|ibuprof\w*"
    r"|advil|nurofen|naproxen\w*|aspirin\w*|aspirina|diclofenac\w*|voltaren|codein\w*|co-codamol|tramadol|dipirona"
    r"|metamizol|novalgin|omeprazol\w*|pantoprazol\w*|lansoprazol\w*|sertralin\w*|zoloft|fluoxetin\w*|prozac"
    r"|citalopram|escitalopram|paroxetin\w*|venlafaxin\w*|duloxetin\w*|mirtazapin\w*|amitriptylin\w*|bupropion"
    r"|lithium|litio|quetiapin\w*|propranolol|amlodipin\w*|lisinopril|ramipril|losartan\w*|bisoprolol|metformin\w*"
    r"|insulin\w*|levothyrox\w*|thyrox\w*|l-thyroxin|euthyrox|warfarin\w*|varfarina|marcumar|sintrom|apixaban"
    r"|rivaroxaban|statin\w*|atorvastatin\w*|simvastatin\w*|amoxicil\w*|antibiot\w*|metronidazol\w*|doxycyclin\w*"
    r"|cetirizin\w*|loratadin\w*|antihistamin\w*|melatonin\w*|melatonina|zopiclon\w*|diazepam|lorazepam"
    r"|clonazepam|st john'?s wort|hierba de san juan|johanniskraut|millepertuis|erva de sao joao|iperico"
    r"|valerian\w*|baldrian|magnesi\w*|vitamin\w*|prednisolon\w*|cortison\w*|inhaler|nasal spray|nasenspray"
    r"|antidepress\w*|antidepresiv\w*|antidepressiv\w*|painkillers?|schmerzmittel|analgesic\w*|analgesi\w*"
    r"|pills?|tablets?|\w*tablett\w*|capsules?|meds|medication|medicine|medicament\w*|medikament\w*|medicin\w*|remedio|remedios"
    r"|pastillas?|pastiglia|pastiglie|compress\w*|comprim\w*|cachets?|tabletten?|pillen|pilule|pilula|pildora"
    r"|gelules?|tropfen|gotas|drops|syrup|sirop|jarabe|xarope|sciroppo|dose|doses|dosis|dosen|dosi|dosage|mg"
    r"|milligrams?|milligramm\w*|miligramos?|miligramas?|milligrammes?|milligrammi)\b"
)
# The shape of a pharmacist's question: may I, how much or how often, with what, before or after
# food, a dose missed or taken twice, splitting, storing, side effects, stopping.
_QUESTION = (
    r"\b(?:can i|could i|may i|should i|do i|is it (?:safe|ok|okay|fine|bad|normal|a problem|dangerous)|is it okay"
    r"|how (?:much|many|long|often|soon|should|do i)|what(?:'s| is) the (?:max|maximum|usual|normal|recommended"
    r"|starting|difference|gap)|what (?:happens|should i do) if i|which \w+ (?:is|are) (?:safe|fine|ok)|does"
    r"|puedo|se puede|debo|es (?:seguro|malo|normal)|cuant\w*|cada cuant\w*|que hago|cual es la dosis"
    r"|darf (?:ich|man)|kann ich|soll ich|muss ich|wie (?:viel|viele|oft|lange)|was (?:mache|tue) ich|welche"
    r"|ist \w+ mit|puis-je|je peux|est-ce que (?:je|j'|on)|peut-on|combien|que (?:dois-je|faire)|faut-il|quelle est"
    r"|posso|pode|devo|quant\w*|qual (?:e|a)|o que faco|si puo|quale|cosa faccio|mag ik|hoeveel|forgot|missed"
    r"|olvid\w*|vergessen|oublie|esqueci|dimenticat\w*|(?:la|lo) (?:tomo|prendo)|tomo agora|side effects"
    r"|nebenwirkungen|efectos secundarios|effets secondaires|efeitos colaterais|effetti collaterali)\b"
)
# Anything a person at risk says that a pharmacist's question does not: dying and killing, an
# amount "enough", not waking, all or the rest of a pack, a purpose, a plan, a feeling. Broad on
# purpose: a cue here only leaves the head to decide.
_RISK = (
    r"(?:\b(?:die|dies|died|dying|dead|death|deadly|kill\w*|lethal|fatal|overdos\w*|od|suicid\w*|unalive|end it"
    r"|end my|over with|be over|for good|forever|wake|waking|woke|never|enough|all of|all my|all the|whole|entire"
    r"|the rest|at once|in one go|at the same time tonight|tonight|stockpil\w*|saved|hoard\w*|hurt|harm|cut myself"
    r"|stop my|heart|coma|liver fail\w*|organ|gone|goodbye|anymore|any more|don't want|dont want|want to|wanna"
    r"|so (?:that )?i|to make (?:it|me|sure)|finish|sure|certain|quick\w*|fast\w*|painless|peaceful\w*|sleep forever"
    r"|no longer|end\w* (?:it|things|everything|my life)|bridge|rope|jump|bleach|alone|hopeless|pointless|tired of"
    r"|can't go on|cant go on|no point|mourir|meurs|meure|mort\w*|tuer|letal\w*|mortel\w*|surdos\w*|reveill\w*"
    r"|en finir|tout(?:e|es)? (?:la|le|les|ma|mes)|d'un coup|pour que|pour ne|suffi\w*|assez|morir|muer\w*|matar\w*"
    r"|sobredosis|despert\w*|acabar|todas|todos|toda la|todo el|de golpe|de una vez|para que|para no|pra nao|basta\w*"
    r"|sterb\w*|tod|tot|tote|todes\w*|todlich\w*|umbring\w*|uberdos\w*|aufwach\w*|aufzuwach\w*|vorbei"
    r"|schluss|alle|ganze|auf einmal|damit|genug|reicht|reichen|accident|find me|found|looks like|morrer|morte"
    r"|acordar|cartela|de uma vez|suficiente\w*|morire|morto|uccid\w*|svegli\w*|farla finita"
    r"|tutte|tutti|in una volta|servono|per non|dood|sterven|wakker|allemaal)\b"
    r"|\b(?:od|kms|ctb)\b)"
)
#: The medicine guard the build copies into the check (``CrisisCheck.guard``).
MEDICINE_GUARD = MedicineGuard(medicine=_MEDICINE, question=_QUESTION, risk=_RISK)
