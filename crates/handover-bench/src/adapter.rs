//! The `adapter` benchmark: what the provider adapter costs on top of a
//! plain reqwest POST.
//!
//! One local mock HTTP/1.1 server ([`crate::mock_http`], a tiny keep-alive
//! server on its own thread) answers a fixed chat completion, or a fixed SSE stream when the
//! request asks for one. In the same run, interleaved call by call, we time:
//!
//! * baseline: `reqwest` POST of a prebuilt JSON body, read the body, parse
//!   it as `serde_json::Value` (streaming: read the SSE body to its end);
//! * `chat`: [`Provider::chat`] (one request through our transport, decode);
//! * `chat_stream`: [`Provider::chat_stream`] consumed to the end.
//!
//! `--kind openai|openai_responses|anthropic|gemini` picks the adapter
//! (default `openai`); the mock then answers in that vendor's shape and the
//! baseline posts the very body the adapter sends (Responses: `input` and
//! `instructions` to `/responses`, answered by a `response` object or the
//! Responses event stream; Anthropic: a Messages API body with
//! `x-api-key` and `anthropic-version`; Gemini: `contents` with
//! `x-goog-api-key`, to `:generateContent` or
//! `:streamGenerateContent?alt=sse`) to the same URL.
//!
//! Prints one JSON line per mode with p50/p99, baseline and ratios. The
//! streaming line also carries `parse_baseline_p50_us` / `_p99_us`: reqwest
//! plus eventsource-stream plus `serde_json::Value` per event, i.e. the least
//! a correct SSE client must do, so the adapter's own cost is visible apart
//! from the unavoidable parsing cost.

use std::time::Instant;

use futures::StreamExt;
use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Message, OpenAiApi, Provider, ProviderKind,
    ProviderSettings,
};
use secrecy::SecretString;

use crate::{
    BenchResult,
    args::Args,
    mock_http,
    stats::{Samples, emit, round2},
};

fn report(
    kind: &str,
    mode: &str,
    mut adapter: Samples,
    mut baseline: Samples,
    parse_baseline: Option<Samples>,
    wall_s: f64,
) {
    let n = adapter.len();
    let (p50, p99) = (adapter.quantile_us(0.50), adapter.quantile_us(0.99));
    let (b50, b99) = (baseline.quantile_us(0.50), baseline.quantile_us(0.99));
    let mut line = serde_json::json!({
        "bench": "adapter",
        "kind": kind,
        "mode": mode,
        "backend": "local-mock-http1",
        "concurrency": 1,
        "ops": n,
        // Adapter calls per second of adapter time (sequential, one at a time).
        "ops_per_s": round2(n as f64 / wall_s),
        "p50_us": round2(p50),
        "p99_us": round2(p99),
        "baseline_p50_us": round2(b50),
        "baseline_p99_us": round2(b99),
        "ratio_p50": round2(p50 / b50),
        "ratio_p99": round2(p99 / b99),
    });
    if let Some(mut pb) = parse_baseline {
        let (q50, q99) = (pb.quantile_us(0.50), pb.quantile_us(0.99));
        line["parse_baseline_p50_us"] = round2(q50).into();
        line["parse_baseline_p99_us"] = round2(q99).into();
        line["parse_ratio_p50"] = round2(p50 / q50).into();
        line["parse_ratio_p99"] = round2(p99 / q99).into();
    }
    emit(line);
}

/// Runs the `adapter` benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let ops = args.number("ops", 10_000)? as usize;
    let warmup = (ops / 10).clamp(100, 1_000);
    let name = args.string("kind", "openai");
    let (kind, api) = match name.as_str() {
        "openai" => (ProviderKind::OpenAi, OpenAiApi::ChatCompletions),
        "openai_responses" => (ProviderKind::OpenAi, OpenAiApi::Responses),
        "anthropic" => (ProviderKind::Anthropic, OpenAiApi::ChatCompletions),
        "gemini" => (ProviderKind::Gemini, OpenAiApi::ChatCompletions),
        other => {
            return Err(format!(
                "--kind: expected openai, openai_responses, anthropic or gemini, got {other:?}"
            )
            .into());
        }
    };
    let wire = Wire::of(kind, api);
    let base = format!("{}/v1", mock_http::start(wire.answers())?);
    let key = "sk-bench-not-a-real-key";
    let provider = AnyProvider::new(
        ProviderSettings::new("bench", kind, wire.model)
            .with_base_url(&base)
            .with_api_key(SecretString::from(key))
            .with_api(api),
    )?;
    let raw = reqwest::Client::new();
    let url = format!("{base}{}", wire.path);
    let stream_url = format!("{base}{}", wire.stream_path);
    let headers = wire.headers(key)?;
    let req = ChatRequest::new(vec![
        Message::system("You are a helpful assistant."),
        Message::user("Hello!"),
    ]);
    let (json_body, stream_body) = (wire.body(false), wire.body(true));
    let opts = CallOptions::default();

    let baseline_chat = || async {
        let t = Instant::now();
        let bytes = raw
            .post(&url)
            .headers(headers.clone())
            .json(&json_body)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)?;
        std::hint::black_box(v);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(t.elapsed())
    };
    let baseline_stream = || async {
        let t = Instant::now();
        let mut s = raw
            .post(&stream_url)
            .headers(headers.clone())
            .json(&stream_body)
            .send()
            .await?
            .error_for_status()?
            .bytes_stream();
        let mut n = 0usize;
        while let Some(chunk) = s.next().await {
            n += chunk?.len();
        }
        std::hint::black_box(n);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(t.elapsed())
    };
    let parse_baseline_stream = || async {
        use eventsource_stream::Eventsource;
        let t = Instant::now();
        let mut s = raw
            .post(&stream_url)
            .headers(headers.clone())
            .json(&stream_body)
            .send()
            .await?
            .error_for_status()?
            .bytes_stream()
            .eventsource();
        while let Some(ev) = s.next().await {
            let ev = ev?;
            if ev.data == "[DONE]" {
                break;
            }
            let v: serde_json::Value = serde_json::from_str(&ev.data)?;
            std::hint::black_box(v);
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(t.elapsed())
    };
    let adapter_chat = || async {
        let t = Instant::now();
        let resp = provider.chat(&req, &opts).await?;
        std::hint::black_box(resp);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(t.elapsed())
    };
    let adapter_stream = || async {
        let t = Instant::now();
        let resp = provider
            .chat_stream(&req, &opts)
            .await?
            .into_response()
            .await?;
        std::hint::black_box(resp);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(t.elapsed())
    };

    // chat: interleaved so drift hits both series equally.
    for _ in 0..warmup {
        baseline_chat().await?;
        adapter_chat().await?;
    }
    let (mut a, mut b) = (Samples::with_capacity(ops), Samples::with_capacity(ops));
    let mut adapter_wall = std::time::Duration::ZERO;
    for i in 0..ops {
        if i % 2 == 0 {
            b.push(baseline_chat().await?);
            let d = adapter_chat().await?;
            adapter_wall += d;
            a.push(d);
        } else {
            let d = adapter_chat().await?;
            adapter_wall += d;
            a.push(d);
            b.push(baseline_chat().await?);
        }
    }
    report(&name, "chat", a, b, None, adapter_wall.as_secs_f64());

    for _ in 0..warmup {
        baseline_stream().await?;
        parse_baseline_stream().await?;
        adapter_stream().await?;
    }
    let (mut a, mut b) = (Samples::with_capacity(ops), Samples::with_capacity(ops));
    let mut pb = Samples::with_capacity(ops);
    let mut adapter_wall = std::time::Duration::ZERO;
    for i in 0..ops {
        // Rotate the order so no series always runs first.
        match i % 3 {
            0 => {
                b.push(baseline_stream().await?);
                pb.push(parse_baseline_stream().await?);
                let d = adapter_stream().await?;
                adapter_wall += d;
                a.push(d);
            }
            1 => {
                let d = adapter_stream().await?;
                adapter_wall += d;
                a.push(d);
                b.push(baseline_stream().await?);
                pb.push(parse_baseline_stream().await?);
            }
            _ => {
                pb.push(parse_baseline_stream().await?);
                let d = adapter_stream().await?;
                adapter_wall += d;
                a.push(d);
                b.push(baseline_stream().await?);
            }
        }
    }
    report(
        &name,
        "chat_stream",
        a,
        b,
        Some(pb),
        adapter_wall.as_secs_f64(),
    );
    Ok(())
}

/// What the baseline sends for one adapter kind: the same URL, headers and
/// body as the adapter.
struct Wire {
    kind: ProviderKind,
    api: OpenAiApi,
    model: &'static str,
    path: &'static str,
    stream_path: &'static str,
}

impl Wire {
    fn of(kind: ProviderKind, api: OpenAiApi) -> Self {
        if api == OpenAiApi::Responses {
            return Wire {
                kind,
                api,
                model: "gpt-4o-mini",
                path: "/responses",
                stream_path: "/responses",
            };
        }
        match kind {
            ProviderKind::Anthropic => Wire {
                kind,
                api,
                model: "claude-sonnet-4-5",
                path: "/messages",
                stream_path: "/messages",
            },
            ProviderKind::Gemini => Wire {
                kind,
                api,
                model: "gemini-2.5-flash",
                path: "/models/gemini-2.5-flash:generateContent",
                stream_path: "/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            },
            _ => Wire {
                kind,
                api,
                model: "gpt-4o-mini",
                path: "/chat/completions",
                stream_path: "/chat/completions",
            },
        }
    }

    fn answers(&self) -> mock_http::Answers {
        if self.api == OpenAiApi::Responses {
            return mock_http::responses_answers();
        }
        match self.kind {
            ProviderKind::Anthropic => mock_http::anthropic_answers(),
            ProviderKind::Gemini => mock_http::gemini_answers(),
            _ => mock_http::llm_answers(),
        }
    }

    fn headers(&self, key: &str) -> Result<reqwest::header::HeaderMap, crate::gateway_proc::Err> {
        let mut h = reqwest::header::HeaderMap::new();
        match self.kind {
            ProviderKind::Anthropic => {
                h.insert("x-api-key", key.parse()?);
                h.insert("anthropic-version", "2023-06-01".parse()?);
            }
            ProviderKind::Gemini => {
                h.insert("x-goog-api-key", key.parse()?);
            }
            _ => {
                h.insert("authorization", format!("Bearer {key}").parse()?);
            }
        }
        Ok(h)
    }

    fn body(&self, stream: bool) -> serde_json::Value {
        if self.api == OpenAiApi::Responses {
            return serde_json::json!({
                "model": self.model,
                "instructions": "You are a helpful assistant.",
                "input": [{"type": "message", "role": "user", "content": "Hello!"}],
                "store": false,
                "stream": stream,
            });
        }
        let mut body = match self.kind {
            ProviderKind::Anthropic => serde_json::json!({
                "model": self.model,
                "max_tokens": 4096,
                "system": [{"type": "text", "text": "You are a helpful assistant."}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello!"}]}],
            }),
            // The model and the stream mode are in the URL.
            ProviderKind::Gemini => serde_json::json!({
                "contents": [{"role": "user", "parts": [{"text": "Hello!"}]}],
                "systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
            }),
            _ => serde_json::json!({
                "model": self.model,
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "Hello!"}
                ],
                "stream": stream,
            }),
        };
        if stream && self.kind == ProviderKind::Anthropic {
            body["stream"] = true.into();
        }
        body
    }
}
