"""Who may do what: three roles, each allowed everything the one before it is."""

from __future__ import annotations

import enum


class Role(enum.StrEnum):
    VIEWER = "viewer"  # reads (and may log in to see who they are); no writes
    TRIAGER = "triager"  # runs, reruns, backends, quarantine, notifications
    ADMIN = "admin"  # everything, token management included

    def allows(self, needed: Role) -> bool:
        order = list(Role)
        return order.index(self) >= order.index(needed)

    @classmethod
    def parse(cls, value: str) -> Role:
        """The role named ``value``, or ValueError with the names that exist."""
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(r.value for r in cls)
            raise ValueError(f"unknown role {value!r}: one of {names}") from None
