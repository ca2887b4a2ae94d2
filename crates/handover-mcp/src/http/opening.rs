//! A session is established when the upstream answers its `initialize`
//! with a result. Until then it holds a slot under `[mcp] max_sessions`
//! and `max_sessions_per_client`; one whose `initialize` the upstream
//! refused is ended as soon as the client has that answer, instead of
//! when it goes idle. So is one whose POST is dropped before the answer
//! — but the server drops it only once it notices the client left, which
//! while the answer is pending it may not: such a session still waits for
//! `[mcp] session_idle` (see `docs/mcp.md`, Limits).

use std::sync::Arc;

use serde_json::value::RawValue;

use super::sessions::{Registry, Session};
use crate::wire::Peek;

/// Ends the session on drop unless [`Opening::sees`] saw it established.
pub(super) struct Opening {
    registry: Arc<Registry>,
    session: Option<Arc<Session>>,
}

impl Opening {
    pub(super) fn new(registry: Arc<Registry>, session: Arc<Session>) -> Self {
        Self {
            registry,
            session: Some(session),
        }
    }

    /// Looks at one message on its way to the client: a successful answer
    /// to the `initialize` establishes the session.
    pub(super) fn sees(&mut self, line: &str) {
        if successful_answer(line) {
            self.session = None;
        }
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            tracing::warn!(
                "an initialize was refused, or its client went away, before its session was established: the session is ended"
            );
            self.registry.abandon(&session);
        }
    }
}

/// An answer (no method, an id) with a `result`.
fn successful_answer(line: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    Peek::of(line).is_some_and(|p| p.method.is_none() && p.id.is_some())
        && serde_json::from_str::<Answer<'_>>(line).is_ok_and(|a| a.result.is_some())
}
