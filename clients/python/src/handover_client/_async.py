"""The asyncio client: the same surface as :class:`Client`, awaited."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from . import _protocol as proto
from ._base import DEFAULT_TIMEOUT, _Common, _Settings, answer, bind, tool_params
from ._errors import APIConnectionError
from ._outcomes import Outcome

P = ParamSpec("P")
T = TypeVar("T")

AsyncExecutor = Callable[[proto.Dispatch], Awaitable[Any] | Any]
"""Like :data:`Executor`, awaited; bounded by the action's ``timeout``."""


class AsyncClient(_Common):
    """The asyncio twin of :class:`Client` (same methods, awaited).

    The executor is bounded by the action's configured ``timeout``: when it
    runs out the executor is cancelled and the outcome is recorded as
    unknown.
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

    async def approve(self, action: str, key: str, params: Any, *, task: str | None = None) -> proto.Approval:
        """See :meth:`Client.approve`."""
        return await self._run(proto.approve(action, key, params, self._s._headers(task)))

    async def perform(
        self, action: str, key: str, params: Any, fn: AsyncExecutor, *, task: str | None = None
    ) -> Outcome:
        """See :meth:`Client.perform`; ``fn`` may be async."""
        proto.check_executor(fn, awaitable_ok=True)
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

            @functools.wraps(fn)
            async def tool(key: str, /, *args: P.args, **kwargs: P.kwargs) -> Outcome:
                params = bind(sig, args, kwargs)
                return await self.perform(action, key, params, lambda ctx: call(ctx, **ctx.params))

            tool.__signature__ = public  # type: ignore[attr-defined]
            return tool

        return wrap

    async def get(self, key: str, *, task: str | None = None) -> proto.Operation:
        """See :meth:`Client.get`."""
        return await self._run(proto.get(key, self._s._headers(task)))

    async def list(self, state: str = "unknown", *, limit: int = 100) -> list[proto.Operation]:
        """See :meth:`Client.list`."""
        return await self._run(proto.list_operations(state, limit, self._s._headers(None)))

    async def aclose(self) -> None:
        """Closes the connections (not a caller-supplied ``http_client``)."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, flow: proto.Flow[T], fn: AsyncExecutor | None = None) -> T:
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
                        step.method, self._s._url(step.path), **self._s._request_args(step)
                    )
                    reply = answer(resp)
                except httpx.HTTPError as e:
                    error = APIConnectionError(f"{step.method} {step.path}: {type(e).__name__}: {e}")
            else:
                assert fn is not None
                try:
                    reply = proto.Returned(await _bounded(fn, step.ctx))
                except BaseException as e:  # noqa: BLE001 - every failure after dispatch is unknown
                    reply = proto.Raised(e)


async def _bounded(fn: AsyncExecutor, ctx: proto.Dispatch) -> Any:
    value = fn(ctx)
    if not inspect.isawaitable(value):
        return value
    if ctx.timeout is None:
        return await value
    try:
        return await asyncio.wait_for(value, ctx.timeout)
    except asyncio.TimeoutError as e:
        raise TimeoutError(f"the executor did not finish within the action's timeout of {ctx.timeout:g}s") from e
