"""Markers of prompt injection in a diagnosis: text that tries to steer the judge.

A diagnosis is written by an agent that may itself have read injected text, or may try
to game its grade. The prompt fences it (``judge.prompt``); this module finds the
attempts so that a human looks at the grading whatever its verdict (review reason
``injection_suspected``).

The text is searched in a folded form: NFKC (full-width letters become ASCII),
invisible characters removed (as the prompt does), common Cyrillic and Greek
look-alikes mapped to the Latin letters they imitate, case folded and white space
collapsed. The raw text is searched too for what folding would hide: characters that
render as nothing (format characters, variation selectors) or as a blank, except where
they are part of what is drawn (a leading byte-order mark, a variation selector after an
emoji, a joiner between two emoji, the tag letters of a subdivision flag), and letters
that only NFKC turns into ASCII.
Disguised instructions are searched in second forms (``judge.injection_forms``):
leetspeak undone and spaced-out letters joined are searched with every pattern, and
readable base64 runs, decoded, give the kind ``encoded_instruction``.

Each pattern declares the words it needs (one of them is in any text it matches;
``tests/judge/test_injection_needs.py`` checks each): a pattern runs only on the forms
that hold one, so an ordinary diagnosis runs about one of the 89 patterns, not all.

Why this module is long (about 700 lines): most of it is the pattern table, each
pattern beside its kind and the words it needs, which reads best as one list.
"""

from __future__ import annotations

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
from judge.prompt import ANGLES as _ANGLES
from judge.prompt import BLANK_FILLERS, INVISIBLE, VARIATION_SELECTORS, normalize_untrusted

__all__ = ["InjectionMarker", "character_markers", "fold", "injection_markers"]

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
    # Latin small capitals, Armenian letters and the dotted capital I (whose case fold
    # is "i" and a combining dot, which no pattern reads as "i")
    "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ꜰ": "f", "ɢ": "g", "ʜ": "h",
    "ɪ": "i", "ᴊ": "j", "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p",
    "ʀ": "r", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z",
    "օ": "o", "ս": "u", "ո": "n", "հ": "h", "ց": "g", "զ": "q", "Օ": "O", "Ս": "U",
    "İ": "I",
}  # fmt: skip
_LOOKALIKES = str.maketrans(_LOOKALIKE_PAIRS)

_VERB_WORDS = ("ignore", "disregard", "forget", "override", "bypass")
_VERB = r"\b(?:" + "|".join(_VERB_WORDS) + r")\b"
#: the verbs that dismiss whatever they take ("override" and "bypass" also configure)
_DISMISS_WORDS = ("ignore", "disregard", "forget")
_DISMISS = r"\b(?:" + "|".join(_DISMISS_WORDS) + r")\b"
#: a character of the same clause: no full stop, line end or semicolon, nor the start
#: of a word that opens another clause (a verb before one does not take what follows it)
_IN_CLAUSE = (
    r"(?:(?!\b(?:although|though|while|whereas|because|since|but|until|unless|when|"
    r"whenever|after|before|once)\b)[^.\n;])"
)
#: how "9 of 9" (``9/9``, ``nine out of nine``...) ends: one of these is in it
_OF_NINE = ("/9", "/ 9", "/nine", "/ nine", "of9", "of 9", "ofnine", "of nine")
#: each kind's patterns, each with the words it needs: a folded text (``ı`` read as
#: ``i``) holds one of them wherever the pattern matches it (a test checks it:
#: ``tests/judge/test_injection_needs.py``), so a pattern runs only on the forms that
#: hold one; the words are chosen to be rare in ordinary diagnoses
_PATTERNS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "instruction_override": (
        (
            _VERB + r" (?:all |any |the |your |of the )?(?:(?:previous|prior|above|earlier|"
            r"preceding|original|system|grading|judging) )?"
            r"(?:instructions?|prompts?|guidelines|rubric)\b",
            _VERB_WORDS,
        ),
        # "values override the previous memory limits" is configuration: override and
        # bypass take "the previous ..." as an instruction only when it is instructions
        # (the pattern above) or nothing more ("override all of the above.")
        (
            _DISMISS + r" (?:all |any |the |your )?(?:previous|prior|above|earlier|preceding) \w+",
            _DISMISS_WORDS,
        ),
        (_DISMISS + r" (?:all |everything )?(?:the )?(?:above|previous)\b", _DISMISS_WORDS),
        (
            r"\b(?:override|bypass) (?:all |everything )?(?:(?:of )?the )?(?:above|previous)\b"
            r"(?!\s+\w)",
            ("override", "bypass"),
        ),
        (r"\bnew (?:instructions?|task)\b", ("new instruction", "new task")),
        (
            r"\b(?:system|admin|developer) (?:override|prompt|instructions?)\b",
            (" override", " prompt", " instruction"),
        ),
        # spaced-out letters evenly spaced join into one word (``judge.injection_forms``)
        (
            r"(?:ignore|disregard|forget)(?:all|any|the|your)?(?:previous|prior|above|earlier)?"
            r"(?:instructions?|prompts?|rules)",
            ("ignore", "disregard", "forget"),
        ),
        (
            r"(?:answer|reply|respond)(?:yes|pass)|mustpass|fullmarks",
            (
                "answeryes",
                "answerpass",
                "replyyes",
                "replypass",
                "respondyes",
                "respondpass",
                "mustpass",
                "fullmarks",
            ),
        ),
    ),
    "answer_steering": (
        # within one clause: "did not respond within 5s although its probe passed" is two
        (
            r"\b(?:answer|reply|respond|mark|grade)\b" + _IN_CLAUSE + r"{0,40}?"
            r"(?:\byes\b|\bpass(?:ed)?\b|full marks|10/10)",
            ("answer", "reply", "respond", "mark", "grade"),
        ),
        (
            r"\b(?:marked|answered|graded|scored)\s+(?:as\s+)?[\"']?(?:yes|pass)\b",
            ("marked", "answered", "graded", "scored"),
        ),
        # "mark each of the checklist items as met", "treat this response as correct"
        (
            r"\b(?:mark|consider|treat|count|regard|rate|score|grade|judge|accept)\w*\s+(?:(?:each|"
            r"every|all|the|of|this|these|it|its|my|rubric|checklist|evaluation|diagnosis|rca|"
            r"analysis|response|answer|submission|items?|criteria|questions?|checks?)\s+){0,6}as\s+"
            r"(?:fully\s+|entirely\s+|completely\s+)?(?:met|satisfied|fulfilled|correct|passed|"
            r"passing|approved)\b",
            ("met", "satisfied", "fulfilled", "correct", "passed", "passing", "approved"),
        ),
        (
            r"\bpass (?:this|the|my|our) (?:diagnosis|rca|analysis|answer|submission|response)\b",
            ("pass this", "pass the", "pass my", "pass our"),
        ),
        (r"\breturn (?:yes|pass)\b", ("return yes", "return pass")),
        (
            r"\bbe (?:generous|lenient|kind|nice) (?:with|to|on) (?:this|me|my|it|the diagnosis)\b",
            ("be generous", "be lenient", "be kind", "be nice"),
        ),
        (r"\b(?:full marks|full credit)\b(?! card)", ("full marks", "full credit")),
        (
            r"\b(?:rate|score|grade|mark|judge)\s+(?:this|it|the diagnosis|the answer)\b"
            r"[^.\n]{0,20}?(?:pass|correct|10/10|100|full)",
            ("rate", "score", "grade", "mark", "judge"),
        ),
        (
            r"\ball (?:nine |9 |the )?(?:questions|answers)\b[^.\n]{0,30}?\b(?:yes|true|pass)",
            ("questions", "answers"),
        ),
        (
            r"\ball (?:nine |9 |the )?checks\b[^.\n]{0,30}?\b(?:yes|true)\b",
            ("all checks", "all nine checks", "all 9 checks", "all the checks"),
        ),
        # "it should pass within a minute" is a probe's: "it" and "this" are not taken
        # when a time or a condition follows
        (
            r"\b(?:diagnosis|submission) (?:must|should|has to|deserves? to) pass\b|"
            r"\b(?:this|it) (?:must|should|has to|deserves? to) pass\b"
            r"(?!\s+(?:within|after|once|when|whenever|again|soon|shortly|before|until|unless|"
            r"if|during|in (?:a|an|under|less|about|\d))\b)",
            ("must pass", "should pass", "to pass"),
        ),
        (
            r"\b(?:every|each) (?:answer|question)\b[^.\n]{0,20}?\byes\b",
            ("every answer", "every question", "each answer", "each question"),
        ),
    ),
    "criteria_claim": (
        (
            r"\ball (?:(?:nine|9|the|of|rubric|evaluation|these)\s+){0,3}(?:criteria|questions|"
            r"rubric items|requirements|items)\b"
            r"[ ,:(]*(?:(?:are|were|have|has|been|now|fully|all|thus|hence|therefore) )*"
            r"(?:satisfied|met|fulfilled|answered yes|pass(?:ed)?)\b",
            ("criteria", "questions", "items", "requirements"),
        ),
        (
            r"\b(?:satisfies|meets|fulfils|fulfills) (?:all|every|each) (?:\w+ )?"
            r"(?:criteri|requirement|question|rubric)",
            ("satisfies", "meets", "fulfils", "fulfills"),
        ),
        (
            r"\b(?:pass\w*|score\w*|graded|rated|yes)\W{0,3}\(?(?:9|nine) ?(?:/|of|out of) ?"
            r"(?:9|nine)\b",
            _OF_NINE,
        ),
        # not the evaluation of what a system evaluates ("Prometheus rule evaluation checks")
        (
            r"\b(?<!rule\s)(?<!rules\s)(?<!alert\s)(?<!alerting\s)(?<!recording\s)(?<!policy\s)"
            r"(?:rubric|evaluation|grading|scoring) (?:checks?|items?|questions?|criteria)\b",
            ("rubric", "evaluation", "grading", "scoring"),
        ),
        (
            r"[\u2705\u2714\u2611\u2713]\ufe0f?\s*(?:fault (?:localization|characterization)|"
            r"failure scope|d[1-3]\b)",
            ("\u2705", "\u2714", "\u2611", "\u2713"),
        ),
        (
            r"\bpre-?(?:approved|verified|validated) (?:this|the|my) (?:rca|diagnosis|analysis)\b|"
            r"\b(?:rca|diagnosis|analysis) (?:has been |was |is )?pre-?(?:approved|verified|"
            r"validated)\b|\balready (?:been )?(?:graded|scored)\b",
            (
                "preapproved",
                "pre-approved",
                "preverified",
                "pre-verified",
                "prevalidated",
                "pre-validated",
                "already graded",
                "already scored",
                "already been graded",
                "already been scored",
            ),
        ),
        (
            r"\bno (?:further |more )?(?:grading|evaluation|scoring) (?:is )?(?:needed|required|"
            r"necessary)\b",
            ("grading", "evaluation", "scoring"),
        ),
        (
            r"\b(?:diagnos\w*|rcas?|analys\w*|answers?|submissions?)\b[^.\n]{0,60}\bauto-?"
            r"(?:approved|pass\w*|accepted)\b",
            (
                "autoapproved",
                "auto-approved",
                "autopass",
                "auto-pass",
                "autoaccepted",
                "auto-accepted",
            ),
        ),
        (
            r"\b(?:9|nine) ?(?:/|of|out of) ?(?:9|nine)\)?\W{0,3}(?:yes|pass|criteria|questions)",
            _OF_NINE,
        ),
    ),
    "policy_claim": (
        (
            r"\b(?:updated|new|revised|amended|changed|latest) "
            r"(?:grading|scoring|evaluation|judging|review|rubric|benchmark) "
            r"(?:policy|policies|rules|guidelines|criteria|instructions|procedure|standard)\b",
            ("grading", "scoring", "evaluation", "judging", "review", "rubric", "benchmark"),
        ),
        (
            r"\b(?:grading|scoring|evaluation|judging) "
            r"(?:policy|policies|rules|guidelines|criteria|instructions) "
            r"(?:has|have|was|were|is|are) (?:been |now )?"
            r"(?:changed|updated|revised|amended|replaced|suspended|waived)\b",
            ("grading", "scoring", "evaluation", "judging"),
        ),
        (
            r"\b(?:rubric|grading) (?:has|was|is) (?:been |now )?"
            r"(?:changed|updated|revised|replaced|suspended|waived|no longer)\b",
            ("rubric", "grading"),
        ),
        (r"\b(?:scoring|grading|evaluation|judging) guidance\b", ("guidance",)),
        (
            r"\b(?:evaluation|grading|scoring|judging) override\b",
            ("evaluation", "grading", "scoring", "judging"),
        ),
    ),
    "fake_record": (
        (r"\badjudicat\w* (?:record|decision|override|note|log)\b", ("adjudicat",)),
        (r"\boverride\s*(?:-+>|→|=>|:)\s*(?:pass|yes|correct)", ("override",)),
        (
            r"\b(?:human|manual|adjudicator|reviewer) (?:override|verdict|decision)\b[^.\n]{0,40}?"
            r"\b(?:pass|yes|correct)",
            (" override", " verdict", " decision"),
        ),
    ),
    "hidden_comment": ((r"<!--[\s\S]*?(?:-->|$)", ("<!--",)),),
    "role_play": (
        (r"\byou are (?:now|no longer)\b", ("you are now", "you are no longer")),
        (r"\b(?:pretend|imagine) (?:to be|you are|that you)\b", ("pretend", "imagine")),
        (
            r"\bact as (?:an? |the )?(?:judge|grader|evaluator|system|admin|assistant|ai)\b",
            ("act as ",),
        ),
        (
            r"\b(?:role-?play|jailbreak|developer mode|dan mode)\b",
            ("roleplay", "role-play", "jailbreak", "developer mode", "dan mode"),
        ),
        # a speaker's label, not a name such as the RBAC group ``system:basic-user``; from
        # the last line break before it (not from each of a run of them: quadratic)
        (
            r"(?:^|\n)[^\S\n]*(?:system|assistant|developer)\s*:(?![\w-])",
            ("system", "assistant", "developer"),
        ),
        (
            r"<\|[^|<>\s]{1,40}\|>|<</?sys>>|</?(?:start_of_turn|end_of_turn)>",
            ("|>", "sys>>", "_of_turn>"),
        ),
        (
            r"\[/?(?:inst|system_prompt)\]|### (?:system|instruction)",
            ("inst]", "system_prompt]", "### system", "### instruction"),
        ),
    ),
    "addresses_judge": (
        (
            r"\b(?:dear|attention|hey|note to(?: the)?) "
            r"(?:judge|grader|evaluator|reviewer|ai|llm)\b",
            ("dear ", "attention ", "hey ", "note to "),
        ),
        (
            r"\b(?:hey|hi|hello|dear|psst)[ ,]+(?:model|llm|ai|assistant|gpt|claude|bot)\b",
            tuple(
                f"{sep}{name}"
                for name in ("model", "llm", "ai", "assistant", "gpt", "claude", "bot")
                for sep in " ,"
            ),
        ),
        (
            r"\b(?:note|message|memo|reminder|instructions?|comment)s? (?:for|to) (?:the |any |"
            r"whoever(?: is)? |an? )?(?:llm|ai|model|language model|assistant|bot)\b"
            r"(?! ?(?:server|serving|endpoint|api|registry|pod|deployment|service|cache|weights))",
            (" llm", " ai", " model", " assistant", " bot"),
        ),
        (
            r"\bnote\s*\(\s*(?:grader|judge|evaluator|reviewer|llm|ai|model|scorer)\s*\)",
            ("note",),
        ),
        (
            r"\bthe (?:evaluator|grader|judge)'s (?:side|view|end|perspective|attention)\b",
            ("evaluator's", "grader's", "judge's"),
        ),
        (r"\bif you are reading this\b", ("if you are reading this",)),
        (
            r"\b(?:the|this|any) (?:judge|grader|grading model)\b(?![\w-])",
            (" judge", " grader", " grading model"),
        ),
        (
            r"\bif you are an? (?:ai|llm|language model|model|judge|grader)\b",
            ("if you are a",),
        ),
        (
            r"\b(?:note|message|memo|reminder|instructions?|request|comment)s? (?:for|to) "
            r"(?:the |any |whoever(?: is)? |an? )?(?:judg|grad|evaluat|review|assess|scor)\w*",
            (" judg", " grad", " evaluat", " review", " assess", " scor"),
        ),
        (
            r"\bto (?:the |any |whoever is )?(?:judg|grad|evaluat|assess|scor)\w*"
            r"(?: model| assistant| system| ai| llm)?\s*:",
            (" judg", " grad", " evaluat", " assess", " scor"),
        ),
        (
            r"\b(?:judge|grader|evaluator|reviewer)'?s? note\b",
            ("judge", "grader", "evaluator", "reviewer"),
        ),
        (r"\bwhoever (?:is )?(?:grad|evaluat|review|judg|scor|assess)\w*", ("whoever ",)),
        (
            r"\b(?:evaluating|grading|scoring|reviewing|judging) "
            r"(?:model|assistant|ai|llm|system)\b",
            ("evaluating", "grading", "scoring", "reviewing", "judging"),
        ),
        (
            r"\b(?:automated|ai|llm) (?:grader|judge|evaluator|reviewer|grading|judging|review|"
            r"evaluation|assessment|scoring)\b",
            ("automated", "ai ", "llm "),
        ),
    ),
    "ground_truth_claim": (
        (r"\bground[\s_-]*truth\b", ("truth",)),
        (r"\[?fault_spec\]?", ("fault_spec",)),
        # the value up to the next ``component=`` at most (not to the end of a run of
        # them from each: quadratic)
        (r"\bcomponent=(?:(?!component=)\S)+;\s*namespace=", ("component=",)),
        (
            r"\b(?:the )?(?:correct|expected|official) (?:answer|diagnosis) is\b",
            (" answer is", " diagnosis is"),
        ),
    ),
    "fence_imitation": (
        (f"[{re.escape(_ANGLES)}]{{3,}}", tuple(_ANGLES)),
        (f"[{re.escape(_ANGLES)}]{{2,}}" + r"\s*/?\s*(?:end\b|diagnosis|ground)", tuple(_ANGLES)),
        (r"</?\s*(?:diagnosis|ground_truth|system|instructions?)\s*>", ("<",)),
        (r"\bend[ _](?:of[ _])?(?:diagnosis|ground[ _]truth)\b", ("diagnosis", "truth")),
    ),
    "fake_answer": (
        (r"\bd[1-9]-q[1-9]\b", ("-q",)),
        (
            r"\"(?:answer|evidence|confidence|reasoning)\"\s*:",
            ('answer"', 'evidence"', 'confidence"', 'reasoning"'),
        ),
        (r"\bverdict[\"']?\s*[:=]\s*[\"']?pass", ("verdict",)),
        (
            r"\b(?:passed|judge_passed|judgment|judgement)[\"']?\s*[:=]\s*[\"']?(?:true|pass|yes)\b",
            ("passed", "judgment", "judgement"),
        ),
        (r"\byes_count[\"']?\s*[:=]\s*9\b", ("yes_count",)),
        (
            r"\bdiagnosis\.(?:success|judgment|composite_score|accuracy|checklist)\b",
            ("diagnosis.",),
        ),
        (r"\byes\b(?:\W{1,3}yes\b){3,}", ("yes",)),
        (r"\by/y/y/y\b", ("y/y/y/y",)),
        (r"\bq1\s*-\s*q9\b", ("q1",)),
        (r"<verdict>\s*pass", ("<verdict>",)),
    ),
    "other_language": (
        (
            r"\b(?:ignora\w*|ignorez|ignorer|ignorier\w*|ignorate|ignore)\b (?:\w+ ){0,3}"
            r"(?:instrucciones|consignes|anweisungen|instruktionen|instruções|instrucoes|"
            r"istruzioni|regeln|reglas|indicaciones)\b",
            ("ignor",),
        ),
        (
            r"\b(?:ignora\w*|ignorez|ignorer|ignorier\w*|ignorate)\b (?:\w+ ){0,3}instructions\b",
            ("ignor",),
        ),
        (
            r"\b(?:responde|contesta|répondez|repondez|réponds|répondre|repondre|antworte|responda|"
            r"rispondi)\w*"
            r"(?: \w+){0,3} (?:sí|si|oui|ja|sim|sì)\b",
            ("responde", "contesta", "répond", "repond", "antworte", "responda", "rispondi"),
        ),
        (
            r"игнорир|проигнорир|ответь\w* «?да|отвечай\w* «?да",
            ("игнорир", "ответь", "отвечай"),
        ),
        (
            r"忽略|无视|無視|不要理会|回答[“\"「]?是|全部.{0,6}(?:是|通过)|すべて.{0,6}はい|무시",
            ("忽略", "无视", "無視", "不要理会", "回答", "全部", "すべて", "무시"),
        ),
        (
            r"\b(?:vergiss|vergessen sie|missachte|übergehe)\w* (?:\w+ ){0,3}(?:anweisungen|"
            r"instruktionen|regeln|vorgaben)\b",
            ("vergiss", "vergessen sie", "missachte", "übergehe"),
        ),
        (
            r"\b(?:olvida|olvide|omite|omita|descarta|descarte)\w* (?:\w+ ){0,3}(?:instrucciones|"
            r"reglas|indicaciones)\b",
            ("olvida", "olvide", "omite", "omita", "descarta", "descarte"),
        ),
        (
            r"\b(?:bewerte|bewerten sie|beurteile|markiere|werte|benote)\w* (?:\w+ ){0,3}(?:als )?"
            r"(?:bestanden|korrekt|richtig|erfüllt|volle punktzahl)",
            ("werte", "beurteile", "markiere", "benote"),
        ),
        (
            r"\b(?:califica|calificar|califique|evalúa|evalua|evalúe|marca|marque|puntúa|puntua|"
            r"considera)\w* (?:\w+ ){0,3}(?:como )?(?:aprobado|correcto|válido|valido|superado)",
            ("aprobado", "correcto", "válido", "valido", "superado"),
        ),
        (
            r"\balle (?:\w+ ){0,2}(?:kriterien|fragen|anforderungen)\b[^.\n]{0,30}?\b(?:erfüllt|"
            r"mit ja|bestanden)",
            ("kriterien", "fragen", "anforderungen"),
        ),
        (
            r"\btod[oa]s (?:\w+ ){0,2}(?:criterios|preguntas|requisitos)\b[^.\n]{0,30}?(?:cumpl\w*|"
            r"\bsí\b|aprobad\w*)",
            ("criterios", "preguntas", "requisitos"),
        ),
        (
            r"\b(?:neue|geänderte|aktualisierte) (?:bewertungs\w*|anweisungen)|"
            r"\b(?:nuevas?|actualizad\w*) (?:política|politica|instrucciones|criterios) de "
            r"(?:evaluación|evaluacion|calificación|calificacion)",
            (
                "bewertungs",
                "anweisungen",
                "evaluación",
                "evaluacion",
                "calificación",
                "calificacion",
            ),
        ),
    ),
}


@dataclass(frozen=True, slots=True)
class _Rule:
    """One pattern of a kind of marker, and the words a folded text needs for it to match."""

    kind: str
    pattern: re.Pattern[str]
    #: a folded text (fold equivalents mapped) holds one of these wherever ``pattern`` matches
    needs: frozenset[str]


_RULES = tuple(
    _Rule(kind, re.compile(pattern, re.IGNORECASE), frozenset(needs))
    for kind, rules in _PATTERNS.items()
    for pattern, needs in rules
)
#: every word some pattern needs, each looked for once per form
_NEEDED_WORDS = tuple(sorted({word for rule in _RULES for word in rule.needs}))
#: those an ASCII text may hold (most diagnoses are: 40 fewer words to look for)
_ASCII_NEEDED_WORDS = tuple(word for word in _NEEDED_WORDS if word.isascii())
#: characters of case-folded text that a case-insensitive pattern equates with a letter
#: of a needed word (``re``'s own equivalences that folding leaves; a test checks every
#: code point): mapped before the words are looked for
_FOLD_EQUIVALENTS = {"\u0131": "i"}
#: what renders as nothing (every format character, the variation selectors...) or as
#: a blank: ``judge.prompt`` removes or blanks them
_HIDDEN = re.compile(f"[{INVISIBLE}{BLANK_FILLERS}]")
_VARIATION_SELECTOR = re.compile(f"[{VARIATION_SELECTORS}]")
_ZWJ = "\u200d"
#: emoji that are not symbols by category: the information source (a letter, ``ℹ``),
#: the double exclamation and the like (punctuation); keycap bases are apart
_EMOJI_NON_SYMBOLS = frozenset("\u2139\u203c\u2049\u3030\u303d")
_KEYCAP_BASES = frozenset("#*0123456789")
_KEYCAP = "\u20e3"
#: a subdivision flag (``🏴`` and the tag letters of a Unicode subdivision id, ``gbsct``
#: for Scotland, then CANCEL TAG): drawn as one emoji; no more than 7 tag letters or
#: digits, so a flag carries no smuggled text
_FLAG_TAGS = re.compile(
    "\U0001f3f4(?:[\U000e0061-\U000e007a]{2}|[\U000e0030-\U000e0039]{3})"
    "[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,4}\U000e007f"
)
_FLAG_LENGTH = 9  # the longest, in code points
#: the emoji ``ℹ️`` standing apart from any word: a symbol, not a disguised ``i``
_EMOJI_LETTER = re.compile(f"(?<!\\w)\u2139[{VARIATION_SELECTORS}](?!\\w)")
_EXCERPT = 60
#: words an instruction needs, to tell whether joining hyphenated pieces made one
_BROKEN_WORDS = re.compile(
    r"ignore|disregard|instruction|previous|answer|grader|judge|evaluat|rubric|criteria|verdict"
)
#: runs of blanks other than one space (replacing a single space by itself is wasted)
_BLANKS = re.compile(r"[ \t]{2,}|\t")
#: Markdown emphasis and code marks, and HTML tags, which wrap words of an instruction
#: (a mark inside a word, as in USER_PORT, is no wrapper): removed with ``\1``, which
#: keeps what the last alternative matched. Where neither mark alternative matches, none
#: matches anywhere in the rest of the run of ``_`` or of other marks it stands in: the
#: last alternative takes that rest whole, so a long run is scanned a few times, not
#: once from each of its marks (which took seconds for 30 KB of ``*``). The lookahead
#: skips at once the characters no alternative starts with.
_WRAPPERS = re.compile(
    r"(?=[*_`~<])(?:(?<!\w)[*_`~]+(?=\w)|(?<=\w)[*_`~]+(?!\w)"
    r"|</?[a-z][a-z0-9]{0,10}\b[^<>]{0,80}>|([*`~][*`~]++|__++))"
)


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
    for word in re.findall(r"\w+", _EMOJI_LETTER.sub(" ", text)):
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


def _emoji(char: str) -> bool:
    """Whether ``char`` may be drawn as an emoji or a styled symbol (a keycap base
    apart): a symbol by category, or one of the few emoji that are not."""
    return unicodedata.category(char)[0] == "S" or char in _EMOJI_NON_SYMBOLS


def _innocent(text: str, at: int) -> bool:
    """Whether the hidden character at ``at`` is part of what a reader sees drawn: a
    leading byte-order mark, a variation selector right after an emoji or symbol (or
    inside a keycap, ``1️⃣``), a zero-width joiner between two emoji (``👩‍💻``), the tag
    characters of a subdivision flag (``_FLAG_TAGS``)."""
    char = text[at]
    if char == "\ufeff":
        return not text[:at].strip("\ufeff")
    if "\U000e0020" <= char <= "\U000e007f":
        near = _FLAG_TAGS.finditer(text, max(0, at - _FLAG_LENGTH + 1), at + _FLAG_LENGTH)
        return any(flag.start() < at < flag.end() for flag in near)
    before, after = text[at - 1 : at], text[at + 1 : at + 2]
    if _VARIATION_SELECTOR.match(char):
        if before.isalpha():  # ``ℹ️``, not inside a word
            return _EMOJI_LETTER.match(text, at - 1) is not None
        return bool(before) and (_emoji(before) or (before in _KEYCAP_BASES and after == _KEYCAP))
    if char == _ZWJ:
        start = at - 1 if before and _VARIATION_SELECTOR.match(before) else at
        before = text[start - 1 : start]
        return bool(before and after) and _emoji(before) and _emoji(after)
    return False


def _hidden_character(text: str) -> str | None:
    """The first character of ``text`` that renders as nothing or as a blank, unless
    it is part of what is drawn (:func:`_innocent`)."""
    return next((m.group() for m in _HIDDEN.finditer(text) if not _innocent(text, m.start())), None)


def character_markers(text: str) -> list[InjectionMarker]:
    """The markers only the raw text shows (normalizing removes them): hidden
    characters, and letters disguised as others."""
    found: list[InjectionMarker] = []
    hidden = _hidden_character(text)
    if hidden:
        found.append(InjectionMarker("hidden_characters", f"U+{ord(hidden):04X}"))
    disguised = _disguised_letters(text)
    if disguised:
        found.append(InjectionMarker("lookalike_letters", disguised))
    return found


def injection_markers(text: str) -> tuple[InjectionMarker, ...]:
    """Every kind of marker found in ``text``, once each, with its first excerpt."""
    found = character_markers(text)
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
    joined = " ".join(mapped.split())
    if joined != mapped:  # one word a line, or words apart by other blanks: joined again
        forms.append(_folded(joined))
    unwrapped = _WRAPPERS.sub(r"\1", folded)
    if unwrapped != folded:  # **ignore** all <i>previous</i> instructions
        forms.append(_BLANKS.sub(" ", unwrapped))
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


def _needed_words_in(folded: str) -> set[str]:
    """The needed words that ``folded`` holds, its fold equivalents mapped."""
    for char, letter in _FOLD_EQUIVALENTS.items():
        if char in folded:
            folded = folded.replace(char, letter)
    words = _ASCII_NEEDED_WORDS if folded.isascii() else _NEEDED_WORDS
    return {word for word in words if word in folded}


def _search(forms: list[str]) -> list[InjectionMarker]:
    """The first match of each kind of pattern in any of ``forms`` (folded texts); a
    pattern runs only on the forms that hold one of the words it needs."""
    found: list[InjectionMarker] = []
    held = [(form, _needed_words_in(form)) for form in forms]
    anywhere = set().union(*(words for _, words in held))
    kinds: set[str] = set()
    for rule in _RULES:
        if rule.kind in kinds or rule.needs.isdisjoint(anywhere):
            continue
        match = next(
            (
                m
                for form, words in held
                if not rule.needs.isdisjoint(words) and (m := rule.pattern.search(form))
            ),
            None,
        )
        if match:
            kinds.add(rule.kind)
            found.append(InjectionMarker(rule.kind, match.group()[:_EXCERPT].strip()))
    return found
