"""A rejection's reason and evidence as the ledger can record them.

A definitive refusal must be recorded ``rejected`` whatever the executor
passed to ``ctx.reject``: a destination's whole 5 MB error page, its JSON
body as a dict, its status code, its raw bytes, nothing at all. So the
text is made recordable here instead of being refused by the server
(which would leave the operation for review): anything that is not a
``str`` becomes its text, a lone surrogate (an escaped ``\\ud800`` in a
destination's JSON) becomes U+FFFD, a blank reason gets a default that
says so, and a text past 64 KiB is cut there as the server cuts a
destination's text (at a character boundary, with a note).
"""

from __future__ import annotations

import json
from typing import Any

TEXT_BYTES = 64 * 1024
"""What the ledger keeps of a reason or evidence (UTF-8 bytes)."""

SMALL_TEXT_BYTES = 4 * 1024
"""What is kept when the gateway refused the report as too large (its
``max_body_bytes`` is below what 64 KiB texts need)."""

CUT = " … [cut: longer than 64 KiB]"
"""The server's own note (crates/handover-ledger, ``answer_text``)."""

SMALL_CUT = " … [cut: longer than the gateway accepts]"

NO_REASON = "rejected by the destination (no reason given)"


def reason_text(reason: Any) -> str:
    """A rejection's reason as recorded: never blank, at most 64 KiB."""
    text = _as_text(reason)
    return cut(text, TEXT_BYTES, CUT) if text.strip() else NO_REASON


def evidence_text(evidence: Any) -> str | None:
    """A rejection's evidence as recorded: None when there is none."""
    text = "" if evidence is None else _as_text(evidence)
    return cut(text, TEXT_BYTES, CUT) if text.strip() else None


def cut(text: str, limit: int, note: str) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, cut at a character
    boundary with ``note`` at the end when it is longer."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    # "ignore" drops a character the cut split in two.
    return data[: limit - len(note.encode("utf-8"))].decode("utf-8", "ignore") + note


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        text = bytes(value).decode("utf-8", "replace")
    else:
        text = _shown(value)
    # A lone surrogate cannot travel in UTF-8; a pair split in two code
    # points is joined back into its character.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _shown(value: Any) -> str:
    """A non-text reason (``r.json()``, a status code) as text: JSON where
    it is JSON, else ``str()``."""
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a definitive answer stays recordable
        return f"a {type(value).__name__} the client could not turn into text"
