"""Pull reconciliation: the agent runs the destination's lookup itself.

For actions whose lookup contract has no ``url`` (only the agent can reach
the destination's records), ``serve`` leaves unknown operations to the
agents: :meth:`Client.reconcile` leases the due ones of the client's scope,
calls your lookup for each, and reports what it found. Handover's
reconciler rules decide (found with the approved parameters → confirmed;
other parameters or several records → diverged, to review; nothing found
→ rejected only after the visibility lag; an error proves nothing), so a
lookup cannot resolve anything by itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from ._errors import HandoverError, error_for
from ._protocol import Call, Flow, Raised, Request, path_segment, private_copy, qualname


@dataclass(frozen=True)
class Due:
    """An unknown operation leased to this agent for a lookup."""

    key: str
    action: str
    params: Any
    """The approved parameters (a private copy)."""
    destination_key: str
    """What the executor sent as the destination's idempotency key: the
    usual thing to look the record up by."""
    reason: str
    """Why the outcome is unknown."""


@dataclass(frozen=True)
class Found:
    """One record of the operation at the destination.

    ``params`` are the record's values mapped back into the approved form
    (they are compared with what was approved: never copy the approved
    parameters here); ``result`` is what to record as the confirmed result.
    Return several when the destination has several.
    """

    params: Any
    result: Any


@dataclass(frozen=True)
class NotFound:
    """The destination has no record of the operation."""


LookupResult = Union[Found, Sequence[Found], NotFound]


@dataclass(frozen=True)
class Reconciled:
    """What became of one leased operation."""

    key: str
    action: str
    reconciliation: Literal["confirmed", "rejected", "diverged", "still_unknown", "not_reported"]
    """Handover's decision; ``not_reported`` if the report did not reach it
    (the operation is due again after the lease)."""
    state: str | None
    """The operation's state after the report (None if not reported)."""
    error: BaseException | None = field(default=None, compare=False)
    """The lookup's exception, or why the report failed."""


def _report(value: Any) -> dict[str, Any]:
    if isinstance(value, NotFound):
        return {"outcome": "not_found"}
    records = [value] if isinstance(value, Found) else value
    if not isinstance(records, Sequence) or not records or not all(isinstance(r, Found) for r in records):
        raise TypeError(
            f"lookup: expected Found, a non-empty list of Found, or NotFound; got {type(value).__name__}"
        )
    return {
        "outcome": "found",
        "records": [
            {"params": private_copy(r.params, "Found.params"), "result": private_copy(r.result, "Found.result")}
            for r in records
        ],
    }


def _due(op: Mapping[str, Any]) -> Due:
    return Due(
        key=op["key"],
        action=op["action"],
        params=private_copy(op.get("params"), "params"),
        destination_key=op["destination_key"],
        reason=(op.get("unknown") or {}).get("reason", ""),
    )


def reconcile(limit: int, lease_s: int, headers: Mapping[str, str]) -> Flow[list[Reconciled]]:
    """Lease the due operations, look each up, report each."""
    ans = yield Request("POST", "/v1/reconcile/lease", {"limit": limit, "lease_s": lease_s}, headers)
    if ans.status != 200:
        raise error_for(ans.status, ans.body)
    done: list[Reconciled] = []
    for op in ans.body["operations"]:
        due = _due(op)
        got = yield Call(due, float(lease_s), "the lookup")
        cause: BaseException | None = None
        if isinstance(got, Raised):
            cause = got.error
            report: dict[str, Any] = {"outcome": "error", "error": f"the lookup raised {qualname(cause)}"}
        else:
            report = _report(got.value)  # a wrong answer is the caller's bug: loud, nothing reported
        path = "/v1/reconcile/" + path_segment(due.key) + "/report"
        try:
            ans = yield Request("POST", path, report, headers)
            if ans.status != 200:
                raise error_for(ans.status, ans.body)
        except HandoverError as e:
            done.append(Reconciled(due.key, due.action, "not_reported", None, e))
        else:
            done.append(Reconciled(due.key, due.action, ans.body["reconciliation"], ans.body["status"], cause))
        if cause is not None and not isinstance(cause, Exception):
            raise cause  # KeyboardInterrupt, cancellation: reported, then re-raised
    return done
