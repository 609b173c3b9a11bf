"""Who is calling: a principal with one of three roles, submitter < adjudicator < admin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ANONYMOUS", "ROLES", "Principal", "Role"]

Role = Literal["submitter", "adjudicator", "admin"]
ROLES: tuple[Role, ...] = ("submitter", "adjudicator", "admin")
_RANK = {role: rank for rank, role in enumerate(ROLES)}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's id, its name and its role."""

    id: str
    name: str
    role: Role
    #: an admin granted this token its own ground truth (SRE_JUDGE_INLINE_GROUND_TRUTH=per_token)
    inline_ground_truth: bool = False

    def at_least(self, role: Role) -> bool:
        """Whether this principal's role is ``role`` or higher."""
        return _RANK[self.role] >= _RANK[role]


#: the principal of anonymous use on 127.0.0.1, when the setting allows it
ANONYMOUS = Principal(id="anonymous", name="anonymous", role="admin")
