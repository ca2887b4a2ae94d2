"""Misuse is impossible or loud: typed errors carrying the server's code and
param, nothing recorded, the destination never called."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import handover_client as hc
from conftest import MAX_BODY, OPERATOR_TOKEN, OTHER_TOKEN, Destination, Gateway, shipper

PARAMS = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}


def never(ctx: hc.Dispatch) -> Any:
    raise AssertionError("the executor must not be called")


def _nothing_recorded(gateway: Gateway, key: str) -> None:
    with gateway.client() as c, pytest.raises(hc.NotFoundError) as e:
        c.get(key)
    assert e.value.code == "operation_not_found"


def test_a_bad_token_is_an_authentication_error(gateway: Gateway, key: str) -> None:
    with gateway.client("not-a-token") as c, pytest.raises(hc.AuthenticationError) as e:
        c.perform("create_shipment", key, PARAMS, never)
    assert (e.value.status_code, e.value.code) == (401, "invalid_api_key")
    _nothing_recorded(gateway, key)


def test_an_operator_token_cannot_perform(gateway: Gateway, key: str) -> None:
    with gateway.client(OPERATOR_TOKEN) as c, pytest.raises(hc.PermissionDeniedError) as e:
        c.perform("create_shipment", key, PARAMS, never)
    assert e.value.status_code == 403
    _nothing_recorded(gateway, key)


@pytest.mark.parametrize("bad", ["", "K 701", "K-701\u00e9", "K" * 256])
def test_an_invalid_key_names_the_idempotency_key(gateway: Gateway, bad: str) -> None:
    with gateway.client() as c, pytest.raises(hc.BadRequestError) as e:
        c.perform("create_shipment", bad, PARAMS, never)
    assert e.value.param == "Idempotency-Key", e.value


def test_a_number_that_cannot_be_recorded_exactly_names_its_path(gateway: Gateway, key: str) -> None:
    with gateway.client() as c, pytest.raises(hc.BadRequestError) as e:
        c.perform("create_shipment", key, {"items": [{"batch": 2**53 + 1}]}, never)
    assert (e.value.code, e.value.param) == ("invalid_field", "params.items[0].batch")
    _nothing_recorded(gateway, key)


def test_parameters_that_are_not_json_fail_before_anything_is_sent(gateway: Gateway, key: str) -> None:
    with gateway.client() as c:
        with pytest.raises(TypeError, match="params"):
            c.perform("create_shipment", key, {"skus": {"A", "B"}}, never)
        with pytest.raises(TypeError, match="params"):
            c.perform("create_shipment", key, {"qty": float("nan")}, never)
    _nothing_recorded(gateway, key)


def test_a_wrong_executor_fails_before_anything_is_recorded(gateway: Gateway, key: str) -> None:
    async def coroutine(ctx: hc.Dispatch) -> Any: ...

    with gateway.client() as c:
        with pytest.raises(TypeError, match="callable"):
            c.perform("create_shipment", key, PARAMS, None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="AsyncClient"):
            c.perform("create_shipment", key, PARAMS, coroutine)
    _nothing_recorded(gateway, key)


def test_a_body_over_the_limit_is_payload_too_large(gateway: Gateway, key: str) -> None:
    with gateway.client() as c, pytest.raises(hc.PayloadTooLargeError) as e:
        c.perform("create_shipment", key, {"note": "x" * MAX_BODY}, never)
    assert (e.value.status_code, e.value.code) == (413, "body_too_large")
    _nothing_recorded(gateway, key)


def test_the_scope_comes_from_the_token(gateway: Gateway, destination: Destination, key: str) -> None:
    with gateway.client() as c, gateway.client(OTHER_TOKEN) as other:
        assert isinstance(c.perform("create_shipment", key, PARAMS, shipper(destination)), hc.Confirmed)
        with pytest.raises(hc.NotFoundError):
            other.get(key)
        assert c.get(key).scope == gateway.scope


def test_a_result_that_cannot_be_recorded_exactly_is_unknown_not_lost(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, lambda ctx: {"tracking": 2**60})
        assert isinstance(out, hc.Unresolved), out
        assert isinstance(out.cause, hc.BadRequestError)
        assert c.get(key).state == "unknown"


def test_an_unreachable_gateway_is_a_connection_error_and_nothing_runs(key: str) -> None:
    with hc.Client("http://127.0.0.1:9", "token", timeout=5) as c, pytest.raises(hc.APIConnectionError):
        c.perform("create_shipment", key, PARAMS, never)


@pytest.mark.parametrize("base_url", ["127.0.0.1:8787", "ftp://gw", "", None])
def test_a_base_url_that_is_no_http_address_is_refused_at_once(base_url: object) -> None:
    for cls in (hc.Client, hc.AsyncClient):
        with pytest.raises(ValueError, match="base_url"):
            cls(base_url, "token")  # type: ignore[arg-type]


def test_the_task_header_goes_with_every_request(gateway: Gateway, destination: Destination, key: str) -> None:
    seen: list[str | None] = []
    http = httpx.Client(event_hooks={"request": [lambda r: seen.append(r.headers.get(hc.TASK_HEADER))]})
    with gateway.client(http_client=http, task="task-1") as c:
        c.perform("create_shipment", key, PARAMS, shipper(destination))
        c.with_task("task-2").get(key)
        c.get(key, task="task-3")
    http.close()
    assert seen == ["task-1", "task-1", "task-1", "task-2", "task-3"]


def test_the_token_is_not_in_repr(gateway: Gateway) -> None:
    with gateway.client() as c:
        assert "token" not in repr(c).lower()


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, hc.BadRequestError),
        (401, hc.AuthenticationError),
        (403, hc.PermissionDeniedError),
        (404, hc.NotFoundError),
        (409, hc.ConflictError),
        (410, hc.OperationCancelled),
        (413, hc.PayloadTooLargeError),
        (422, hc.UnprocessableEntityError),
        (423, hc.LockedError),
        (500, hc.InternalServerError),
        (503, hc.ServiceUnavailableError),
    ],
)
def test_every_error_status_has_its_type(status: int, cls: type[hc.APIStatusError]) -> None:
    # Statuses a live gateway cannot be made to answer on demand (410, 423
    # outside begin, 503) are checked on the mapping itself.
    body = {"error": {"message": "m", "type": "t", "param": "p", "code": "c"}}
    from handover_client._errors import error_for

    err = error_for(status, body)
    assert type(err) is cls and (err.code, err.param, err.status_code) == ("c", "p", status)


def test_a_token_that_cannot_travel_in_a_header_is_refused_at_once_without_itself() -> None:
    # What `open("token").read()` gives: the trailing newline.
    for token in ["secret-client-token-123\n", "two words", "t\u00f6ken"]:
        for cls in (hc.Client, hc.AsyncClient):
            with pytest.raises(ValueError, match="token") as e:
                cls("http://127.0.0.1:9", token)
            assert token.strip() not in str(e.value), "the token is a secret"


def test_keys_that_are_dot_segments_are_their_own_operations(
    gateway: Gateway, destination: Destination
) -> None:
    # As path segments `.` and `..` would be resolved away by the HTTP client.
    with gateway.client() as c:
        for key in [".", ".."]:
            out = c.perform("create_shipment", key, {**PARAMS, "order_id": key}, shipper(destination))
            assert isinstance(out, hc.Confirmed), out
            assert (c.get(key).key, c.get(key).state) == (key, "confirmed")
    assert len(destination.effects) == 2


def test_a_key_or_task_with_control_characters_is_refused_before_anything_is_claimed(
    gateway: Gateway, key: str
) -> None:
    with gateway.client() as c:
        with pytest.raises(ValueError, match="key"):
            c.perform("create_shipment", key + "\n", PARAMS, never)
        with pytest.raises(ValueError, match="task"):
            c.perform("create_shipment", key, PARAMS, never, task="t\r\n1")
    _nothing_recorded(gateway, key)


@pytest.mark.parametrize("bad", [" K-1", "K-1 ", " "])
def test_a_key_or_task_with_surrounding_spaces_is_refused_naming_it(gateway: Gateway, key: str, bad: str) -> None:
    # The HTTP client refuses such a header value (it looked like "Handover
    # not reachable"), and the server would trim it: " K-1" would be "K-1".
    with gateway.client() as c:
        for call in (
            lambda: c.perform("create_shipment", bad, PARAMS, never),
            lambda: c.approve("create_shipment", bad, PARAMS),
            lambda: c.get(bad),
        ):
            with pytest.raises(ValueError, match="^key: leading or trailing spaces") as e:
                call()
            assert repr(bad) in str(e.value)
        with pytest.raises(ValueError, match="^task: leading or trailing spaces"):
            c.perform("create_shipment", key, PARAMS, never, task=bad)
    for cls in (hc.Client, hc.AsyncClient):
        with pytest.raises(ValueError, match="^task: "):
            cls(gateway.url, "token", task=bad)
    _nothing_recorded(gateway, key)
