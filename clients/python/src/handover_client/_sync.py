"""The blocking client."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from . import _protocol as proto
from ._base import DEFAULT_TIMEOUT, _Common, _Settings, answer, bind, tool_params
from ._errors import APIConnectionError
from ._outcomes import Outcome
from ._reconcile import Due, LookupResult, Reconciled, reconcile

P = ParamSpec("P")
T = TypeVar("T")

Executor = Callable[[proto.Dispatch], Any]
"""Calls the destination once dispatch is recorded; returns the result
(JSON; None or False confirms nothing and is recorded unknown), or
``ctx.reject(reason)`` for a definitive refusal."""


class Client(_Common):
    """Drives Handover's operations API so a tool call with a real effect is
    performed at most once and never reported as done unless confirmed.

    ``token`` is a client token of ``handover serve``: the scope of every
    operation comes from it. ``task`` names the user task whose budget each
    call draws from (``x-handover-task``). Every request to Handover has a
    deadline (``timeout`` seconds).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        task: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._s = _Settings(base_url, token, task)
        self._own = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)

    def approve(self, action: str, key: str, params: Any, *, task: str | None = None) -> proto.Approval:
        """Records what the user approved under ``key``: from then on only
        exactly these ``params`` can run under it, whichever agent or model
        proposes them. Raises :class:`UnprocessableEntityError` if the key
        was approved with other parameters."""
        return self._run(proto.approve(action, key, params, self._s._headers(task)))

    def perform(
        self, action: str, key: str, params: Any, fn: Executor, *, task: str | None = None
    ) -> Outcome:
        """Performs ``action`` under ``key`` at most once.

        ``fn(ctx)`` is called only after Handover recorded the dispatch, and
        only if this call holds the operation; its return value is recorded
        as confirmed, ``ctx.reject(reason)`` as rejected, and any exception
        — or a return of None or False, which confirms nothing, or a result
        that cannot be recorded — as unknown (never rejected: the effect may
        have happened). Nothing the executor returns makes this raise.
        """
        proto.check_callable(fn, "fn", awaitable_ok=False)
        return self._run(proto.perform(action, key, params, self._s._headers(task)), fn)

    def tool(
        self, action: str
    ) -> Callable[[Callable[Concatenate[proto.Dispatch, P], Any]], Callable[Concatenate[str, P], Outcome]]:
        """Decorator: ``create(key, **params)`` performs the action through
        :meth:`perform`, calling the function as ``fn(ctx, **params)``."""

        def wrap(fn: Callable[Concatenate[proto.Dispatch, P], Any]) -> Callable[Concatenate[str, P], Outcome]:
            sig, public = tool_params(fn)
            call: Callable[..., Any] = fn  # called with the approved params by name

            @functools.wraps(fn)
            def tool(key: str, /, *args: P.args, **kwargs: P.kwargs) -> Outcome:
                params = bind(sig, args, kwargs)
                return self.perform(action, key, params, lambda ctx: call(ctx, **ctx.params))

            tool.__signature__ = public  # type: ignore[attr-defined]
            return tool

        return wrap

    def reconcile(
        self, lookup: Callable[[Due], LookupResult], *, limit: int = 10, lease_s: int = 60
    ) -> list[Reconciled]:
        """One reconciliation pass for actions whose lookup the agent runs.

        Leases up to ``limit`` due unknown operations of this client's scope
        for ``lease_s`` seconds (nobody else gets them meanwhile), calls
        ``lookup(due)`` for each and reports its answer: :class:`Found`
        (one or a list), :class:`NotFound`, or an exception (reported as a
        lookup error, which proves nothing). Handover's reconciler rules
        decide; the answer says what became of each. Call it on a schedule.
        """
        proto.check_callable(lookup, "lookup", awaitable_ok=False)
        return self._run(reconcile(limit, lease_s, self._s._headers(None)), lookup)

    def get(self, key: str, *, task: str | None = None) -> proto.Operation:
        """The operation ``key`` of this client's scope."""
        return self._run(proto.get(key, self._s._headers(task)))

    def list(
        self, state: str = "unknown", *, limit: int = 100, after: str | None = None
    ) -> list[proto.Operation]:
        """This client's operations in ``state`` (default: the unresolved),
        oldest first, at most ``limit`` (1 to 1000). A full page continues
        with ``after=page[-1].key``."""
        flow = proto.list_operations(state, limit, after, self._s._headers(None))
        return self._run(flow)

    def close(self) -> None:
        """Closes the connections (not a caller-supplied ``http_client``)."""
        if self._own:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, flow: proto.Flow[T], fn: Callable[[Any], Any] | None = None) -> T:
        reply: Any = None
        error: APIConnectionError | None = None
        while True:
            try:
                step = flow.throw(error) if error is not None else flow.send(reply)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            error = None
            if isinstance(step, proto.Request):
                try:
                    resp = self._http.request(step.method, self._s._url(step.path), **self._s._request_args(step, self._http.timeout))
                    reply = answer(resp)
                except httpx.HTTPError as e:
                    error = APIConnectionError(f"{step.method} {step.path}: {type(e).__name__}: {e}")
            elif isinstance(step, proto.Wait):
                time.sleep(step.seconds)
                reply = None
            else:
                assert fn is not None
                try:
                    reply = proto.Returned(fn(step.arg))
                except BaseException as e:  # noqa: BLE001 - every failure after dispatch is unknown
                    reply = proto.Raised(e)
