"""Typed exceptions: one class per HTTP status the operations API uses.

Each carries the server's stable ``code`` (``stale_claim``,
``invalid_field``, ...) and ``param`` (the field at fault, e.g.
``params.items[2].batch`` or ``Idempotency-Key``), so callers branch on
types and codes, never on message text.
"""

from __future__ import annotations

from typing import Any


class HandoverError(Exception):
    """Base of every error this client raises."""


class APIConnectionError(HandoverError):
    """Handover could not be reached, or its answer was lost.

    Raised only where nothing was sent to the destination; after dispatch a
    lost answer becomes an :class:`~handover_client.Unresolved` outcome.
    """


class APIStatusError(HandoverError):
    """Handover answered with an error status.

    ``code`` and ``param`` are the server's; ``body`` is the whole answer.
    """

    status_code: int
    code: str | None
    param: str | None
    type: str | None
    body: Any

    def __init__(self, status_code: int, body: Any) -> None:
        err = body.get("error") if isinstance(body, dict) else None
        err = err if isinstance(err, dict) else {}
        self.status_code = status_code
        self.code = _str_or_none(err.get("code"))
        self.param = _str_or_none(err.get("param"))
        self.type = _str_or_none(err.get("type"))
        self.body = body
        message = _str_or_none(err.get("message")) or f"HTTP {status_code}"
        self.message = message
        where = f" [{self.param}]" if self.param else ""
        super().__init__(f"{status_code} {self.code or 'error'}{where}: {message}")


class BadRequestError(APIStatusError):
    """400: invalid input; ``param`` names the field. Nothing was recorded."""


class AuthenticationError(APIStatusError):
    """401: missing or unknown token."""


class PermissionDeniedError(APIStatusError):
    """403: the token may not use this endpoint (client vs operator)."""


class NotFoundError(APIStatusError):
    """404: no such operation in this client's scope, or no such route."""


class ConflictError(APIStatusError):
    """409: a stale epoch, an expired lease or a forbidden transition."""


class OperationCancelled(APIStatusError):
    """410: the approval of this operation was withdrawn; do not perform it."""


class PayloadTooLargeError(APIStatusError):
    """413: the request body is larger than the gateway accepts."""


class UnprocessableEntityError(APIStatusError):
    """422: the key was approved with other parameters (``params_mismatch``)."""


class LockedError(APIStatusError):
    """423: writes are blocked while an outcome is unknown."""


class InternalServerError(APIStatusError):
    """5xx other than 503."""


class ServiceUnavailableError(APIStatusError):
    """503: the ledger did not answer in time; nothing was sent to the
    destination. From ``begin`` a claim may have been recorded: the same
    key answers :class:`~handover_client.InProgress` until its lease passes
    (docs/gateway.md, "When the ledger does not answer")."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: OperationCancelled,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    423: LockedError,
    503: ServiceUnavailableError,
}


def error_for(status_code: int, body: Any) -> APIStatusError:
    """The typed exception for an error answer."""
    cls = _BY_STATUS.get(status_code)
    if cls is None:
        cls = InternalServerError if status_code >= 500 else APIStatusError
    return cls(status_code, body)


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None
