"""A choice among a few named values, as one enum: `Choice`.

Like `Precision`, a member is a `str` equal to its value (`OnFailing.FALLBACK == "fallback"`), so
command lines, manifests and JSON documents keep plain strings while code compares members, and
a value outside the choices is refused in one sentence naming the option and the choices.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from trtconv.core.errors import UsageError

ChoiceT = TypeVar("ChoiceT", bound="Choice")


class Choice(str, Enum):
    """The base of trtconv's string choices."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls: type[ChoiceT], flag: str, value: str) -> ChoiceT:
        """`value` as a member; UsageError naming `flag` and the choices otherwise."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(member.value for member in cls)
            raise UsageError(f"{flag} must be one of {choices}, found '{value}'.") from None
