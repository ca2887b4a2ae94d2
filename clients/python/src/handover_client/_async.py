"""The asyncio client: the same surface as :class:`Client`, awaited."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from . import _protocol as proto
from ._base import DEFAULT_TIMEOUT, _Common, _Settings, answer, bind, tool_params
from ._errors import APIConnectionError
from ._outcomes import Outcome
from ._reconcile import Due, LookupResult, Reconciled, reconcile

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger("handover_client")

AsyncExecutor = Callable[[proto.Dispatch], Awaitable[Any] | Any]
"""Like :data:`Executor`, awaited; bounded by the action's ``timeout`` (a
plain function runs in a thread of its own)."""


class AsyncClient(_Common):
    """The asyncio twin of :class:`Client` (same methods, awaited).

    The executor is bounded by the action's configured ``timeout``: when it
    runs out the outcome is recorded as unknown and ``perform`` answers.
    A coroutine function is cancelled then. A plain function runs in a
    thread of its own, which cannot be stopped: its answer, when it comes,
    is reported late — as the sync client reports an executor that outran
    its lease — and kept in the operation's attempt log for review; it
    does not reopen an operation the ledger has closed.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        task: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._s = _Settings(base_url, token, task)
        self._own = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._timeout = timeout
        self._late: set[asyncio.Task[None]] = set()

    async def approve(self, action: str, key: str, params: Any, *, task: str | None = None) -> proto.Approval:
        """See :meth:`Client.approve`."""
        return await self._run(proto.approve(action, key, params, self._s._headers(task)))

    async def perform(
        self, action: str, key: str, params: Any, fn: AsyncExecutor, *, task: str | None = None
    ) -> Outcome:
        """See :meth:`Client.perform`; ``fn`` may be async."""
        proto.check_callable(fn, "fn", awaitable_ok=True)
        return await self._run(proto.perform(action, key, params, self._s._headers(task)), fn)

    def tool(
        self, action: str
    ) -> Callable[
        [Callable[Concatenate[proto.Dispatch, P], Any]], Callable[Concatenate[str, P], Awaitable[Outcome]]
    ]:
        """See :meth:`Client.tool`; the decorated tool is a coroutine function."""

        def wrap(
            fn: Callable[Concatenate[proto.Dispatch, P], Any],
        ) -> Callable[Concatenate[str, P], Awaitable[Outcome]]:
            sig, public = tool_params(fn)
            call: Callable[..., Any] = fn  # called with the approved params by name

            async def run_async(ctx: proto.Dispatch) -> Any:
                return await call(ctx, **ctx.params)

            def run(ctx: proto.Dispatch) -> Any:
                return call(ctx, **ctx.params)

            executor = run_async if _is_async(fn) else run

            @functools.wraps(fn)
            async def tool(key: str, /, *args: P.args, **kwargs: P.kwargs) -> Outcome:
                params = bind(sig, args, kwargs)
                return await self.perform(action, key, params, executor)

            tool.__signature__ = public  # type: ignore[attr-defined]
            return tool

        return wrap

    async def reconcile(
        self, lookup: Callable[[Due], Any], *, limit: int = 10, lease_s: int = 60
    ) -> list[Reconciled]:
        """See :meth:`Client.reconcile`; ``lookup`` may be async (a plain one
        runs in a thread of its own); either is bounded by ``lease_s``."""
        proto.check_callable(lookup, "lookup", awaitable_ok=True)
        return await self._run(reconcile(limit, lease_s, self._s._headers(None)), lookup)

    async def get(self, key: str, *, task: str | None = None) -> proto.Operation:
        """See :meth:`Client.get`."""
        return await self._run(proto.get(key, self._s._headers(task)))

    async def list(
        self, state: str = "unknown", *, limit: int = 100, after: str | None = None
    ) -> list[proto.Operation]:
        """See :meth:`Client.list`."""
        flow = proto.list_operations(state, limit, after, self._s._headers(None))
        return await self._run(flow)

    async def aclose(self) -> None:
        """Waits for late executor answers still to be reported (at most
        ``timeout`` seconds; what is left then is not reported: the ledger
        keeps those operations unknown), then closes the connections (not a
        caller-supplied ``http_client``)."""
        if self._late:
            _, left = await asyncio.wait(set(self._late), timeout=self._timeout)
            for task in left:
                task.cancel()
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, flow: proto.Flow[T], fn: Callable[[Any], Any] | None = None) -> T:
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
                    resp = await self._http.request(
                        step.method, self._s._url(step.path), **self._s._request_args(step, self._http.timeout)
                    )
                    reply = answer(resp)
                except httpx.HTTPError as e:
                    error = APIConnectionError(f"{step.method} {step.path}: {type(e).__name__}: {e}")
            elif isinstance(step, proto.Wait):
                await asyncio.sleep(step.seconds)
                reply = None
            else:
                assert fn is not None
                reply = await self._call(fn, step)

    async def _call(self, fn: Callable[[Any], Any], step: proto.Call) -> proto.Got:
        """``fn(step.arg)`` within ``step.timeout``: a coroutine function on
        the loop (cancelled when the time is up), anything else in a thread
        of its own (which cannot be stopped: its answer goes to
        ``step.late`` when it comes)."""
        loop = asyncio.get_running_loop()
        deadline = None if step.timeout is None else loop.time() + step.timeout
        try:
            value = fn(step.arg) if _is_async(fn) else await self._in_thread(fn, step, deadline)
            if inspect.isawaitable(value):
                value = await _within(value, step, deadline)
            return proto.Returned(value)
        except BaseException as e:  # noqa: BLE001 - every failure after dispatch is unknown
            return proto.Raised(e)

    async def _in_thread(self, fn: Callable[[Any], Any], step: proto.Call, deadline: float | None) -> Any:
        running = _thread(fn, step.arg)
        left = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            done, _ = await asyncio.wait({running}, timeout=left)
        except BaseException:
            self._answer_late(running, step)  # the caller was cancelled; the thread runs on
            raise
        if not done:
            self._answer_late(running, step)
            raise _timed_out(step)
        return running.result()

    def _answer_late(self, running: asyncio.Future[Any], step: proto.Call) -> None:
        """Reports the answer of a thread this call stopped waiting for."""
        if step.late is None:
            running.add_done_callback(_consume)  # dropped (a lookup: its lease just passes)
            return
        task = asyncio.get_running_loop().create_task(self._report_late(running, step.late))
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    async def _report_late(
        self, running: asyncio.Future[Any], late: Callable[[proto.Got], proto.Flow[Any]]
    ) -> None:
        await asyncio.wait({running})
        error = running.exception()
        got: proto.Got = proto.Raised(error) if error is not None else proto.Returned(running.result())
        if isinstance(got, proto.Returned) and inspect.iscoroutine(got.value):
            got.value.close()  # its time is up: never run (reported as not JSON)
        try:
            await self._run(late(got))
        except Exception as e:  # noqa: BLE001 - nobody is waiting; the ledger keeps it unknown
            log.warning("a late executor answer could not be reported to Handover: %s", e)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))


def _thread(fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
    """``fn(arg)`` in a thread of its own, with the caller's context
    variables. Not asyncio's default executor: a stuck executor must not
    hold a worker that others (host name lookups) need. A daemon: a stuck
    executor does not keep the process alive (its operation is unknown)."""
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            done.set_result(context.run(fn, arg))
        except BaseException as e:  # noqa: BLE001 - handed to the loop
            done.set_exception(e)

    threading.Thread(target=run, name="handover-executor", daemon=True).start()
    return asyncio.wrap_future(done)


async def _within(value: Awaitable[Any], step: proto.Call, deadline: float | None) -> Any:
    if deadline is None:
        return await value
    try:
        return await asyncio.wait_for(value, max(0.0, deadline - asyncio.get_running_loop().time()))
    except asyncio.TimeoutError as e:
        raise _timed_out(step) from e


def _timed_out(step: proto.Call) -> TimeoutError:
    return TimeoutError(f"{step.what} did not finish within {step.timeout:g}s")


def _consume(running: asyncio.Future[Any]) -> None:
    if not running.cancelled():
        running.exception()  # retrieved: no "never retrieved" warning
