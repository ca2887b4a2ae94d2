//! Default values, in one place so the example config and the docs can quote them.

use std::time::Duration;

use super::model::{ClassAction, ErrorClass};

/// Default claim lease.
pub(crate) const LEASE: Duration = Duration::from_secs(30);
/// Default replay window for terminal outcomes (72 h).
pub(crate) const REPLAY_WINDOW: Duration = Duration::from_secs(72 * 3600);
/// Default tombstone horizon (30 days).
pub(crate) const TOMBSTONE_HORIZON: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default maximum canonical parameter size (64 KiB).
pub(crate) const MAX_PARAMS_BYTES: usize = 64 * 1024;
/// Default maximum parameter nesting depth.
pub(crate) const MAX_PARAMS_DEPTH: usize = 32;
/// Default PostgreSQL pool size.
pub(crate) const PG_POOL_SIZE: u32 = 8;
/// Default PostgreSQL statement timeout.
pub(crate) const PG_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default client-side deadline of one PostgreSQL ledger call.
pub(crate) const PG_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Default connect timeout.
pub(crate) const CONNECT: Duration = Duration::from_secs(5);
/// Default time to response headers.
pub(crate) const FIRST_BYTE: Duration = Duration::from_secs(30);
/// Default time to a stream's response headers: a stream's headers come
/// before any token, so a hung provider is left long before `FIRST_BYTE`
/// (docs/decisions.md, "Commit point per request; timeouts and malformed
/// events").
pub(crate) const STREAM_FIRST_BYTE: Duration = Duration::from_secs(10);
/// Default time to the first data event of a stream.
pub(crate) const FIRST_TOKEN: Duration = Duration::from_secs(30);
/// Default time between data events of a stream.
pub(crate) const IDLE: Duration = Duration::from_secs(30);
/// Default total time of one call.
pub(crate) const TOTAL: Duration = Duration::from_secs(120);

/// Default provider concurrency cap.
pub(crate) const MAX_CONCURRENCY: usize = 64;
/// Default number of requests that may wait for a provider slot.
pub(crate) const MAX_QUEUE: usize = 256;
/// Default consecutive failures that open a breaker.
pub(crate) const BREAKER_FAILURES: u32 = 5;
/// Default open time of a breaker before a half-open probe.
pub(crate) const BREAKER_OPEN_FOR: Duration = Duration::from_secs(30);
/// Default half-open probes.
pub(crate) const BREAKER_PROBES: u32 = 1;

/// Default task deadline.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);
/// Default maximum HTTP requests per task.
pub(crate) const MAX_REQUESTS: u32 = 6;
/// Default attempts on one provider before moving on.
pub(crate) const MAX_ATTEMPTS_PER_PROVIDER: u32 = 2;
/// Default share of a fallback's capacity usable by failed-over traffic.
pub(crate) const FALLBACK_SHARE: f64 = 0.5;
/// Default first backoff delay.
pub(crate) const BACKOFF_INITIAL: Duration = Duration::from_millis(200);
/// Default largest backoff delay.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Default action timeout for one executor call.
pub(crate) const ACTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Default first reconciliation interval.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(10);
/// Default largest reconciliation interval.
pub(crate) const MAX_CHECK_EVERY: Duration = Duration::from_secs(600);

/// Default gateway listen address.
pub(crate) const GATEWAY_LISTEN: &str = "127.0.0.1:8787";
/// Default largest gateway request body (4 MiB).
pub(crate) const GATEWAY_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default SSE keep-alive interval of the gateway.
pub(crate) const GATEWAY_KEEPALIVE: Duration = Duration::from_secs(5);
/// Default time graceful shutdown waits for in-flight requests.
pub(crate) const GATEWAY_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Default time a client has, from the first byte of a request, to send
/// its whole header (slowloris defence).
pub(crate) const GATEWAY_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a client has, from the end of the header, to send its
/// whole body.
pub(crate) const GATEWAY_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a connection may sit idle between requests. Longer than
/// the common load-balancer idle timeout (60 s), so the balancer, not the
/// gateway, closes idle pooled connections.
pub(crate) const GATEWAY_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// Default cap on open client connections.
pub(crate) const GATEWAY_MAX_CONNECTIONS: u32 = 1024;
/// Default cap on requests one client token has in flight at once.
pub(crate) const GATEWAY_MAX_IN_FLIGHT_PER_CLIENT: u32 = 64;

/// The default action for each error class (every class the adapters
/// produce). `rate_limited` waits for Retry-After only when it fits the
/// budget, and otherwise moves on; `auth`, `billing` and `quota_exhausted`
/// also open the provider's breaker; `send_refused` means the budget is spent.
pub(crate) fn class_action(class: ErrorClass) -> ClassAction {
    use ClassAction::{Fail, Next, Retry};
    match class {
        ErrorClass::ConnectBeforeSend => Retry,
        ErrorClass::Timeout => Next,
        ErrorClass::ConnectionLost => Retry,
        ErrorClass::RateLimited => Retry,
        ErrorClass::QuotaExhausted => Next,
        ErrorClass::Overloaded => Next,
        ErrorClass::ServerError => Retry,
        ErrorClass::Auth => Next,
        ErrorClass::Billing => Next,
        ErrorClass::InvalidRequest => Fail,
        ErrorClass::ContextLengthExceeded => Next,
        ErrorClass::ContentFiltered => Fail,
        ErrorClass::StreamInterrupted => Next,
        ErrorClass::StreamStalled => Next,
        ErrorClass::MalformedStream => Next,
        ErrorClass::Decode => Next,
        ErrorClass::SendRefused => Fail,
        _ => Fail,
    }
}

/// How often `handover serve` runs a reconciliation pass.
pub(crate) const GATEWAY_RECONCILE_EVERY: Duration = Duration::from_secs(1);

/// `[mcp] max_sessions`.
pub(crate) const MCP_MAX_SESSIONS: u32 = 64;
/// `[mcp] session_idle`.
pub(crate) const MCP_SESSION_IDLE: Duration = Duration::from_secs(15 * 60);

/// Default `service.name` of exported spans.
pub(crate) const TELEMETRY_SERVICE_NAME: &str = "handover";
/// Default deadline of one OTLP export request.
pub(crate) const TELEMETRY_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default interval between OTLP exports.
pub(crate) const TELEMETRY_EXPORT_INTERVAL: Duration = Duration::from_secs(5);
/// Default number of finished spans waiting for export; more are dropped.
pub(crate) const TELEMETRY_MAX_QUEUED_SPANS: u32 = 4096;
