"""The operations protocol, written once for the sync and async clients.

Each flow is a generator that yields what must happen next — an HTTP
request to Handover (:class:`Request`), the call to the destination
(:class:`Call`: the executor, or a reconciliation lookup) or a pause
before a retry (:class:`Wait`) — and receives its result. The clients
only carry these steps out (``httpx.Client`` or ``httpx.AsyncClient``; a
plain or an awaited executor; ``time.sleep`` or ``asyncio.sleep``), so
the order of the protocol cannot differ between them: the executor step
is yielded only after Handover has answered that the dispatch is
recorded.
"""

from __future__ import annotations

import functools
import inspect
import json
import random
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, Union
from urllib.parse import quote

from ._errors import APIConnectionError, HandoverError, error_for
from ._outcomes import (
    Confirmed,
    Conflict,
    InProgress,
    Outcome,
    Rejected,
    Replayed,
    Suspended,
    Unresolved,
)
from ._text import SMALL_CUT, SMALL_TEXT_BYTES, cut, evidence_text, reason_text

T = TypeVar("T")

TASK_HEADER = "x-handover-task"
"""The header naming the user task whose budget a call draws from."""


@dataclass(frozen=True)
class Request:
    """One HTTP request to Handover; ``timeout``: seconds it may take, when
    shorter than the client's own timeout (what is left of a claim's
    lease)."""

    method: str
    path: str
    body: Any = None
    headers: Mapping[str, str | bytes] = field(default_factory=dict)
    query: Mapping[str, str] | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class Answer:
    """Handover's answer: the status and the JSON body (None if not JSON)."""

    status: int
    body: Any


@dataclass(frozen=True)
class Dispatch:
    """What the executor gets: the operation, recorded as dispatched.

    Send ``destination_key`` to the destination in ``idempotency_header``
    (``headers`` is that one header as a dict): it is the same on every
    re-send of this operation, so a destination that deduplicates on it
    applies the action once.
    """

    action: str
    key: str
    params: Any
    """A private copy of the approved parameters."""
    destination_key: str
    idempotency_header: str | None
    """The header the action's contract names (None: the action declares none)."""
    attempt_number: int
    resend: bool
    """True for a re-send inside the destination's idempotency window."""
    timeout: float | None
    """The action's executor timeout in seconds (the async client enforces it;
    an executor should pass it to its own HTTP calls)."""

    @property
    def headers(self) -> dict[str, str]:
        """The destination idempotency header to send."""
        return {self.idempotency_header or "Idempotency-Key": self.destination_key}

    def reject(self, reason: object, evidence: object = None) -> Rejection:
        """A declared rejection to return: the destination definitively
        refused and nothing happened (a 4xx that says so, not a timeout).

        ``reason`` and ``evidence`` are made recordable, never refused: a
        value that is not a ``str`` (``r.json()``, ``r.status_code``,
        ``r.content``) becomes its text, a blank reason a default that says
        none was given, and a text past 64 KiB is cut there with a note,
        as the ledger cuts a destination's text."""
        return Rejection(reason_text(reason), evidence_text(evidence))


@dataclass(frozen=True)
class Rejection:
    """Returned by an executor when the destination definitively refused.

    The only way to record ``rejected``: an exception never is one. Made
    by ``ctx.reject``; one made directly is made recordable the same way
    when it is reported.
    """

    reason: str
    evidence: str | None = None


@dataclass(frozen=True)
class Returned:
    """The executor returned ``value``."""

    value: Any


@dataclass(frozen=True)
class Raised:
    """The executor raised (or timed out, or was cancelled)."""

    error: BaseException


Got = Union[Returned, Raised]


@dataclass(frozen=True)
class Call:
    """Step: call the user's function with ``arg`` now (for an executor:
    the dispatch is recorded), within ``timeout`` seconds where the client
    can enforce it.

    ``late``: what to do with the answer of a call the client stopped
    waiting for (its timeout passed, or the caller was cancelled) but
    could not stop — a plain function in a thread; None: drop it."""

    arg: Any
    timeout: float | None
    what: str
    late: Callable[[Got], Flow[Any]] | None = None


@dataclass(frozen=True)
class Wait:
    """Step: pause ``seconds`` before a retry (never past a deadline the
    flow already checked)."""

    seconds: float


@dataclass(frozen=True)
class Approval:
    """The answer to :meth:`Client.approve`."""

    key: str
    status: str
    """``planned`` (recorded now), ``already_approved`` or ``replayed``."""
    state: str
    """The operation's state (``planned``, ``confirmed``, ...)."""
    replayed: Replayed | None = None


@dataclass(frozen=True)
class Operation:
    """One operation as the ledger records it (``raw`` has every field)."""

    scope: str
    key: str
    action: str
    state: str
    params: Any
    result: Any
    reason: str | None
    raw: Mapping[str, Any] = field(repr=False)

    @staticmethod
    def from_json(rec: Mapping[str, Any]) -> Operation:
        state = rec.get("state") or {}
        reason = state.get("reason")
        return Operation(
            scope=rec["id"]["scope"],
            key=rec["id"]["key"],
            action=rec["action"],
            state=state.get("state", ""),
            params=rec.get("params"),
            result=state.get("result"),
            reason=reason if isinstance(reason, str) else None,
            raw=rec,
        )


Step = Union[Request, Call, Wait]
Flow = Generator[Step, Any, T]


def private_copy(value: Any, what: str) -> Any:
    """A JSON copy: what the executor gets and what is recorded cannot be
    changed through the caller's objects; non-JSON fails before anything is
    sent. A lone surrogate (``"\\ud800"``, which Python's ``json`` reads
    from an escape) is not JSON here: no UTF-8 document can carry it, so
    the request would fail on its way out."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        return json.loads(text)
    except UnicodeEncodeError as e:
        raise TypeError(
            f"{what}: not JSON: holds a lone surrogate ({e.object[e.start:e.end]!a}), "
            "which no UTF-8 document can carry"
        ) from e
    except (TypeError, ValueError, RecursionError) as e:
        raise TypeError(f"{what}: not JSON: {e}") from e


def path_segment(key: str) -> str:
    """`key` as one URL path segment. `.` and `..` are spelled `%2E`: as
    themselves an HTTP client resolves them as dot-segments, and
    `/v1/operations/../dispatch` would become `/v1/dispatch`."""
    segment = quote(key, safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def _op_path(key: str) -> str:
    return "/v1/operations/" + path_segment(key)


def _header_value(key: str) -> str | bytes:
    # Handover validates keys (visible ASCII, <= 255 bytes) and names the
    # field; send what we were given so its answer is the one error.
    return key if key.isascii() else key.encode("utf-8")


def _check_header_value(name: str, value: str) -> None:
    """`value` travels in an HTTP header: refused here, naming ``name``,
    before anything is claimed, if no header can carry it as it is. A
    control character cannot travel at all; a space at either end is
    refused by the HTTP client, and would be trimmed by the server (RFC
    9110), which would make ``" K-1"`` and ``"K-1"`` one operation."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(f"{name}: control characters are not allowed, got {value!r}")
    if value != value.strip(" "):
        raise ValueError(f"{name}: leading or trailing spaces are not allowed, got {value!r}")


def _check_names(action: Any, key: Any) -> None:
    if not isinstance(action, str):
        raise TypeError(f"action: expected str, got {type(action).__name__}")
    if not isinstance(key, str):
        raise TypeError(f"key: expected str, got {type(key).__name__}")
    _check_header_value("key", key)


def approve(action: str, key: str, params: Any, headers: Mapping[str, str]) -> Flow[Approval]:
    """Records what the user approved; later begins must carry these params."""
    _check_names(action, key)
    body = {"action": action, "params": private_copy(params, "params")}
    ans = yield Request("POST", _op_path(key) + "/approve", body, headers)
    status = _status_of(ans)
    if ans.status == 201 and status == "planned":
        return Approval(key, "planned", "planned")
    if ans.status == 200 and status == "already_approved":
        return Approval(key, "already_approved", str(ans.body.get("state")))
    if ans.status == 200 and status == "replayed":
        r = _replayed(action, key, ans.body["outcome"])
        return Approval(key, "replayed", r.outcome, r)
    raise _unexpected(ans)


def perform(action: str, key: str, params: Any, headers: Mapping[str, str]) -> Flow[Outcome]:
    """begin -> dispatch (recorded) -> executor -> outcome."""
    _check_names(action, key)
    params = private_copy(params, "params")
    begin_headers: dict[str, str | bytes] = {**headers, "Idempotency-Key": _header_value(key)}
    ans = yield Request("POST", "/v1/operations", {"action": action, "params": params}, begin_headers)
    if not (ans.status == 201 and _status_of(ans) == "started"):
        return _not_started(action, key, ans)
    held = _Held.of(action, key, params, ans.body, headers)
    not_sent = yield from _dispatch(held)
    if not_sent is not None:
        return not_sent
    started = time.monotonic()
    got = yield Call(held.ctx, held.ctx.timeout, "the executor", functools.partial(_report, held, started))
    outcome = yield from _report(held, started, got)
    if isinstance(got, Raised) and not isinstance(got.error, Exception):
        raise got.error  # KeyboardInterrupt, cancellation: recorded, then re-raised
    return outcome


@dataclass(frozen=True)
class _Held:
    """The claim this call holds: what the executor gets, the epoch every
    write carries, and when the lease ends (``time.monotonic``)."""

    ctx: Dispatch
    epoch: int
    lease_end: float
    headers: Mapping[str, str]

    @staticmethod
    def of(action: str, key: str, params: Any, started: Mapping[str, Any], headers: Mapping[str, str]) -> _Held:
        claim, contract = started["claim"], started["contract"]
        timeout = contract.get("timeout_s")
        ctx = Dispatch(
            action=action,
            key=key,
            params=private_copy(params, "params"),
            destination_key=claim["destination_key"],
            idempotency_header=contract.get("idempotency_header"),
            attempt_number=claim.get("attempt_number", 1),
            resend=bool(started.get("resend")),
            timeout=float(timeout) if timeout else None,
        )
        return _Held(ctx, claim["epoch"], _lease_end(claim, contract), headers)

    @property
    def path(self) -> str:
        return _op_path(self.ctx.key)

    def request(self, method: str, path: str, body: Any = None) -> Request:
        """A request this claim makes, bounded by what is left of the lease
        plus :data:`LEASE_MARGIN`: past the lease no answer can change what
        ``perform`` says (the operation is the server's to make unknown),
        so a ledger that does not answer holds the caller about until the
        lease ends, not for the server's own deadline on every try."""
        left = max(0.0, self.lease_end - time.monotonic())
        return Request(method, path, body, self.headers, timeout=left + LEASE_MARGIN)


LEASE_MARGIN = 1.0
"""Seconds a request of a claim (its outcome, the read-back) may take past
the lease's end: time for an answer already on its way."""


def _lease_end(claim: Mapping[str, Any], contract: Mapping[str, Any]) -> float:
    """The claim's ``lease_until`` (the server's clock, ms since the Unix
    epoch) on this machine's monotonic clock — never later than the
    lease's length from now, so a clock behind the server's cannot
    stretch it (one ahead only shortens it)."""
    left = float(contract.get("lease_s") or 0)
    lease_until = claim.get("lease_until")
    if isinstance(lease_until, (int, float)):
        left = min(left, lease_until / 1000 - time.time())
    return time.monotonic() + max(0.0, left)


def _dispatch(held: _Held) -> Flow[Outcome | None]:
    """Records the dispatch; None when the executor may run. Otherwise the
    claim is given back (the destination was not called) and the answer
    is the error raised, or ``Suspended``."""
    ctx, give_back = held.ctx, {"epoch": held.epoch, "outcome": "not_sent"}
    try:
        ans = yield Request("POST", held.path + "/dispatch", {"epoch": held.epoch}, held.headers)
        # Another operation of this action became unknown since the claim.
        suspended = ans.status == 423 and _status_of(ans) == "suspended"
        if ans.status != 200 and not suspended:
            raise error_for(ans.status, ans.body)
    except HandoverError as e:
        # The destination was not called: say so, so the key is free again.
        evidence = f"the client did not call the destination: dispatch was not confirmed ({e})"
        try:
            yield held.request("POST", held.path + "/outcome", {**give_back, "evidence": evidence})
        except HandoverError:
            pass  # the lease returns an undispatched claim; a dispatched one becomes unknown
        raise
    if not suspended:
        return None
    # Nothing may be sent: give the claim back, answer as `begin` would.
    evidence = "suspended at dispatch: another operation of this action is unresolved"
    try:
        yield held.request("POST", held.path + "/outcome", {**give_back, "evidence": evidence})
    except HandoverError:
        pass  # the lease returns the undispatched claim
    return _not_started(ctx.action, ctx.key, ans)


def _report(held: _Held, started: float, got: Got) -> Flow[Outcome]:
    """Records what the executor answered (``started``: when it was
    called, ``time.monotonic``). An executor answer the ledger did not
    record as confirmed or rejected stays on the ``Unresolved``
    (``executor_result``, ``executor_rejection``) for the application to
    keep."""
    took = time.monotonic() - started
    # No client can stop a plain function (the async one runs it in a
    # thread); one that ran past its timeout may answer after the ledger
    # closed the dispatch. What it reports is still recorded if the
    # ledger's fence allows (it is true); if not, `_read_back` says so,
    # and how late it was.
    timeout = held.ctx.timeout
    late = took if timeout is not None and took > timeout else None
    report, cause, kept = _report_of(got)
    outcome = yield from _record(held, report, cause, late)
    if isinstance(outcome, Unresolved) and kept:
        # The destination's answer, which the ledger did not record as
        # such: the caller keeps it.
        return replace(outcome, **kept)
    return outcome


def _no_answer(value: Any) -> str:
    return (
        f"the executor returned {value!r}, not the destination's answer: return what the "
        "destination answered (its result), ctx.reject(reason) for a definitive refusal, or raise"
    )


def _report_of(got: Got) -> tuple[dict[str, Any], BaseException | None, dict[str, Any]]:
    """The outcome report for what the executor did, its cause, and what
    to keep on an ``Unresolved`` (``executor_result`` or
    ``executor_rejection``). Never raises: whatever cannot be turned into
    a confirmed or rejected report — the destination may have acted —
    is reported unknown with a reason saying why."""
    value = got.value if isinstance(got, Returned) else None
    try:
        report, cause, kept = _report_or_raise(got)
        # What the runner would fail to send is caught here, not after.
        json.dumps(report, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except Exception as e:  # noqa: BLE001 - after dispatch nothing may escape unrecorded
        reason = (
            f"the executor's answer (a {type(value).__name__}) could not be turned into a report "
            f"({qualname(e)}): it cannot be recorded as a confirmed or rejected outcome"
        )
        answered = value is not None and not isinstance(value, Rejection)
        return _unknown(reason), e, ({"executor_result": value} if answered else {})
    return report, cause, kept


def _report_or_raise(got: Got) -> tuple[dict[str, Any], BaseException | None, dict[str, Any]]:
    if isinstance(got, Raised):
        # The type only: an exception's text may carry what must not be
        # stored (a URL with a token); the caller gets it in `cause`.
        return _unknown(f"the executor raised {qualname(got.error)} after dispatch"), got.error, {}
    value = got.value
    if isinstance(value, Rejection):
        reason = reason_text(value.reason)
        report: dict[str, Any] = {"outcome": "rejected", "reason": reason}
        evidence = evidence_text(value.evidence)
        if evidence is not None:
            report["evidence"] = evidence
        return report, None, {"executor_rejection": reason}
    if value is None or value is False:
        # A forgotten `return`, a status nobody checked (`return
        # r.is_success` after a 422): no answer is no confirmation.
        why = _no_answer(value)
        return _unknown(why), TypeError(why), {}
    try:
        result = private_copy(value, "result")
    except TypeError as e:
        what = (
            "holds a lone surrogate (an escaped \\ud800 in the destination's JSON?), which no "
            "UTF-8 document can carry"
            if isinstance(e.__cause__, UnicodeEncodeError)
            else "is not JSON"
        )
        reason = (
            f"the executor returned a {type(value).__name__} that {what}: "
            "it cannot be recorded as a confirmed result"
        )
        return _unknown(reason), e, {"executor_result": _copy_or_same(value)}
    return {"outcome": "confirmed", "result": result}, None, {"executor_result": result}


def _copy_or_same(value: Any) -> Any:
    """A private copy where JSON can make one (a lone surrogate survives
    Python's own round trip), else the value itself."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return value


def qualname(e: BaseException) -> str:
    """An exception's type, as recorded (never its text: it may hold secrets)."""
    t = type(e)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def check_callable(fn: Any, name: str, awaitable_ok: bool) -> None:
    """Loud before anything is recorded: a wrong executor would otherwise
    fail after dispatch and leave the operation unknown."""
    if not callable(fn):
        raise TypeError(f"{name}: expected a callable, got {type(fn).__name__}")
    if not awaitable_ok and inspect.iscoroutinefunction(fn):
        raise TypeError(f"{name}: a coroutine function needs AsyncClient")


def _unknown(reason: str) -> dict[str, Any]:
    return {"outcome": "unknown", "reason": reason[:2000]}


def _record(
    held: _Held, report: dict[str, Any], cause: BaseException | None, late: float | None
) -> Flow[Outcome]:
    """Writes the outcome; if that fails, reads what the ledger holds.
    ``late``: how long the executor ran, if past its timeout."""
    ctx, reported = held.ctx, report["outcome"]
    sent = yield from _send_outcome(held, report)
    if isinstance(sent, HandoverError):
        return (yield from _read_back(held, sent, reported, late))
    if sent.status == 200:
        return _from_record(ctx.action, ctx.key, sent.body["operation"], cause)
    err = error_for(sent.status, sent.body)
    if reported == "rejected" and sent.status == 413:
        # The gateway takes less than 64 KiB texts need: a definitive
        # refusal is still recorded, with less of its description.
        smaller = _smaller(report)
        if smaller != report:
            return (yield from _record(held, smaller, cause, late))
    if reported in ("confirmed", "rejected") and sent.status in (400, 413):
        # The destination answered, but the report is not recordable (a
        # result number outside I-JSON, a result larger than the gateway
        # takes): record unknown rather than leave the operation dispatched.
        reason = f"the destination answered but the {reported} report cannot be recorded: {err.message}"
        return (yield from _record(held, _unknown(reason), err, late))
    return (yield from _read_back(held, err, reported, late))


def _smaller(report: dict[str, Any]) -> dict[str, Any]:
    """A rejected report with its texts cut to :data:`SMALL_TEXT_BYTES`."""
    return {
        k: cut(v, SMALL_TEXT_BYTES, SMALL_CUT) if k in ("reason", "evidence") else v
        for k, v in report.items()
    }


RETRY_FIRST = 0.25
"""Seconds before the first retry of an outcome; doubled each time up to
:data:`RETRY_MAX`, with jitter, and never past the claim's lease."""
RETRY_MAX = 2.0


def _send_outcome(held: _Held, report: dict[str, Any]) -> Flow[Answer | HandoverError]:
    """Posts the outcome. While the lease holds, an answer that says
    nothing was done yet (429, 503 ``ledger_unavailable``) or no answer at
    all is retried — the same outcome, the same epoch (docs/gateway.md,
    "When the ledger does not answer"): a retry of a report that was in
    fact recorded is refused (409) and the read-back shows it. Returns
    the last answer, or the error when there was none."""
    body = {"epoch": held.epoch, **report}
    pause = RETRY_FIRST
    while True:
        try:
            ans: Answer = yield held.request("POST", held.path + "/outcome", body)
        except APIConnectionError as e:
            failed: Answer | HandoverError = e
        else:
            if ans.status not in (429, 503):
                return ans
            failed = error_for(ans.status, ans.body)
        wait = pause * random.uniform(0.5, 1.0)
        if time.monotonic() + wait >= held.lease_end:
            return failed
        yield Wait(wait)
        pause = min(pause * 2, RETRY_MAX)


def _read_back(held: _Held, err: HandoverError, reported: str, late: float | None) -> Flow[Outcome]:
    """What to say when this call's report was not recorded (``err``):
    what the ledger holds — unless that would contradict the executor."""
    ctx = held.ctx
    try:
        ans = yield held.request("GET", held.path)
    except HandoverError:
        ans = None
    if ans is not None and ans.status == 200:
        rec = ans.body["operation"]
        state = (rec.get("state") or {}).get("state")
        if state == "rejected" and reported != "rejected":
            return _closed_meanwhile(ctx, state, reported, err, late)
        out = _from_record(ctx.action, ctx.key, rec, err)
        if not isinstance(out, Unresolved) or out.recorded:
            return out
    return Unresolved(ctx.action, ctx.key, reason=f"the outcome could not be recorded: {err}",
                      recorded=False, cause=err)


def _closed_meanwhile(
    ctx: Dispatch, state: str, reported: str, err: HandoverError, late: float | None
) -> Unresolved:
    """The ledger decided the operation (a reconciler's lookup found
    nothing, an operator) while this call's executor was still running,
    and then the executor returned (or raised after it may have sent).
    The ledger's ``rejected`` says nothing was performed; the executor
    says otherwise or cannot rule it out. Neither is told as the truth:
    the effect may exist, and a human must look (Handover keeps the
    refused report in the operation's attempt log)."""
    what = {
        "confirmed": "a result",
        "unknown": "an outcome it could not confirm",
    }.get(reported, f"{reported!r}")
    overran = "" if late is None else f" (it ran {late:.1f}s, past its {ctx.timeout:g}s timeout)"
    reason = (
        f"the executor reported {what}{overran} after the ledger had closed the dispatch "
        f"as {state}; the effect may exist and a human must review it ({err})"
    )
    return Unresolved(ctx.action, ctx.key, reason=reason, owner="review", recorded=False,
                      diverged=True, cause=err)


def _from_record(action: str, key: str, rec: Mapping[str, Any], cause: BaseException | None) -> Outcome:
    state = rec.get("state") or {}
    kind = state.get("state")
    if kind == "confirmed":
        return Confirmed(action, key, result=state.get("result"))
    if kind == "rejected":
        return Rejected(action, key, reason=state.get("reason", ""))
    if kind == "unknown":
        return Unresolved(action, key, reason=state.get("reason", ""), owner=state.get("owner"),
                          cause=cause)
    return Unresolved(action, key, reason=f"the operation is {kind}", recorded=False, cause=cause)


def _status_of(ans: Answer) -> str | None:
    return ans.body.get("status") if isinstance(ans.body, dict) else None


def _unexpected(ans: Answer) -> HandoverError:
    if ans.status >= 400:
        return error_for(ans.status, ans.body)
    return HandoverError(f"unexpected answer from Handover (HTTP {ans.status}): {ans.body!r}")


def _replayed(action: str, key: str, t: Mapping[str, Any]) -> Replayed:
    if t.get("outcome") == "tombstone":
        return Replayed(action, key, outcome=t["state"], expired=True)
    return Replayed(action, key, outcome=t["outcome"], result=t.get("result"), reason=t.get("reason"))


def _not_started(action: str, key: str, ans: Answer) -> Outcome:
    status, body = _status_of(ans), ans.body
    if ans.status == 200 and status == "replayed":
        return _replayed(action, key, body["outcome"])
    if ans.status == 409 and status == "in_progress":
        return InProgress(action, key, holder=body.get("holder"), lease_until=body.get("lease_until"))
    if ans.status == 422 and status == "conflict":
        return Conflict(action, key)
    if ans.status == 423 and status == "unresolved":
        info = body.get("unknown") or {}
        return Unresolved(action, key, reason=info.get("reason", ""), owner=info.get("owner"))
    if ans.status == 423 and status == "suspended":
        return Suspended(action, key, blocked_by=(body.get("blocked_by") or {}).get("key"))
    raise _unexpected(ans)


def get(key: str, headers: Mapping[str, str]) -> Flow[Operation]:
    """One operation of this client's scope."""
    _check_names("", key)
    ans = yield Request("GET", _op_path(key), None, headers)
    if ans.status != 200:
        raise _unexpected(ans)
    return Operation.from_json(ans.body["operation"])


def list_operations(
    state: str, limit: int, after: str | None, headers: Mapping[str, str]
) -> Flow[list[Operation]]:
    """This client's operations in ``state`` (``all``: every state), oldest
    first, at most ``limit``, after the operation keyed ``after``.

    The server also ends a page at about 4 MiB (operations carry up to
    64 KiB of parameters and as much result), with ``next``; such a page is
    followed here until ``limit`` operations are read or the list ends, so
    a page shorter than ``limit`` still means the end."""
    if after is not None and not isinstance(after, str):
        raise TypeError(f"after: expected str, got {type(after).__name__}")
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"limit: expected int, got {type(limit).__name__}")
    ops: list[Operation] = []
    while True:
        query = {"state": state, "limit": str(limit - len(ops))}
        if after is not None:
            query["after_key"] = after
        ans = yield Request("GET", "/v1/operations", None, headers, query)
        if ans.status != 200:
            raise _unexpected(ans)
        page = [Operation.from_json(r) for r in ans.body["operations"]]
        ops.extend(page)
        nxt = ans.body.get("next")
        if not page or len(ops) >= limit or not isinstance(nxt, dict):
            return ops
        after = nxt.get("after_key")
        if not isinstance(after, str):
            return ops


def task_headers(task: str | None) -> dict[str, str]:
    """Per-call headers: the task whose budget the call draws from."""
    if task is None:
        return {}
    if not isinstance(task, str):
        raise TypeError(f"task: expected str, got {type(task).__name__}")
    _check_header_value("task", task)
    return {TASK_HEADER: task}

