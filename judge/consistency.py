"""A judge reply whose reasoning says the opposite of its answer.

Small judges often write "The diagnosis avoids naming a different component as the root
cause." and then answer "no". The check is deliberately narrow, so that it rarely
fires on a reply that is consistent:

- a reasoning that opens with "Yes," or "No," contradicts an answer that differs (a
  hyphen after the word counts with a space beside it, "No - ...", not in a compound
  such as "No-fault");
- otherwise the question's verb is taken from its text ("Does it *avoid* naming ...",
  "Does the diagnosis *name* the component ..."), and the reasoning's statements of
  the form "<it | the diagnosis> [adverb] <verb>s <object>" (affirmed) and "<it | the
  diagnosis> does not | fails to <verb> <object>" or "... never <verb>s <object>"
  (denied) are counted, where <object> is the question's first content word after the
  verb, within three words that only point at it ("the", "any", "the correct"): a
  statement about something else, "does not name any other component", "another", "a
  different" or "the frontend component", "the component frontend" (a name right after
  the object; "the root component, user-service" is still the object), or "any
  component other than it", neither affirms nor denies;
- the reasoning contradicts a "yes" when it only denies, and a "no" when it only affirms.

The reasoning is compared with the question as it was asked (``judge.style``), before
a positively asked answer is inverted.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["reasoning_contradicts"]

_VERB = re.compile(r"^\s*(?:does|did|is)\s+(?:it|the\s+diagnosis)\s+([a-z]+)\s+(.*)$", re.I)
_SKIP = {"the", "a", "an", "any", "that", "its", "their", "this", "to", "of", "all"}
_SUBJECT = r"\b(?:it|the\s+diagnosis|this\s+diagnosis|the\s+agent|the\s+response|the\s+report)"
_ADVERB = r"(?:\s+(?:correctly|clearly|explicitly|also|properly|accurately|successfully|indeed))?"
#: a denial before the bare verb ("does not name"); "never" takes the third person
_NEGATION = (
    r"\s+(?:does\s+not|doesn['’]t|does\s+n['’]t|did\s+not|didn['’]t|fails\s+to|failed\s+to"
    r"|cannot|can\s*not)"
)
#: "Yes," or "No -" opening a reasoning; a hyphen counts only with a space before or
#: after it ("No - it names frontend"), not glued into a word ("No-fault scenario")
_LEAD = re.compile(r"^\W*(yes|no)\b(?:\s*[,.:;!]|\s+-|-(?!\S))", re.I)
#: words that may stand between the verb and its object and still mean the question's
#: object: determiners, and qualifiers that pick it out ("the correct component"). Any
#: other word (other, another, different, a name: "the frontend component"; "this" or
#: "that", which may point back at another component) makes the statement one about
#: something else
_POINTING = (
    r"the|a|an|any|its|single|correct|right|actual|true|real|exact|precise|specific"
    r"|particular|faulty|failing|broken|offending|responsible|relevant|originating|root"
    r"|concrete"
)
#: what after the object makes it something else: "any component other than user-service"
_EXCEPT = r"(?!\W*\b(?:other\s+than|else|besides|except|apart\s+from|aside\s+from|beyond)\b)"
#: words that may follow the object directly (no punctuation between) and still mean it:
#: determiners, prepositions, relative words, conjunctions, a few verbs and participles,
#: besides the question's own words and any "-ly" adverb. Any other word there is a name
#: ("the component frontend"), which makes the statement one about that component
_FOLLOWING = (
    r"a|an|the|any|another|every|each|some|no|all|this|that|these|those|its|their|one"
    r"|as|of|in|at|on|for|from|to|with|within|behind|by|under|among|between|into|across"
    r"|where|which|who|whose|whom|when|why|how|and|or|but|nor|so|yet|than|because|since"
    r"|while|although|though|if|is|was|are|were|be|been|has|had|itself|themselves|alone"
    r"|either|neither|instead|here|there|not|only|first|responsible|causing|involved"
    r"|affected"
)


def _third_person(verb: str) -> str:
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    return verb + "s"


@lru_cache(maxsize=128)
def _patterns(question: str) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """(affirmed, denied) statements about ``question``, or None for an unusual wording."""
    match = _VERB.match(question)
    if match is None:
        return None
    verb = match.group(1).lower()
    words = [w for w in re.findall(r"[a-z][a-z-]*", match.group(2).lower()) if w not in _SKIP]
    if not words:
        return None
    own = "|".join(sorted(set(re.findall(r"[a-z][a-z-]*", match.group(2).lower()))))
    following = rf"(?!\s+[\"'`‘“]?(?!(?:{_FOLLOWING}|{_POINTING}|{own})\b|[a-z-]+ly\b)[a-z])"
    obj = rf"(?:\W+(?:{_POINTING})\b){{0,3}}\W+{re.escape(words[0])}\b{_EXCEPT}{following}"
    third = _third_person(verb)
    affirmed = rf"{_SUBJECT}{_ADVERB}\s+{third}\b{obj}"
    denied = rf"{_SUBJECT}(?:{_NEGATION}{_ADVERB}\s+{verb}|\s+never{_ADVERB}\s+{third})\b{obj}"
    return re.compile(affirmed, re.I), re.compile(denied, re.I)


def reasoning_contradicts(question: str, answer: bool, reasoning: str) -> bool:
    """Whether ``reasoning`` plainly says the opposite of ``answer`` to ``question``."""
    if not reasoning.strip():
        return False
    lead = _LEAD.match(reasoning)
    if lead:
        return (lead.group(1).lower() == "yes") != answer
    patterns = _patterns(question)
    if patterns is None:
        return False
    affirmed = patterns[0].search(reasoning) is not None
    denied = patterns[1].search(reasoning) is not None
    if affirmed == denied:
        return False
    return affirmed != answer
