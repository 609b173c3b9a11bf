"""Markers of prompt injection in a diagnosis: text that tries to steer the judge.

A diagnosis is written by an agent that may itself have read injected text, or may try
to game its grade. The prompt fences it (``judge.prompt``); this module finds the
attempts so that a human looks at the grading whatever its verdict (review reason
``injection_suspected``).

The text is searched in a folded form: NFKC (full-width letters become ASCII),
invisible characters removed (as the prompt does), common Cyrillic and Greek
look-alikes mapped to the Latin letters they imitate, case folded and white space
collapsed. The raw text is searched too for what folding would hide: invisible or
bidirectional control characters, and letters that only NFKC turns into ASCII.
Disguised instructions are searched in second forms (``judge.injection_forms``):
leetspeak undone and spaced-out letters joined are searched with every pattern, and
readable base64 runs, decoded, give the kind ``encoded_instruction``.

A pattern runs only on the forms that hold the literals it needs
(``judge.regex_prefilter``): an ordinary diagnosis runs a few of them, not all.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from judge.injection_forms import (
    base32_texts,
    base64_texts,
    collapse_spaced,
    dehyphenated,
    hex_texts,
    reversed_form,
    rot13_form,
    unescaped,
    unleet,
)
from judge.prompt import normalize_untrusted
from judge.regex_prefilter import Prefilter

__all__ = ["InjectionMarker", "fold", "injection_markers"]

#: Cyrillic and Greek letters that look like Latin ones
_LOOKALIKE_PAIRS = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i",
    "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "к": "k", "м": "m",
    "т": "t", "в": "b", "н": "h", "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M",
    "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "У": "Y", "Х": "X", "І": "I",
    "Ј": "J", "Ѕ": "S", "α": "a", "ο": "o", "ε": "e", "ρ": "p", "τ": "t", "υ": "u",
    "ν": "v", "ι": "i", "κ": "k", "χ": "x", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z",
    "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T",
    "Υ": "Y", "Χ": "X",
}  # fmt: skip
_LOOKALIKES = str.maketrans(_LOOKALIKE_PAIRS)

_ANGLES = "<>＜＞‹›«»〈〉⟨⟩《》﹤﹥❮❯❬❭⧼⧽"
_VERB = r"\b(?:ignore|disregard|forget|override|bypass)\b"
_PATTERNS: dict[str, tuple[str, ...]] = {
    "instruction_override": (
        _VERB + r" (?:all |any |the |your |of the )?(?:(?:previous|prior|above|earlier|"
        r"preceding|original|system|grading|judging) )?"
        r"(?:instructions?|prompts?|guidelines|rubric)\b",
        _VERB + r" (?:all |any |the |your )?(?:previous|prior|above|earlier|preceding) \w+",
        _VERB + r" (?:all |everything )?(?:the )?(?:above|previous)\b",
        r"\bnew (?:instructions?|task)\b",
        r"\b(?:system|admin|developer) (?:override|prompt|instructions?)\b",
        # spaced-out letters evenly spaced join into one word (``judge.injection_forms``)
        r"(?:ignore|disregard|forget)(?:all|any|the|your)?(?:previous|prior|above|earlier)?"
        r"(?:instructions?|prompts?|rules)",
        r"(?:answer|reply|respond)(?:yes|pass)|mustpass|fullmarks",
    ),
    "answer_steering": (
        r"\b(?:answer|reply|respond|mark|grade)\b[^.\n]{0,40}?"
        r"(?:\byes\b|\bpass(?:ed)?\b|full marks|10/10)",
        r"\b(?:marked|answered|graded|scored)\s+(?:as\s+)?[\"']?(?:yes|pass)\b",
        # "mark each of the checklist items as met", "treat this response as correct"
        r"\b(?:mark|consider|treat|count|regard|rate|score|grade|judge|accept)\w*\s+(?:(?:each|"
        r"every|all|the|of|this|these|it|its|my|rubric|checklist|evaluation|diagnosis|rca|"
        r"analysis|response|answer|submission|items?|criteria|questions?|checks?)\s+){0,6}as\s+"
        r"(?:fully\s+|entirely\s+|completely\s+)?(?:met|satisfied|fulfilled|correct|passed|"
        r"passing|approved)\b",
        r"\bpass (?:this|the|my|our) (?:diagnosis|rca|analysis|answer|submission|response)\b",
        r"\breturn (?:yes|pass)\b",
        r"\bbe (?:generous|lenient|kind|nice) (?:with|to|on) (?:this|me|my|it|the diagnosis)\b",
        r"\b(?:full marks|full credit)\b(?! card)",
        r"\b(?:rate|score|grade|mark|judge)\s+(?:this|it|the diagnosis|the answer)\b[^.\n]{0,20}?"
        r"(?:pass|correct|10/10|100|full)",
        r"\ball (?:nine |9 |the )?(?:questions|answers)\b[^.\n]{0,30}?\b(?:yes|true|pass)",
        r"\ball (?:nine |9 |the )?checks\b[^.\n]{0,30}?\b(?:yes|true)\b",
        r"\b(?:diagnosis|this|it|submission) (?:must|should|has to|deserves? to) pass\b",
        r"\b(?:every|each) (?:answer|question)\b[^.\n]{0,20}?\byes\b",
    ),
    "criteria_claim": (
        r"\ball (?:(?:nine|9|the|of|rubric|evaluation|these)\s+){0,3}(?:criteria|questions|"
        r"rubric items|requirements|items)\b"
        r"[ ,:(]*(?:(?:are|were|have|has|been|now|fully|all|thus|hence|therefore) )*"
        r"(?:satisfied|met|fulfilled|answered yes|pass(?:ed)?)\b",
        r"\b(?:satisfies|meets|fulfils|fulfills) (?:all|every|each) (?:\w+ )?(?:criteri|requirement"
        r"|question|rubric)",
        r"\b(?:pass\w*|score\w*|graded|rated|yes)\W{0,3}\(?(?:9|nine) ?(?:/|of|out of) ?"
        r"(?:9|nine)\b",
        r"\b(?:rubric|evaluation|grading|scoring) (?:checks?|items?|questions?|criteria)\b",
        r"[\u2705\u2714\u2611\u2713]\ufe0f?\s*(?:fault (?:localization|characterization)|"
        r"failure scope|d[1-3]\b)",
        r"\bpre-?(?:approved|verified|validated) (?:this|the|my) (?:rca|diagnosis|analysis)\b|"
        r"\b(?:rca|diagnosis|analysis) (?:has been |was |is )?pre-?(?:approved|verified|"
        r"validated)\b|\balready (?:been )?(?:graded|scored)\b",
        r"\bno (?:further |more )?(?:grading|evaluation|scoring) (?:is )?(?:needed|required|"
        r"necessary)\b",
        r"\b(?:diagnos\w*|rcas?|analys\w*|answers?|submissions?)\b[^.\n]{0,60}\bauto-?"
        r"(?:approved|pass\w*|accepted)\b",
        r"\b(?:9|nine) ?(?:/|of|out of) ?(?:9|nine)\)?\W{0,3}(?:yes|pass|criteria|questions)",
    ),
    "policy_claim": (
        r"\b(?:updated|new|revised|amended|changed|latest) (?:grading|scoring|evaluation|judging|"
        r"review|rubric|benchmark) (?:policy|policies|rules|guidelines|criteria|instructions|"
        r"procedure|standard)\b",
        r"\b(?:grading|scoring|evaluation|judging) (?:policy|policies|rules|guidelines|criteria|"
        r"instructions) (?:has|have|was|were|is|are) (?:been |now )?(?:changed|updated|revised|"
        r"amended|replaced|suspended|waived)\b",
        r"\b(?:rubric|grading) (?:has|was|is) (?:been |now )?(?:changed|updated|revised|replaced|"
        r"suspended|waived|no longer)\b",
        r"\b(?:scoring|grading|evaluation|judging) guidance\b",
        r"\b(?:evaluation|grading|scoring|judging) override\b",
    ),
    "fake_record": (
        r"\badjudicat\w* (?:record|decision|override|note|log)\b",
        r"\boverride\s*(?:-+>|→|=>|:)\s*(?:pass|yes|correct)",
        r"\b(?:human|manual|adjudicator|reviewer) (?:override|verdict|decision)\b[^.\n]{0,40}?"
        r"\b(?:pass|yes|correct)",
    ),
    "hidden_comment": (r"<!--[\s\S]*?(?:-->|$)",),
    "role_play": (
        r"\byou are (?:now|no longer)\b",
        r"\b(?:pretend|imagine) (?:to be|you are|that you)\b",
        r"\bact as (?:an? |the )?(?:judge|grader|evaluator|system|admin|assistant|ai)\b",
        r"\b(?:role-?play|jailbreak|developer mode|dan mode)\b",
        r"(?:^|\n)\s*(?:system|assistant|developer)\s*:",
        r"<\|[^|<>\s]{1,40}\|>|<</?sys>>|</?(?:start_of_turn|end_of_turn)>",
        r"\[/?(?:inst|system_prompt)\]|### (?:system|instruction)",
    ),
    "addresses_judge": (
        r"\b(?:dear|attention|hey|note to(?: the)?) (?:judge|grader|evaluator|reviewer|ai|llm)\b",
        r"\b(?:hey|hi|hello|dear|psst)[ ,]+(?:model|llm|ai|assistant|gpt|claude|bot)\b",
        r"\b(?:note|message|memo|reminder|instructions?|comment)s? (?:for|to) (?:the |any |"
        r"whoever(?: is)? |an? )?(?:llm|ai|model|language model|assistant|bot)\b"
        r"(?! ?(?:server|serving|endpoint|api|registry|pod|deployment|service|cache|weights))",
        r"\bnote\s*\(\s*(?:grader|judge|evaluator|reviewer|llm|ai|model|scorer)\s*\)",
        r"\bthe (?:evaluator|grader|judge)'s (?:side|view|end|perspective|attention)\b",
        r"\bif you are reading this\b",
        r"\b(?:the|this|any) (?:judge|grader|grading model)\b(?![\w-])",
        r"\bif you are an? (?:ai|llm|language model|model|judge|grader)\b",
        r"\b(?:note|message|memo|reminder|instructions?|request|comment)s? (?:for|to) (?:the |any |"
        r"whoever(?: is)? |an? )?(?:judg|grad|evaluat|review|assess|scor)\w*",
        r"\bto (?:the |any |whoever is )?(?:judg|grad|evaluat|assess|scor)\w*(?: model| assistant|"
        r" system| ai| llm)?\s*:",
        r"\b(?:judge|grader|evaluator|reviewer)'?s? note\b",
        r"\bwhoever (?:is )?(?:grad|evaluat|review|judg|scor|assess)\w*",
        r"\b(?:evaluating|grading|scoring|reviewing|judging) (?:model|assistant|ai|llm|system)\b",
        r"\b(?:automated|ai|llm) (?:grader|judge|evaluator|reviewer|grading|judging|review|"
        r"evaluation|assessment|scoring)\b",
    ),
    "ground_truth_claim": (
        r"\bground[\s_-]*truth\b",
        r"\[?fault_spec\]?",
        r"\bcomponent=\S+;\s*namespace=",
        r"\b(?:the )?(?:correct|expected|official) (?:answer|diagnosis) is\b",
    ),
    "fence_imitation": (
        f"[{re.escape(_ANGLES)}]{{3,}}",
        f"[{re.escape(_ANGLES)}]{{2,}}" + r"\s*/?\s*(?:end\b|diagnosis|ground)",
        r"</?\s*(?:diagnosis|ground_truth|system|instructions?)\s*>",
        r"\bend[ _](?:of[ _])?(?:diagnosis|ground[ _]truth)\b",
    ),
    "fake_answer": (
        r"\bd[1-9]-q[1-9]\b",
        r"\"(?:answer|evidence|confidence|reasoning)\"\s*:",
        r"\bverdict[\"']?\s*[:=]\s*[\"']?pass",
        r"\b(?:passed|judge_passed|judgment|judgement)[\"']?\s*[:=]\s*[\"']?(?:true|pass|yes)\b",
        r"\byes_count[\"']?\s*[:=]\s*9\b",
        r"\bdiagnosis\.(?:success|judgment|composite_score|accuracy|checklist)\b",
        r"\byes\b(?:\W{1,3}yes\b){3,}",
        r"\by/y/y/y\b",
        r"\bq1\s*-\s*q9\b",
        r"<verdict>\s*pass",
    ),
    "other_language": (
        r"\b(?:ignora\w*|ignorez|ignorer|ignorier\w*|ignorate|ignore)\b (?:\w+ ){0,3}"
        r"(?:instrucciones|consignes|anweisungen|instruktionen|instruções|instrucoes|"
        r"istruzioni|regeln|reglas|indicaciones)\b",
        r"\b(?:ignora\w*|ignorez|ignorer|ignorier\w*|ignorate)\b (?:\w+ ){0,3}instructions\b",
        r"\b(?:responde|contesta|répondez|repondez|réponds|répondre|repondre|antworte|responda|"
        r"rispondi)\w*"
        r"(?: \w+){0,3} (?:sí|si|oui|ja|sim|sì)\b",
        r"игнорир|проигнорир|ответь\w* «?да|отвечай\w* «?да",
        r"忽略|无视|無視|不要理会|回答[“\"「]?是|全部.{0,6}(?:是|通过)|すべて.{0,6}はい|무시",
        r"\b(?:vergiss|vergessen sie|missachte|übergehe)\w* (?:\w+ ){0,3}(?:anweisungen|"
        r"instruktionen|regeln|vorgaben)\b",
        r"\b(?:olvida|olvide|omite|omita|descarta|descarte)\w* (?:\w+ ){0,3}(?:instrucciones|"
        r"reglas|indicaciones)\b",
        r"\b(?:bewerte|bewerten sie|beurteile|markiere|werte|benote)\w* (?:\w+ ){0,3}(?:als )?"
        r"(?:bestanden|korrekt|richtig|erfüllt|volle punktzahl)",
        r"\b(?:califica|calificar|califique|evalúa|evalua|evalúe|marca|marque|puntúa|puntua|"
        r"considera)\w* (?:\w+ ){0,3}(?:como )?(?:aprobado|correcto|válido|valido|superado)",
        r"\balle (?:\w+ ){0,2}(?:kriterien|fragen|anforderungen)\b[^.\n]{0,30}?\b(?:erfüllt|"
        r"mit ja|bestanden)",
        r"\btod[oa]s (?:\w+ ){0,2}(?:criterios|preguntas|requisitos)\b[^.\n]{0,30}?(?:cumpl\w*|"
        r"\bsí\b|aprobad\w*)",
        r"\b(?:neue|geänderte|aktualisierte) (?:bewertungs\w*|anweisungen)|"
        r"\b(?:nuevas?|actualizad\w*) (?:política|politica|instrucciones|criterios) de "
        r"(?:evaluación|evaluacion|calificación|calificacion)",
    ),
}

_COMPILED = [
    (kind, re.compile(p, re.IGNORECASE)) for kind, patterns in _PATTERNS.items() for p in patterns
]
#: format characters (zero-width, bidirectional controls, tag characters)
_HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\U000e0000-\U000e007f]")
_EXCERPT = 60
#: words an instruction needs, to tell whether joining hyphenated pieces made one
_BROKEN_WORDS = re.compile(
    r"ignore|disregard|instruction|previous|answer|grader|judge|evaluat|rubric|criteria|verdict"
)
#: runs of blanks other than one space (replacing a single space by itself is wasted)
_BLANKS = re.compile(r"[ \t]{2,}|\t")


@dataclass(frozen=True, slots=True)
class InjectionMarker:
    """One sign of an attempt to steer the judge."""

    kind: str
    #: the matching text, folded and shortened
    excerpt: str


def fold(text: str, *, lookalikes: bool = True) -> str:
    """The form markers are searched in: normalized, look-alikes mapped, case folded."""
    normal = normalize_untrusted(text)
    return _folded(normal.translate(_LOOKALIKES) if lookalikes else normal)


def _folded(normal: str) -> str:
    return _BLANKS.sub(" ", normal.casefold())


def _disguised_letters(text: str) -> str | None:
    """The first word with a disguised letter: a compatibility form of an ASCII letter
    (full-width, mathematical...), or a Cyrillic or Greek look-alike among Latin letters."""
    if text.isascii():
        return None
    for word in re.findall(r"\w+", text):
        if word.isascii():
            continue
        latin = any(ch.isascii() and ch.isalpha() for ch in word)
        for ch in word:
            compat = unicodedata.normalize("NFKC", ch)
            if (compat != ch and compat.isascii() and compat.isalpha()) or (
                latin and ch in _LOOKALIKE_PAIRS
            ):
                return str(word[:_EXCERPT])
    return None


def injection_markers(text: str) -> tuple[InjectionMarker, ...]:
    """Every kind of marker found in ``text``, once each, with its first excerpt."""
    found: list[InjectionMarker] = []
    hidden = _HIDDEN.search(text.lstrip("\ufeff"))  # a leading byte-order mark is innocent
    if hidden:
        found.append(InjectionMarker("hidden_characters", f"U+{ord(hidden.group()):04X}"))
    disguised = _disguised_letters(text)
    if disguised:
        found.append(InjectionMarker("lookalike_letters", disguised))
    normal = normalize_untrusted(text)
    mapped = normal.translate(_LOOKALIKES)
    folded = _folded(mapped)
    # look-alikes mapped for Latin-script attacks; unmapped for instructions in Cyrillic
    # (the same form when there is no look-alike); then leetspeak undone and spaced-out
    # letters joined
    forms = [folded, folded if mapped == normal else _folded(normal), unleet(folded)]
    spaced = collapse_spaced(normal)
    if spaced != normal:
        forms.append(fold(spaced))
    if "\n" in normal:  # one word a line: the words joined again
        forms.append(_folded(" ".join(mapped.split()).casefold()))
    unbroken = dehyphenated(folded)  # ig-nore: searched when that makes a word it lacked
    if unbroken != folded and len(_BROKEN_WORDS.findall(unbroken)) > len(
        _BROKEN_WORDS.findall(folded)
    ):
        forms.append(unbroken)
    # a form equal to an earlier one finds nothing new (plain ASCII text has no
    # look-alikes to map): searched once, a third less regex work
    found.extend(_search(list(dict.fromkeys(forms))))
    encoded = _encoded(normal, folded)
    if encoded is not None:
        found.append(encoded)
    return tuple(found)


def _encoded(normal: str, folded: str) -> InjectionMarker | None:
    """The first marker in a decoded form of the text (base64, base32, hex, escapes,
    rot13, written backwards), as the kind ``encoded_instruction``."""
    decoded = [
        *(("base64", text) for text in base64_texts(normal)),
        *(("base32", text) for text in base32_texts(normal)),
        *(("hex", text) for text in hex_texts(normal)),
    ]
    for label, form in (
        ("escapes", unescaped(normal)),
        ("rot13", rot13_form(folded)),
        ("reversed", reversed_form(folded)),
    ):
        if form is not None:
            decoded.append((label, form))
    for label, text in decoded:
        markers = _search([fold(text)])
        if markers:
            return InjectionMarker("encoded_instruction", f"{label}: {markers[0].excerpt}")
    return None


@functools.cache
def _prefilter() -> Prefilter:
    """Which patterns may match a folded text (``judge.regex_prefilter``); built on first
    use (some tens of milliseconds), not when the module is imported."""
    return Prefilter([compiled.pattern for _kind, compiled in _COMPILED])


def _search(forms: list[str]) -> list[InjectionMarker]:
    """The first match of each kind of pattern in any of ``forms`` (folded texts); a
    pattern runs only on the forms that hold the literals it needs."""
    found: list[InjectionMarker] = []
    prefilter = _prefilter()
    candidates = [(form, prefilter.candidates(form)) for form in forms]
    kinds: set[str] = set()
    for n in sorted(set().union(*(may for _, may in candidates))):
        kind, pattern = _COMPILED[n]
        if kind in kinds:
            continue
        match = next((m for f, may in candidates if n in may and (m := pattern.search(f))), None)
        if match:
            kinds.add(kind)
            found.append(InjectionMarker(kind, match.group()[:_EXCERPT].strip()))
    return found
