"""What ``perform`` answers: one type per thing that can have happened.

Every outcome says whether the effect is confirmed (``done``) and carries
``text``, the sentence an agent should give the model as the tool result,
so a model never reads "no success message" as "not done" and proposes the
action again under another key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal


def _show(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Outcome:
    """Base of every outcome of :meth:`Client.perform`."""

    action: str
    key: str

    status: ClassVar[str] = ""
    done: ClassVar[bool] = False
    """True only when the destination confirmed the effect."""

    @property
    def text(self) -> str:
        """What the agent should tell the model."""
        raise NotImplementedError

    def tool_result(self) -> str:
        """``text`` and the facts as one JSON string, for a tool message."""
        doc: dict[str, Any] = {"status": self.status, "done": self.done, "message": self.text}
        result = getattr(self, "result", None)
        if result is not None:
            doc["result"] = result
        return _show(doc)


@dataclass(frozen=True)
class Confirmed(Outcome):
    """This call performed the action and the destination confirmed it."""

    result: Any = None
    """The result as recorded (canonical JSON: what every replay returns)."""

    status: ClassVar[str] = "confirmed"
    done: ClassVar[bool] = True

    @property
    def text(self) -> str:
        return f"Done: {self.action} {self.key} succeeded and is recorded. Result: {_show(self.result)}."


@dataclass(frozen=True)
class Rejected(Outcome):
    """The destination definitively refused; the effect did not happen."""

    reason: str = ""
    status: ClassVar[str] = "rejected"

    @property
    def text(self) -> str:
        return (
            f"Not done: the destination refused {self.action} {self.key}: {self.reason}. "
            "Nothing was performed."
        )


@dataclass(frozen=True)
class Replayed(Outcome):
    """The operation was finished earlier; this is the recorded outcome and
    nothing was sent now."""

    outcome: Literal["confirmed", "rejected"] = "confirmed"
    result: Any = None
    reason: str | None = None
    expired: bool = False
    """Past the replay window only the terminal state is kept (no result)."""

    status: ClassVar[str] = "replayed"

    @property
    def done(self) -> bool:  # type: ignore[override]
        return self.outcome == "confirmed"

    @property
    def text(self) -> str:
        if self.outcome == "confirmed":
            what = "" if self.expired else f" (result: {_show(self.result)})"
            return (
                f"Already done: {self.action} {self.key} was completed earlier{what}. "
                "It was not performed again; do not repeat it."
            )
        why = "" if self.expired else f" ({self.reason})"
        return (
            f"Already refused earlier: {self.action} {self.key} was rejected{why}. "
            "It was not performed."
        )


@dataclass(frozen=True)
class Unresolved(Outcome):
    """The outcome is unknown: the effect may or may not have happened.

    Writes for this operation stay blocked until a reconciler or an operator
    decides with evidence. Never treat this as a failure to retry.
    """

    reason: str = ""
    owner: str | None = None
    """``reconciler`` or ``review`` (None if the record could not be written)."""
    recorded: bool = True
    """False when the ledger could not record the outcome (its lease then
    turns the operation unknown)."""
    cause: BaseException | None = field(default=None, compare=False, repr=False)
    """The executor's exception or the error that made the outcome unknown."""
    diverged: bool = False
    """The ledger and this call's executor disagree: the ledger had closed
    the dispatch (as ``rejected``) before the executor reported a result
    (or raised after it may have sent). Only a human can tell which is
    right; ``reason`` says what each side said."""
    executor_result: Any = None
    """The result this call's executor returned, when the ledger did not
    record it as confirmed (it could not be written while the lease held,
    it cannot be recorded exactly, or the dispatch was closed meanwhile);
    None otherwise. Keep it: it is the evidence that settles the
    operation (an operator resolving it, a lookup). Never shown to the
    model: the effect is not confirmed."""
    executor_rejection: str | None = None
    """The reason of this call's executor's ``ctx.reject(...)``, when the
    ledger did not record it as rejected; None otherwise."""

    status: ClassVar[str] = "unresolved"

    @property
    def text(self) -> str:
        if self.diverged:
            return (
                f"Needs review: {self.action} {self.key} may have been performed, but it is not "
                "confirmed: the executor reported after the operation had been closed, so a "
                "person must review it. Do not retry it, and do not retry it under another key; "
                "tell the user it is being reviewed."
            )
        return (
            f"Pending verification: the outcome of {self.action} {self.key} is not known yet and "
            "is being verified. Do not retry it, and do not retry it under another key; "
            "tell the user it is being verified."
        )


@dataclass(frozen=True)
class Suspended(Outcome):
    """Another operation of this action has an unknown outcome and blocks
    this one (``block = "scope"`` or ``"action"``); nothing was sent."""

    blocked_by: str | None = None
    """The blocking operation's key, when it is in the caller's scope."""

    status: ClassVar[str] = "suspended"

    @property
    def text(self) -> str:
        by = f" ({self.blocked_by})" if self.blocked_by else ""
        return (
            f"On hold: another {self.action} operation{by} is being verified, so "
            f"{self.action} {self.key} was not sent. Nothing was performed. Do not retry it under "
            "another key; tell the user it waits until the earlier one is resolved."
        )


@dataclass(frozen=True)
class Conflict(Outcome):
    """The key was approved with other parameters; nothing was executed."""

    status: ClassVar[str] = "conflict"

    @property
    def text(self) -> str:
        return (
            f"Not sent: {self.key} was approved with different parameters for {self.action}. "
            "Nothing was executed. Ask the user to approve the changed request as a new request."
        )


@dataclass(frozen=True)
class InProgress(Outcome):
    """Another worker holds the operation right now; nothing was sent."""

    holder: str | None = None
    lease_until: int | None = None
    """Milliseconds since the Unix epoch; ask again after it."""

    status: ClassVar[str] = "in_progress"

    @property
    def text(self) -> str:
        return (
            f"In progress: {self.action} {self.key} is being performed right now. Nothing new "
            "was sent. Check its status later; do not retry it under another key."
        )
