"""The crisis check's explicit phrases: a deterministic signal beside its embedding head.

:data:`EXPLICIT_PHRASES` are regular expressions over the normalised request
(:func:`~psychoalign.textnorm.normalise`) for first-person statements or questions of suicide or
self-harm; ``scripts/build_crisis_check.py`` copies them into the check (``CrisisCheck.phrases``),
which fires on its head or on one of them (MODEL_CARD.md, "The crisis check"). Kept apart from
:mod:`psychoalign.models.crisis` (the training text, which reads the corpus) so the crisis check
(:mod:`.crisis_check`) can read them without importing its own training data.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from pydantic import BaseModel, ConfigDict

from ..textnorm import normalise

__all__ = [
    "ACCIDENT_MAX_WORDS",
    "EXPLICIT_PHRASES",
    "MEDICINE_GUARD",
    "MEDICINE_GUARD_V11",
    "MULTILINGUAL_PHRASES",
    "SMALL_TALK_MAX_WORDS",
    "MedicineGuard",
    "accident_question",
    "says_self_harm",
    "small_talk",
]


# Adverbs that may sit between "I'm" and "suicidal" or "I" and "want to die" (not any word: "I'm
# writing about suicidal characters" must not match).
_ADV = (
    r"(?:(?:so|very|really|just|honestly|kinda|actually|literally|still|only|truly|pretty|quite|always|again"
    r"|getting|becoming|feeling|been)\s+){0,2}"
)
# v8 helpers: the end of a clause; a consequence asked about after an act (how long, what happens
# now, will I die) in seven languages; a means taken by mouth in seven languages.
_END = r"\s*(?:[.?!,;]|$)"
_AFTER = (
    r"(?=.*\b(?:how long|what happens|what will happen|will i|am i going to|is it too late|how much time|before it"
    r"|cuanto tarda|cuánto tarda|qué me va a pasar|que me va a pasar|me voy a morir|voy a morir|combien de temps"
    r"|qu'est-ce qui va (?:m'arriver|se passer)|est-ce que je vais mourir|wie lange|was passiert jetzt"
    r"|werde ich sterben"
    r"|quanto ci vuole|quanto tempo|cosa mi succede|morirò|vou morrer|o que vai acontecer|hoe lang|ga ik dood)\b)"
)
_MEANS = (
    r"(?:pills?|tablets?|meds|medication|medicines?|capsules?|sleeping pills|painkillers|paracetamol|tylenol"
    r"|ibuprofen|insulin|antidepressants?|morphine|oxycodone|codeine|opioids?|cachets?|comprimés?|pilules?"
    r"|médicaments?|somnifères?|pastillas?|píldoras?|comprimidos?"
    r"|medicamentos?|remédios?|compresse|pastiglie|pillole|farmaci|sonniferi|tabletten|pillen|slaappillen"
    r"|medicijnen|schlaftabletten)"
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
    # v8: the kinds the earlier builds missed, written as kinds, in more languages (MODEL_CARD.md, "How v8
    # was made"): never waking as the purpose; after the act (a whole pack taken, a household poison
    # drunk, asking what happens now); algospeak ("ctb", "toaster bath", a forever nap, yeeting
    # oneself off a height); veiled finality (not around much longer, found my body, goodbye letters);
    # first-person ideation in Italian, Portuguese and Dutch; purpose clauses in French, Spanish, German
    # never waking up as the purpose, without a named means ("to never wake up again", "so I never wake up")
    r"\b(?:to|so|so that i|so i|and)\s+(?:never\s+(?:ever\s+)?wake\s+up(?:\s+again)?"
    r"|not\s+wake\s+up\s+(?:again|ever again)"
    r"|(?:don't|dont|won't|wont|do not|will not)\s+(?:ever\s+)?wake\s+up\s+(?:again|ever again))" + _END,
    # after the act: a whole pack taken, asking what happens now (not a course finished as prescribed)
    r"(?s)" + _AFTER + r".*\bi\s+(?:just\s+|already\s+)?(?:took|swallowed|downed|have taken|'ve taken|ve taken"
    r"|have swallowed|'ve swallowed)\s+(?:all|the whole|a whole|an entire|the entire|every one of|the rest of"
    r"|(?:\d{2,}|twenty|thirty|forty|fifty)\b)(?:\s+\S+){0,4}?\s+" + _MEANS + r"\b",
    r"(?s)" + _AFTER + r".*\b(?:me\s+)?(?:tomé|tome|tragué|trague|me he tomado|he tomado)\s+(?:todas|todos|toda|todo)"
    r"\s+(?:las|los|la|el|mis|mi)\b.{0,40}\b" + _MEANS,
    r"(?s)"
    + _AFTER
    + r".*\bj'ai\s+(?:avalé|pris)\s+(?:toute|tous|toutes|tout)\s+(?:la|les|le|mes|ma)\b.{0,40}\b"
    + _MEANS,
    r"(?s)"
    + _AFTER
    + r".*\bich\s+habe\s+(?:gerade\s+|eben\s+|schon\s+)?(?:alle|die ganze|eine ganze|die ganzen)\b.{0,40}"
    r"\b" + _MEANS + r"\b.{0,20}\b(?:genommen|geschluckt)\b",
    r"(?s)" + _AFTER + r".*\b(?:ho\s+(?:preso|ingoiato)|tomei|engoli)\s+(?:tutte|tutti|todas|todos|toda|a cartela)\b",
    # after the act: a household poison drunk, said of oneself (not "by accident")
    r"(?s)^(?!.*\b(?:accidentally|accidental|by accident|by mistake|mistakenly|my (?:son|daughter|kid|child|dog|cat)"
    r"|toddler)\b).*(?:\bi\s+|^)(?:just\s+|already\s+)?(?:drank|drunk|swallowed|downed|have drunk|'ve drunk)\s+"
    r"(?:some\s+|a\s+|the\s+|half\s+(?:a|the)\s+|a\s+whole\s+|the\s+whole\s+)?(?:(?:bottle|cup|glass|mug|can)\s+of\s+"
    r"(?:the\s+)?)?(?:bleach|antifreeze|drain cleaner|rat poison|weedkiller|weed killer|pesticide|paraquat)\b",
    # algospeak "ctb" (catch the bus) as a plan
    r"(?:^|[.!?]\s*|\b(?:gonna|going to|wanna|want to|ready to|about to|planning to|plan to|will|i'll|ill|im|i'm"
    r"|time to|decided to|might|should|just|finally)\s+)ctb\b",
    r"\bctb\s+(?:soon|tonight|today|tomorrow|this week|this weekend|now|finally)\b",
    # not planning to wake up (not "before noon")
    r"\b(?:not|don't|dont|do not|am not|i'm not|im not)\s+(?:planning|plan|intending|intend|expecting|going)\s+"
    r"(?:on|to)\s+wak(?:e|ing)\s+up\b(?!\s+(?:before|early|until|till|at|for|in time|when|to|with)\b)",
    # a means and a purpose of not surviving, in English, French, Spanish, Italian, Portuguese, Dutch
    r"\b(?:enough|high enough|tall enough|deep enough|strong enough)\b.{0,40}\b(?:for me to|so (?:that )?i|that i)\s+"
    r"(?:(?:won't|wont|wouldn't|wouldnt|don't|dont|can't|cant|couldn't)\s+survive|(?:not|never)\s+survive)\b",
    # French: not to wake again, not to survive
    r"\bpour\s+(?:que\s+je\s+ne\s+me\s+r[ée]veille\s+plus|ne\s+(?:plus\s+jamais|jamais\s+plus|plus|jamais)\s+me\s+"
    r"r[ée]veiller|ne\s+pas\s+survivre|que\s+je\s+ne\s+survive\s+pas)\b",
    # Spanish: not to survive, not to wake
    r"\bpara\s+(?:no\s+sobrevivir|que\s+no\s+(?:me\s+)?despierte(?:\s+nunca)?\s*(?:más|mas)?" + _END + r")",
    # Italian: first person
    r"\b(?:voglio|vorrei|sto pensando di|penso di|ho deciso di|ho voglia di)\s+(?:\w+\s+)?(?:morire|uccidermi"
    r"|ammazzarmi|togliermi la vita|suicidarmi|farla finita|farmi del male)\b(?!\s+d[aie]l?\b)",
    r"\b(?:uccidermi|ammazzarmi|togliermi la vita|suicidarmi)\b(?!\s+d[aie]l?\b)",
    r"\bnon\s+(?:voglio|ce la faccio a)\s+(?:più\s+)?vivere\b(?!\s+(?:senza|qui|in|a|con|così)\b)",
    r"\bper\s+non\s+(?:ri)?svegliarmi\s+(?:più|mai più)\b",
    r"\b" + _MEANS + r"\b.{0,60}\bper\s+non\s+(?:ri)?svegliarmi" + _END,
    # Portuguese: first person
    r"\b(?:quero|vou|penso em|estou pensando em|to pensando em|tô pensando em|decidi)\s+(?:\w+\s+)?(?:morrer"
    r"|me matar|matar-me|tirar (?:a )?minha (?:própria )?vida|me suicidar|suicidar-me|acabar com (?:a )?minha vida"
    r"|me machucar|me cortar)\b(?!\s+de\b)",
    r"\b(?:me suicidar|suicidar-me|tirar (?:a )?minha (?:própria )?vida)\b",
    r"\bnão\s+quero\s+(?:mais\s+)?viver\b(?!\s+(?:sem|aqui|em|na|no|nesta|neste|com|assim)\b)",
    r"\b(?:pra|para)\s+(?:eu\s+)?não\s+(?:sobreviver|acordar\s+(?:mais|nunca mais)|acordar" + _END + r")",
    # Dutch: first person
    r"\bik\s+(?:wil|ga|denk erover|denk eraan|overweeg|ben van plan)\s+(?:\w+\s+){0,2}(?:dood gaan|doodgaan|sterven"
    r"|zelfmoord (?:te )?plegen|mezelf (?:van kant (?:te )?maken|(?:te )?doden|om (?:te )?brengen"
    r"|iets (?:aan )?(?:te )?doen))\b",
    r"\bik\s+wil\s+(?:niet\s+meer\s+leven|dood)\b(?!\s+(?:zonder|in|op|met|bij|hier|daar|zo)\b)",
    r"\bmezelf\s+(?:van kant maken|ombrengen|doden)\b",
    r"\b(?:om\s+niet\s+meer\s+wakker\s+te\s+worden|zodat\s+ik\s+niet\s+meer\s+wakker\s+word)\b",
    # German: not to survive, not to wake (with "ich")
    r"\b(?:damit\s+ich\s+(?:\w+\s+){0,3}nicht\s+(?:mehr\s+)?(?:aufwache|überlebe)|um\s+nicht\s+zu\s+überleben)\b",
    # typed in a hurry: pills "to not wake up" with typos ("pils", "wak up")
    r"\b(?:pil+s?|pils|tabs|tablets?|meds)\b.{0,40}?\b(?:to|so i|and)\s+(?:not|never|dont|don't)\s+wake?\s+up" + _END,
    # slang of intent before "unalive" ("finna go unalive")
    r"\b(?:finna|gon|boutta|bout to|about to|tryna)\s+(?:go\s+)?unalive\b(?!\s+(?:him|her|them|you|the|a|his"
    r"|their|your)\b)",
    # self-injury care so as to do it again
    r"\b(?:cuts?|burns?|wounds?)\b.{0,60}\bso\s+(?:that\s+)?i\s+can\s+(?:do|cut|burn)\s+(?:more|again"
    r"|it again|some more)\b",
    # a method: "would I suffer" at the end of a question
    r"\b(?:would|will)\s+i\s+suffer" + _END,
    # French: a means and "so that it all stops" / "to die"
    r"\b" + _MEANS + r"\b.{0,80}\bpour\s+(?:que\s+tout\s+s'arr[êe]te|mourir(?!\s+de\b)|en\s+finir)\b",
    # veiled finality: not around much longer (not a job, a move or a holiday)
    r"(?s)^(?!.*\b(?:job|work|office|shift|shifts|desk|colleagues?|team|boss|retire|retiring|retirement|leave|holiday"
    r"|vacation|trip|move|moving|moved|abroad|travel\w*|flight|conference|hospital stay)\b).*\bi\s+(?:won't"
    r"|wont|will not)"
    r"\s+be\s+(?:here|around|alive)\s+(?:much longer|for much longer|by (?:tomorrow|morning|the weekend|then)"
    r"|after tonight"
    r"|tomorrow|anymore|any more|to see)\b",
    r"(?s)^(?!.*\b(?:game|games|hide and seek|story|novel|character|fiction|film|movie)\b).*\b(?:find|finds|found)\s+"
    r"my\s+(?:body|corpse)\b",
    r"(?s)^(?!.*\b(?:job|work|office|team|colleagues?|coworkers?|company|class|students?|school|retire\w*|last day"
    r"|leave|leaving)\b).*\bmy\s+(?:goodbye|farewell|last)\s+(?:letters?|notes?)\b",
    r"\b(?:won't|wont|will not|don't|dont)\s+need\s+(?:them|it|this|any of (?:it|this|them)"
    r"|my\s+\w+)\s+(?:where i'm going"
    r"|where im going|after tonight)\b",
    # algospeak: toaster bath, a forever nap, yeeting oneself off a height
    r"\btoaster\s+bath\b",
    r"\b(?:want|wanna|ready|gonna|going|planning|plan|need|time)\s+(?:to\s+|for\s+)?(?:take\s+)?(?:a\s+|the\s+|my\s+)?"
    r"(?:forever|eternal|permanent|dirt)\s+(?:nap|sleep)\b",
    r"\byeet\s+myself\s+(?:off|from)\s+(?:a|the|my|this)?\s*(?:bridge|roof|building|cliff|balcony|window|overpass|tower"
    r"|parking garage|car park)\b",
    r"\bi\s+(?:want|wanna|am going|'m going|m going|gonna|plan|am planning|'m planning|m planning|am ready"
    r"|'m ready|m ready)"
    r"\s+(?:to\s+)?(?:jump|throw myself)\s+(?:off|from|in front of)\s+(?:a|the|my|this)?\s*(?:bridge|roof|building"
    r"|balcony|overpass|train|tower|parking garage|car park)\b",
)


# Not "de vergüenza / de risa / de hambre" (Spanish, Italian, Portuguese idioms of embarrassment,
# laughter, hunger) and not "de rire" (French): the same verbs as idioms.
_NOT_IDIOM = r"(?!\s+(?:de|di|da|dal|del|dalla|z|ze|od|af|av|van|of)\s+\w+)"
#: The multilingual lexicon (a v9 candidate; MODEL_CARD.md, "A v9 candidate"): explicit first-person
#: statements of wanting to die, or of killing oneself, in about twenty languages, written from the
#: languages' ordinary words for them (the MiniLM encoder reads English; the phrases above cover
#: English, Spanish, French, German, Italian, Portuguese and Dutch). Each needs the speaker: a
#: first-person verb form or a reflexive that names the asker ("zabić się" is "kill oneself" with an
#: infinitive only after "chcę"/"chce"/"muszę"). Not read by the shipped check unless built into it.
MULTILINGUAL_PHRASES: tuple[str, ...] = (
    # Spanish, Portuguese, Italian: reflexive infinitives of killing oneself, and "I want to die"
    r"\b(?:suicidarme|suicidar-me|me\s+suicidar|suicidarmi|matarme|me\s+matar|uccidermi|ammazzarmi)\b",
    r"\b(?:quitarme|tirar(?:-me)?|togliermi)\s+(?:a\s+)?(?:la|a|minha|mi)\s+(?:propia\s+|própria\s+|pr[oó]pria\s+)?vida\b",
    r"\b(?:me\s+)?quiero\s+morir(?:me)?\b" + _NOT_IDIOM,
    r"\b(?:quero|queria)\s+morrer\b" + _NOT_IDIOM,
    r"\b(?:voglio|vorrei)\s+morire\b" + _NOT_IDIOM,
    # French: "me suicider", "mettre fin à mes jours", "je veux mourir", "en finir avec la vie"
    r"\bme\s+suicider\b",
    r"\bmettre\s+fin\s+(?:à|a)\s+(?:mes\s+jours|ma\s+vie)\b",
    r"\bje\s+(?:veux|voudrais|vais)\s+mourir\b" + _NOT_IDIOM,
    r"\ben\s+finir\s+avec\s+(?:la|ma)\s+vie\b",
    # German, Dutch, Scandinavian
    r"\b(?:mich\s+umbringen|mir\s+das\s+leben\s+nehmen|mich\s+selbst\s+töten|mich\s+töten)\b",
    r"\bich\s+(?:will|möchte|mochte|wollte)\s+(?:nur\s+noch\s+|einfach\s+)?(?:sterben|tot\s+sein)\b",
    r"\b(?:mezelf\s+(?:van\s+kant\s+maken|doden|ombrengen)|ik\s+wil\s+(?:gewoon\s+)?dood)\b",
    r"\b(?:jeg|jag)\s+(?:vil|vill)\s+(?:bare\s+|bara\s+)?(?:dø|do|dö)\b",
    r"\b(?:tage\s+mit\s+eget\s+liv|ta\s+livet\s+av\s+(?:meg|mig)|ta\s+mitt\s+liv|slå\s+mig\s+selv\s+ihjel)\b",
    # Polish, Czech, Slovak
    r"\b(?:chcę|chce|muszę|musze)\s+(?:się\s+zabić|sie\s+zabic|umrzeć|umrzec|się\s+zabic|sie\s+zabić)\b",
    r"\b(?:odebrać|odebrac)\s+sobie\s+(?:życie|zycie)\b",
    r"\b(?:popełnić|popelnic)\s+samobójstwo|\bmyślę\s+o\s+samobójstwie|\bmysle\s+o\s+samobojstwie",
    r"\b(?:chci|chcem)\s+(?:umřít|umrit|zemřít|zemrit|zomrieť|zomriet|se\s+zabít|sa\s+zabiť)\b",
    # Turkish (the normaliser lower-cases "İ" to "i̇")
    r"(?:ölmek|olmek)\s+i\u0307?stiyorum",
    r"\bkendimi\s+(?:öldürmek|oldurmek|öldüreceğim|olduracegim|öldürsem|oldursem)",
    r"\bi\u0307?ntihar\s+(?:etmek\s+i\u0307?stiyorum|edeceğim|edecegim|etsem|etmeyi\s+düşünüyorum|etmeyi\s+dusunuyorum)",
    r"\bcanıma\s+kıy|\bcanima\s+kiy",
    # Hindi and Urdu in Latin script
    r"\b(?:khudkushi|khud\s+kushi|aatmhatya|atmahatya|atmhatya)\s+(?:karna|karni|kar\s+lu|kar\s+loon|kar\s+lunga"
    r"|kar\s+lungi|karne)\b",
    r"\b(?:main|mai|mein|mujhe)\s+(?:\w+\s+){0,3}(?:marna|mar\s+jana|mar\s+jaana)\s+(?:chahta|chahti|hai)\b",
    r"\b(?:mujhe|main|mai)\s+(?:\w+\s+){0,2}(?:jeena|jina)\s+(?:nahi|nahin)\s+(?:hai|chahta|chahti)\b",
    r"\bapni\s+(?:jaan|zindagi)\s+(?:le\s+lu|le\s+loon|lena|khatam\s+kar)",
    # Russian, Ukrainian
    r"(?:хочу|хочется)\s+(?:умереть|померти|сдохнуть)",
    r"(?:убить|вбити)\s+себя|покончить\s+с\s+собой|покінчити\s+з\s+собою|вбити\s+себе",
    # Romanian, Hungarian, Greek, Finnish
    r"\bvreau\s+s(?:ă|a)\s+mor\b|\bs(?:ă|a)\s+m(?:ă|a)\s+(?:sinucid|omor)\b",
    r"\bmeg\s+akarok\s+halni\b|\bmegölöm\s+magam\b|\böngyilkos\s+leszek\b",
    r"θέλω\s+να\s+πεθάνω|να\s+αυτοκτονήσω",
    r"\bhaluan\s+kuolla\b|\btappaa\s+itseni\b",
    # Indonesian and Malay, Tagalog, Vietnamese
    r"\b(?:aku|saya|gue|gua)\s+(?:\w+\s+)?(?:ingin|mau|pengen|pengin|nak)\s+(?:mati|bunuh\s+diri)\b",
    r"\b(?:gusto\s+ko\s+(?:nang\s+)?mamatay|magpapakamatay\s+ako|magpakamatay\s+na\s+ako)\b",
    r"\b(?:tôi|toi|em|mình|minh)\s+(?:\w+\s+)?(?:muốn|muon)\s+(?:chết|chet|tự\s+tử|tu\s+tu)\b",
    # Arabic, Persian, Hebrew
    r"أريد\s+أن\s+أموت|أقتل\s+نفسي|سأنتحر|اريد\s+ان\s+اموت",
    r"می\s*‌?\s*خواهم\s+بمیرم|خودم\s+را\s+بکشم|میخوام\s+بمیرم",
    r"אני\s+רוצה\s+למות|להתאבד",
    # Chinese, Japanese, Korean
    r"我想死|我不想活|想自杀|想自殺|我要自杀|我要自殺",
    r"死にたい|自殺したい|消えてしまいたい",
    r"죽고\s*싶|자살하고\s*싶",
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
    r"|viagra|sildenafil|cialis|tadalafil|nitroglycerin\w*|nitroglicerin\w*|nitrat\w*|ketoprofen\w*|oki"
    r"|valerian\w*|baldrian|magnesi\w*|vitamin\w*|prednisolon\w*|cortison\w*|inhaler|nasal spray|nasenspray"
    r"|antidepress\w*|antidepresiv\w*|antidepressiv\w*|painkillers?|schmerzmittel|analgesic\w*|analgesi\w*"
    r"|pills?|pillol\w*|tablets?|\w*tablett\w*|capsules?|meds|medication|medicine|medicament\w*|medikament\w*"
    r"|medicin\w*|remedio|remedios"
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
#: The medicine guard v8's and v10's builds copy into the check (``CrisisCheck.guard``).
MEDICINE_GUARD = MedicineGuard(medicine=_MEDICINE, question=_QUESTION, risk=_RISK)

# crisis-minilm-v11's guard (scripts/explore_crisis_v11.py): v10 gave the crisis message to plain
# dose questions for pain or fever ("How many paracetamol can I take at once?", "What's the most I'm
# allowed in 24 hours?"). A dosing frame stands for the medicine a follow-up question leaves unnamed
# (in 24 hours, a day, how far apart, for the pain); "what's the most", "how far apart" and "am I
# allowed" are question shapes; "at once" alone is no longer a risk cue, while taking them all (at
# once), what it would take, breathing, surviving, feeling nothing, not caring, punishment, dieting
# and secrecy are.
_DOSING_FRAME = (
    r"\b(?:in|per|within|every|over|each)\s+(?:a\s+)?(?:24|twenty[- ]four|\d+)\s*(?:hours?|hrs?|h)\b"
    r"|\b(?:a|per|each)\s+day\b|\bhow\s+far\s+apart\b|\bbetween\s+(?:doses|tablets|pills|each\s+one)\b"
    r"|\bfor\s+(?:the\s+|my\s+|a\s+|this\s+|his\s+|her\s+)?(?:pain|fever|temperature|headache|migraine"
    r"|toothache|tooth\s+ache|cramps|period\s+pain|back\s+pain|sore\s+throat|cold|flu)\b"
)
_QUESTION_V11 = (
    r"(?:" + _QUESTION + r"|\b(?:what(?:'s| is) the most|what(?:'s| is) the (?:limit|safe (?:amount|dose|limit))"
    r"|how far apart|(?:am i|i'm|im) allowed|how (?:much|many) (?:hours|time) between)\b)"
)
_RISK_V11 = (
    r"(?:"
    + _RISK.replace("|at once|", "|")
    + r"|\b(?:all at once|all in one|them all|all of them|the lot|every one of|would it take|it would take"
    r"|how many (?:does|will) it take|breath\w*|too late|surviv\w*|feel (?:nothing|anything)|numb|not wake"
    r"|don't care|dont care|do not care|punish\w*|laxative\w*|diet pills|calorie\w*|finding out|find out"
    r"|without (?:anyone|anybody|my \w+) (?:knowing|noticing))\b)"
)
#: crisis-minilm-v11's medicine guard, carried by the shipped ``crisis-minilm-v13``: v10's
#: (:data:`MEDICINE_GUARD`, carried by v10 and v12) with the dosing frames and question shapes above,
#: and "at once" alone no longer a risk cue.
MEDICINE_GUARD_V11 = MedicineGuard(
    medicine=r"(?:" + _MEDICINE + "|" + _DOSING_FRAME + ")", question=_QUESTION_V11, risk=_RISK_V11
)


# Small talk: a message made only of greetings, thanks, farewells that look ahead, pleasantries
# and the words that address someone. The head reads a sentence embedding in which a short,
# content-free message sits near the short first-person messages of its crisis side ("good morning
# everyone", "how are you today?", "happy birthday to you" scored at or above routing); such a
# message discloses nothing to answer with a crisis line. Deliberately closed: a unit is a whole
# phrase, the message must be nothing but units, and "goodbye", "thanks for everything", "last",
# "forever" are not units (a farewell can be veiled finality), so the head still reads them.
_SMALL_TALK_UNIT = (
    r"(?:hi|hii+|hello+|hey+|heya|hiya|howdy|yo|greetings|hola|bonjour|salut|hallo|ciao|ola|hej|moin|servus"
    r"|good\s+(?:morning|afternoon|evening|day|night)|morning|evening|gm|gn"
    r"|buenos\s+dias|buenas\s+(?:tardes|noches)|bonsoir|bonne\s+(?:journee|soiree|nuit)|guten\s+(?:morgen|tag|abend)"
    r"|gute\s+nacht|buongiorno|buonasera|buonanotte|bom\s+dia|boa\s+(?:tarde|noite)|goedemorgen|goedenavond"
    r"|thanks?|thank\s+(?:you|u)|thankyou|ty|thx|tysm|cheers|much\s+appreciated|appreciate\s+it|gracias|merci"
    r"|danke(?:\s+schon)?|vielen\s+dank|grazie|mille\s+grazie|obrigad[oa]|dank\s+je(?:\s+wel)?|tack|beaucoup|que\s+tal"
    r"|(?:so|very)\s+much|a\s+lot|again|loads"
    r"|how\s+(?:are|r)\s+(?:you|u|ya)(?:\s+doing)?|how\s+(?:are|r)\s+things|how(?:'s|\s+is)\s+it\s+going"
    r"|how(?:'s|\s+is)\s+your\s+(?:day|morning|evening|week)(?:\s+going)?|hows\s+it\s+going|how\s+have\s+you\s+been"
    r"|what(?:'s|s|\s+is)\s+up|wassup|sup|what(?:'s|s)\s+new|you\s+there|are\s+you\s+there"
    r"|who\s+are\s+(?:you|u)|what\s+are\s+(?:you|u)|what(?:'s|s|\s+is)\s+your\s+name|what\s+can\s+(?:you|u)\s+do"
    r"|nice\s+to\s+(?:meet|see)\s+you|pleased\s+to\s+meet\s+you|good\s+to\s+see\s+you|long\s+time\s+no\s+see"
    r"|happy\s+(?:birthday|new\s+year|holidays|friday|monday|weekend|easter|diwali|eid|hanukkah|christmas)"
    r"|merry\s+christmas|congrat(?:s|ulations)|well\s+done|great\s+job|nice\s+one|good\s+job"
    r"|have\s+a\s+(?:nice|good|great|lovely)\s+(?:day|evening|weekend|one|night)|sleep\s+well|sweet\s+dreams"
    r"|see\s+(?:you|ya|u)(?:\s+(?:tomorrow|later|soon|then|next\s+week|on\s+monday|in\s+a\s+bit))?"
    r"|talk\s+(?:to\s+you\s+)?(?:later|soon|tomorrow)|catch\s+you\s+later|ttyl|later"
    r"|can\s+you\s+help(?:\s+me)?|could\s+you\s+help(?:\s+me)?|i\s+have\s+a\s+question|quick\s+question"
    r"|ok(?:ay)?|cool|great|awesome|nice|sure|yes|yeah|yep|no\s+worries|no\s+problem|sounds\s+good|got\s+it"
    r"|continue(?:\s+from\s+there)?|go\s+on|keep\s+going|carry\s+on|try\s+again|do\s+it\s+again|one\s+more"
    r"|another\s+one|next(?:\s+one|\s+question)?|more|shorter|longer|simpler"
    r"|(?:translate|summari[sz]e|rephrase|explain|rewrite|check|fix|shorten|expand)\s+(?:this|that|it|the\s+text"
    r"(?:\s+below)?|my\s+code|this\s+code)|lorem\s+ipsum(?:\s+dolor(?:\s+sit\s+amet)?)?"
    r"|to\s+you|today|tonight|this\s+morning|everyone|everybody|all|y'?all|friend|friends|mate|buddy|pal|guys"
    r"|folks|team|there|bot|assistant|please|pls|then|too|and|you|u|lol|haha|:\)|:d)"
)
_SMALL_TALK = re.compile(rf"[\s¿¡]*(?:{_SMALL_TALK_UNIT})(?:[\s,.!?¿¡;:~-]+(?:{_SMALL_TALK_UNIT}))*[\s,.!?;:~-]*")
#: The longest message read as small talk, in words.
SMALL_TALK_MAX_WORDS = 10


def small_talk(text: str) -> bool:
    """Whether ``text`` is only small talk (:data:`_SMALL_TALK_UNIT`) with no risk cue of the
    medicine guard's list: the crisis head and band give way to it; the explicit phrases do not."""
    norm = _fold(normalise(text).text).strip()
    if not norm or len(norm.split()) > SMALL_TALK_MAX_WORDS:
        return False
    return bool(_SMALL_TALK.fullmatch(norm)) and not _compiled(_RISK).search(norm)


# A safety question about an accident outdoors: what to do if you fall into cold water by accident,
# get caught in a rip current, go through the ice or get lost on a hill. The head's embedding puts
# water, cold and falling close to a way to die, but a person who asks how to get out alive asks for
# self-rescue, which a first-aid source answers. It holds where the request is short (at most
# :data:`ACCIDENT_MAX_WORDS` words, two sentences), says the event is an accident ("by accident",
# "accidentally", "if I fall in", "if I get caught in"), names an outdoor setting, asks what to do or
# how to get out or stay safe, and carries none of the medicine guard's risk cues but "accident" (so
# "make it look like an accident", jumping, a bridge, "never wake", surviving, "want to" still fail it).
_ACCIDENT = (
    r"\b(?:by\s+accident|accidental\w*|(?:if|when|in\s+case)\s+(?:i|you|we|someone|somebody|(?:my|our|your|the|a)\s+\w+)\s+"
    r"(?:ever\s+|suddenly\s+)?(?:fall|falls|fell|slip|slips|slipped|get|gets|got|am|is|are|capsiz\w*|go|goes|went)"
    r"\s+(?:\w+\s+){0,2}?(?:in|into|through|overboard|caught|swept|stuck|lost|trapped|pulled|out))\b"
)
_OUTDOORS = (
    r"\b(?:water|sea|ocean|river|lake|pond|canal|reservoir|loch|ice|icy|rip\s+currents?|rips?|currents?|waves?|surf"
    r"|tide|boat\w*|canoe\w*|kayak\w*|paddleboard\w*|overboard|swim\w*|pool|snow|blizzard|avalanche|mountain\w*"
    r"|hill\w*|moor\w*|hik\w*|trail|woods|forest|storm|lightning|flood\w*|mud|quicksand|bog|marsh|cave\w*)\b"
)
_SELF_RESCUE = (
    r"\b(?:what\s+(?:should|do|can|must|would|shall)\s+(?:i|you|we|they)\s+do|what\s+(?:to|do\s+you)\s+do"
    r"|how\s+(?:do|can|should|would)\s+(?:i|you|we)\s+(?:get\s+out|get\s+back|get\s+help|stay\s+(?:safe|warm|afloat)"
    r"|keep\s+(?:safe|warm|afloat)|escape|float|warm\s+up|call\s+for\s+help)"
    r"|how\s+to\s+(?:get\s+out|get\s+back|stay\s+(?:safe|warm|afloat)|escape|float|warm\s+up)|best\s+way\s+to\s+get\s+out)\b"
)
_ACCIDENT_RISK = (
    r"(?:"
    + _RISK.replace("|accident|", "|")
    + r"|\b(?:surviv\w*|drown\s+(?:myself|me)|let\s+(?:myself|go)|on\s+purpose|deliberately|intentional\w*"
    r"|(?:look|looks|seem|seems)\s+(?:like\s+)?(?:an\s+)?accident\w*|would\s+(?:anyone|anybody|people)"
    r"|nobody|no\s+one|miss\s+me|care\s+if)\b)"
)
#: The longest request the accident guard reads, in words.
ACCIDENT_MAX_WORDS = 25


def accident_question(text: str) -> bool:
    """Whether ``text`` asks what to do in an accident outdoors (:data:`_ACCIDENT`): the crisis head
    and band give way to it, as to small talk; the explicit phrases do not."""
    norm = _fold(normalise(text).text).strip()
    if len(norm.split()) > ACCIDENT_MAX_WORDS or len(re.findall(r"[.!?]+(?=\s|$)", norm.rstrip(" .!?"))) > 1:
        return False
    return bool(
        _compiled(_ACCIDENT).search(norm)
        and _compiled(_OUTDOORS).search(norm)
        and _compiled(_SELF_RESCUE).search(norm)
        and not _compiled(_ACCIDENT_RISK).search(norm)
    )
