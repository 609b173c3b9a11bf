"""A diagnosis value that contradicts the ground truth's value of the same thing.

Both texts' quantities are read by ``judge.quantities`` (so ``2`` cores and ``2000m``,
``512Mi`` and ``0.5Gi``, ``30s`` and ``30000ms`` are equal). A diagnosis value
contradicts the ground truth when all of these hold, which keeps false alarms rare:

- it is of the same kind and about the same thing (the same subject words: a memory
  *limit* is not compared with a memory *request*, a timeout not with a latency);
  a value no word qualifies is compared only for replica counts, and only when the
  ground truth has one replica count (a bare "port 8080" may be any of several ports);
- the diagnosis reports it as the value the thing has: it does not propose it ("should
  be raised to 1Gi" is advice), nor give it as one the thing had or does not have ("was
  512Mi before someone lowered it", "had 3 replicas before someone scaled it down", "no
  longer 512Mi", "scaled down from 3 replicas");
- it is not another component's: where the caller knows the ground truth's components
  (``elsewhere``), a value whose sentence names another one before it, and none of
  them ("redis, whose memory limit is 1Gi, is fine"), is not compared; one named only
  after it is what the value led to ("its replicas were scaled to 2, so checkout
  fails");
- no value the diagnosis gives for that thing equals one of the ground truth's
  (a diagnosis that says "from 2 cores to 200m" names the true value too), and the value
  is none of the ground truth's values of that kind under any subject; a range
  ("40-60%") contradicts only a value outside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from judge.quantities import Quantity, quantities_in

__all__ = ["Contradiction", "contradictions", "shares_a_quantity"]

#: kinds whose unqualified values may be compared (one ground-truth value of the kind)
_BARE_KINDS = frozenset({"replicas"})
_UNITS = {"cpu": "cores", "memory": "bytes", "duration": "s", "percent": "%"}


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A diagnosis value and the ground truth's values of the same thing."""

    diagnosis: Quantity
    truth: tuple[Quantity, ...]

    def describe(self) -> str:
        """``cpu request: the diagnosis gives "200m" (= 0.2 cores), the ground truth ...``."""
        what = " ".join(dict.fromkeys([self.diagnosis.kind, *self.diagnosis.subject]))
        truth = " or ".join(_shown(q) for q in self.truth)
        return f"{what}: the diagnosis gives {_shown(self.diagnosis)}, the ground truth {truth}"


def _shown(quantity: Quantity) -> str:
    value = "-".join(f"{end.normalize():f}" for end in quantity.ends)
    unit = _UNITS.get(quantity.kind)
    return f'"{quantity.text}" (= {value}{" " + unit if unit else ""})'


def _comparable(quantity: Quantity, truth: list[Quantity]) -> bool:
    if quantity.subject:
        return True
    same_kind = {q.value for q in truth if q.kind == quantity.kind}
    return quantity.kind in _BARE_KINDS and len(same_kind) == 1


def contradictions(
    ground_truth: str, diagnosis: str, *, elsewhere: Callable[[str], bool] | None = None
) -> list[Contradiction]:
    """The diagnosis' values that contradict the ground truth's, one per thing at most.

    ``elsewhere`` tells whether the words of a sentence of the diagnosis before a value
    (:attr:`Quantity.lead`) are about a component other than the ground truth's; such a
    value is not compared."""
    truth = quantities_in(ground_truth)
    if not truth:
        return []
    given = [q for q in quantities_in(diagnosis) if not q.advice and _comparable(q, truth)]
    reported = [q for q in given if not q.former and (elsewhere is None or not elsewhere(q.lead))]
    found: list[Contradiction] = []
    for key in dict.fromkeys((q.kind, q.subject) for q in reported):
        expected = [t for t in truth if (t.kind, t.subject) == key]
        if not expected or any(
            q.near_value(t) for q in given if (q.kind, q.subject) == key for t in expected
        ):
            continue
        for quantity in (q for q in reported if (q.kind, q.subject) == key):
            if not any(quantity.near_value(t) for t in truth):
                found.append(Contradiction(quantity, tuple(expected)))
                break
    return found


def shares_a_quantity(ground_truth: str, diagnosis: str) -> bool:
    """Whether the diagnosis gives a value equal to one of the ground truth's (same kind)."""
    truth = quantities_in(ground_truth)
    return bool(truth) and any(q.same_value(t) for q in quantities_in(diagnosis) for t in truth)
