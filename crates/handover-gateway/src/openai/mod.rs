//! The OpenAI-compatible surface: `POST /v1/chat/completions` (plain and
//! streamed) and `GET /v1/models`. Wire JSON is mapped to and from the
//! provider-neutral types of `handover-providers` here; the router never
//! sees OpenAI JSON.

pub(crate) mod chat;
pub(crate) mod models;
mod request;
mod response;
mod stream;
