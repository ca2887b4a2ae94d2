//! Errors as HTTP answers: every 4xx/5xx the gateway produces is JSON in the
//! OpenAI error shape `{"error": {"message", "type", "param", "code"}}`, so
//! OpenAI SDKs raise their typed exceptions and other clients can branch on
//! `code`.

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use handover_ledger::LedgerError;

/// Where a 503 `ledger_unavailable` is explained: per call, what may have
/// been recorded and what to do.
const UNAVAILABLE_MEANS: &str =
    "what may have been recorded is listed in docs/gateway.md, \"When the ledger does not answer\"";

/// The most of a message an answer carries. Messages quote what the
/// client sent (a model name, a field name, a value); a client that sent
/// 100 KB there gets the start of it back, not all of it again, and
/// neither does the log line.
const MESSAGE_BYTES: usize = 1024;

/// The most of a `param` an answer carries: a field name or a path.
const PARAM_BYTES: usize = 256;

/// `s` cut to at most `max` bytes (at a character boundary), saying so.
fn bounded(mut s: String, max: usize) -> String {
    if s.len() > max {
        const MARK: &str = "… (cut)";
        let mut end = max - MARK.len();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(MARK);
    }
    s
}

/// A JSON error answer.
///
/// `code` is the stable machine-readable part; `message` is for humans.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// OpenAI-style error type (`invalid_request_error`, `authentication_error`, ...).
    pub kind: &'static str,
    /// Stable code (`invalid_json`, `model_not_found`, `stale_claim`, ...).
    pub code: &'static str,
    /// What a provider's error gave of its own (see [`ApiError::relaying`]):
    /// its `code`, shown in the body in place of `code` (which stays the
    /// gateway's account), and whether `param` is the provider's.
    /// Boxed: every handler's `Result` carries this type, and it is rare.
    relayed: Option<Box<Relayed>>,
    /// The offending parameter or field, if one.
    pub param: Option<String>,
    /// Human-readable explanation.
    pub message: String,
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// See [`ApiError::relaying`].
#[derive(Debug, Clone)]
struct Relayed {
    /// The provider's code, shown in place of the gateway's.
    code: Option<String>,
    /// Whether `param` is the provider's (named in the chat request the
    /// gateway sent, which a Responses client never saw).
    param: bool,
}

impl ApiError {
    /// An error with no parameter.
    pub(crate) fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            kind,
            code,
            relayed: None,
            param: None,
            message: bounded(message.into(), MESSAGE_BYTES),
            headers: Vec::new(),
        }
    }

    /// 400 `invalid_request_error` naming `param`.
    pub(crate) fn invalid(
        code: &'static str,
        param: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
        .with_param(param)
    }

    /// Names the offending parameter.
    pub(crate) fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(bounded(param.into(), PARAM_BYTES));
        self
    }

    /// Carries a provider's definitive client error as the provider
    /// described it: its `code` in place of the gateway's and its `param`,
    /// each only where it gave one. OpenAI clients and agent frameworks
    /// branch on `code` (`context_length_exceeded`: trim the history).
    /// What is relayable (an identifier code, a short param) is decided
    /// where the provider's body is read (`handover_providers::ApiFailure`):
    /// both arrive here bounded and redacted.
    pub(crate) fn relaying(mut self, code: Option<&str>, param: Option<&str>) -> Self {
        if code.is_some() || param.is_some() {
            self.relayed = Some(Box::new(Relayed {
                code: code.map(str::to_owned),
                param: param.is_some(),
            }));
        }
        if let Some(param) = param {
            self.param = Some(param.to_owned());
        }
        self
    }

    /// Renames a relayed provider `param` with `rename` (the request the
    /// provider saw is not the one the client sent), dropping it where
    /// `rename` knows no name. The gateway's own params are left alone.
    pub(crate) fn renaming_relayed_param(
        mut self,
        rename: impl FnOnce(&str) -> Option<&'static str>,
    ) -> Self {
        if self.relayed.as_ref().is_some_and(|r| r.param) {
            self.param = self.param.as_deref().and_then(rename).map(str::to_owned);
        }
        self
    }

    /// The code the body carries: the provider's where relayed, else ours.
    pub(crate) fn wire_code(&self) -> &str {
        self.relayed
            .as_ref()
            .and_then(|r| r.code.as_deref())
            .unwrap_or(self.code)
    }

    /// Adds a response header.
    pub(crate) fn with_header(mut self, name: &'static str, value: HeaderValue) -> Self {
        self.headers.push((HeaderName::from_static(name), value));
        self
    }

    pub(crate) fn unauthorized(message: &str) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            message,
        )
    }

    pub(crate) fn forbidden(message: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "forbidden",
            message,
        )
    }

    /// Maps a ledger error to its HTTP meaning (see `docs/gateway.md`).
    /// A store failure is described without the driver's own text (logged
    /// here instead): clients get what happened, not SQLite or PostgreSQL
    /// codes.
    pub(crate) fn ledger(e: &LedgerError) -> Self {
        let msg = e.to_string();
        match e {
            LedgerError::Validation(v) => Self::invalid("invalid_field", v.field(), msg),
            LedgerError::NotFound { .. } => Self::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "operation_not_found",
                msg,
            ),
            LedgerError::ParamsMismatch { .. } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request_error",
                "params_mismatch",
                msg,
            ),
            LedgerError::StaleEpoch { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict_error", "stale_claim", msg)
                    .with_param("epoch")
            }
            LedgerError::NotHolder { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict_error", "not_holder", msg)
                    .with_param("epoch")
            }
            LedgerError::LeaseExpired { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict_error", "lease_expired", msg)
                    .with_param("epoch")
            }
            LedgerError::IllegalTransition { .. } => Self::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "illegal_transition",
                msg,
            ),
            LedgerError::Unavailable { context, .. } => {
                tracing::warn!(error = %e, "ledger unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "ledger_unavailable",
                    format!("the ledger could not be used while {context} (it did not answer, or could not write); {UNAVAILABLE_MEANS}"),
                )
                .with_header("retry-after", HeaderValue::from_static("1"))
            }
            _ => {
                tracing::error!(error = %e, "ledger error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "ledger_error",
                    "the ledger returned data this gateway cannot interpret; see the gateway's log",
                )
            }
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            message,
        )
    }

    /// The JSON body; also a chat stream's error event, so a failure
    /// reads the same before and after the SSE head went out.
    pub(crate) fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.wire_code(),
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        for (name, value) in self.headers {
            resp.headers_mut().insert(name, value);
        }
        resp
    }
}

/// An unknown route. Under `/v1/` the message lists the OpenAI routes the
/// gateway serves, so a framework that calls one it does not (embeddings,
/// legacy completions) tells its user what is there instead.
pub(crate) async fn not_found(uri: axum::http::Uri) -> ApiError {
    let path = uri.path();
    let served = if path.starts_with("/v1/") {
        " (the OpenAI routes served here are POST /v1/chat/completions, POST /v1/responses and GET /v1/models)"
    } else {
        ""
    };
    ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "unknown_route",
        format!("no route {path}{served}"),
    )
}

pub(crate) async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        format!("method {method} is not allowed here"),
    )
}
