"""Typed client for Handover's operations API.

A tool call with a real effect (a shipment, a payment) goes through
:meth:`Client.perform`: Handover records the dispatch before your function
calls the destination, a lost answer becomes *unknown* (never "failed"),
and a retry under the same key — from any model, process or replica —
replays the recorded outcome instead of acting twice. Every outcome carries
the text an agent should tell the model.
"""

from ._async import AsyncClient, AsyncExecutor
from ._errors import (
    APIConnectionError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    HandoverError,
    InternalServerError,
    LockedError,
    NotFoundError,
    OperationCancelled,
    PayloadTooLargeError,
    PermissionDeniedError,
    ServiceUnavailableError,
    UnprocessableEntityError,
)
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
from ._protocol import TASK_HEADER, Approval, Dispatch, Operation, Rejection
from ._sync import Client, Executor

__all__ = [
    "TASK_HEADER",
    "APIConnectionError",
    "APIStatusError",
    "Approval",
    "AsyncClient",
    "AsyncExecutor",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "Confirmed",
    "Conflict",
    "ConflictError",
    "Dispatch",
    "Executor",
    "HandoverError",
    "InProgress",
    "InternalServerError",
    "LockedError",
    "NotFoundError",
    "Operation",
    "OperationCancelled",
    "Outcome",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Rejected",
    "Rejection",
    "Replayed",
    "ServiceUnavailableError",
    "Suspended",
    "UnprocessableEntityError",
    "Unresolved",
]
