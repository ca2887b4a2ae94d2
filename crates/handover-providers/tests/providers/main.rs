//! The integration tests of `handover-providers`: one binary, each file a module, so the workspace links a handful of test binaries instead of about ninety (linking was most of CI's time on two cores).

mod anthropic;
mod conformance;
mod deepseek;
mod error_bodies;
mod gemini;
mod redirects;
mod responses;
mod responses_answers;
mod secrets;
mod settings;
mod stream_tcp;
mod support;
mod telemetry;
