"""What the sync and async clients share: settings, headers, the decorator's
signature handling and the answer parsing."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from . import _protocol as proto

DEFAULT_TIMEOUT = 30.0
"""Seconds for each request to Handover (every wait has a deadline)."""


class _Settings:
    """Base URL, token and default task; the token never appears in repr."""

    def __init__(self, base_url: str, token: str, task: str | None) -> None:
        if not isinstance(token, str) or not token:
            raise ValueError("token: a client token is required (the scope comes from it)")
        if any(not 0x21 <= ord(c) <= 0x7E for c in token):
            # The token itself is never in the message: it is a secret.
            raise ValueError(
                "token: must be printable ASCII without spaces or line breaks"
                " (read from a file? strip its trailing newline)"
            )
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url: expected the gateway's http:// or https:// address, got {base_url!r}"
            )
        proto.task_headers(task)  # a task no header can carry fails here, not at the first call
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._task = task

    def describe(self) -> str:
        task = f", task={self._task!r}" if self._task is not None else ""
        return f"{self._base_url!r}{task}"

    def with_task(self, task: str) -> _Settings:
        return _Settings(self._base_url, self._token, task)

    def _headers(self, task: str | None) -> dict[str, str]:
        return proto.task_headers(task if task is not None else self._task)

    def _url(self, path: str) -> str:
        return self._base_url + path

    def _request_args(self, req: proto.Request, timeout: httpx.Timeout) -> dict[str, Any]:
        """httpx's arguments for ``req``; ``timeout``: the HTTP client's own,
        which ``req.timeout`` may only shorten."""
        headers = {**req.headers, "Authorization": f"Bearer {self._token}"}
        args: dict[str, Any] = {"headers": headers}
        if req.body is not None:
            args["json"] = req.body
        if req.query is not None:
            args["params"] = dict(req.query)
        if req.timeout is not None:
            args["timeout"] = _shortened(timeout, req.timeout)
        return args


def _shortened(timeout: httpx.Timeout, limit: float) -> httpx.Timeout:
    def lower(t: float | None) -> float:
        return limit if t is None else min(t, limit)

    return httpx.Timeout(
        connect=lower(timeout.connect), read=lower(timeout.read),
        write=lower(timeout.write), pool=lower(timeout.pool),
    )


C = TypeVar("C", bound="_Common")


class _Common:
    """What both clients are apart from how they wait."""

    _s: _Settings
    _own: bool

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._s.describe()})"

    def with_task(self: C, task: str) -> C:
        """This client, its calls charged to ``task``; shares the connections
        (closing the copy leaves them open)."""
        other = copy.copy(self)
        other._s, other._own = self._s.with_task(task), False
        return other


def answer(resp: httpx.Response) -> proto.Answer:
    """Handover's answer as the protocol reads it."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    return proto.Answer(resp.status_code, body)


def tool_params(fn: Callable[..., Any]) -> tuple[inspect.Signature, inspect.Signature]:
    """The executor's signature and the decorated tool's (``key`` replaces
    the ``ctx`` parameter). Parameters must be nameable: no ``*args``."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if not params:
        raise TypeError(f"{fn.__qualname__}: the first parameter receives the Dispatch context")
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(
                f"{fn.__qualname__}: parameter {p.name!r} must be a named parameter: "
                "every parameter is part of the approved operation"
            )
    key = inspect.Parameter("key", inspect.Parameter.POSITIONAL_ONLY, annotation=str)
    return sig, sig.replace(parameters=[key, *params[1:]])


def bind(sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The tool call's parameters by name, defaults included: defaults are
    part of what was approved."""
    bound = sig.bind(None, *args, **kwargs)
    bound.apply_defaults()
    return dict(list(bound.arguments.items())[1:])
