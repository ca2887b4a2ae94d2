//! The OpenAI-compatible surface: `POST /v1/chat/completions` (plain and
//! streamed), `POST /v1/responses` (translated to the one chat request) and
//! `GET /v1/models`. Client JSON becomes the one request schema of
//! `handover-providers`; the router never sees wire JSON.

pub(crate) mod chat;
pub(crate) mod models;
mod request;
mod response;
pub(crate) mod responses;
mod sse_body;
mod stream;
