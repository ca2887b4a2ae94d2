//! The `adapter` benchmark: what the provider adapter costs on top of a
//! plain reqwest POST.
//!
//! One local mock HTTP/1.1 server (a tiny keep-alive server on its own
//! thread) answers a fixed chat completion, or a fixed SSE stream when the
//! request asks for one. In the same run, interleaved call by call, we time:
//!
//! * baseline: `reqwest` POST of a prebuilt JSON body, read the body, parse
//!   it as `serde_json::Value` (streaming: read the SSE body to its end);
//! * `chat`: [`Provider::chat`] (async-openai over our transport, decode);
//! * `chat_stream`: [`Provider::chat_stream`] consumed to the end.
//!
//! Prints one JSON line per mode with p50/p99, baseline and ratios. The
//! streaming line also carries `parse_baseline_p50_us` / `_p99_us`: reqwest
//! plus eventsource-stream plus `serde_json::Value` per event, i.e. the least
//! a correct SSE client must do, so the adapter's own cost is visible apart
//! from the unavoidable parsing cost.

use std::{sync::Arc, time::Instant};

use futures::StreamExt;
use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Message, Provider, ProviderKind, ProviderSettings,
};
use secrecy::SecretString;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::{
    BenchResult,
    args::Args,
    stats::{Samples, emit, round2},
};

const COMPLETION: &str = r#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I assist you today?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_06737a9306"}"#;

fn sse_body() -> String {
    let mut s = String::new();
    let words = [
        "Hello", "!", " How", " can", " I", " assist", " you", " today", "?",
    ];
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    s.push_str(&chunk(r#"{"role":"assistant","content":""}"#, "null"));
    for w in words {
        s.push_str(&chunk(&format!("{{\"content\":\"{w}\"}}"), "null"));
    }
    s.push_str(&chunk("{}", "\"stop\""));
    s.push_str("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":10,\"total_tokens\":29}}\n\n");
    s.push_str("data: [DONE]\n\n");
    s
}

/// Serves one keep-alive connection: fixed JSON, or fixed SSE if the body
/// asks for a stream.
async fn serve_conn(mut sock: TcpStream, json: Arc<[u8]>, sse: Arc<[u8]>) {
    let _ = sock.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut tmp = [0u8; 8192];
    loop {
        let head_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let body = &buf[head_end..head_end + len];
        let stream = body.windows(13).any(|w| w == b"\"stream\":true");
        let (ctype, payload) = if stream {
            ("text/event-stream", &sse)
        } else {
            ("application/json", &json)
        };
        let resp_head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nx-request-id: req_bench\r\n\r\n",
            payload.len()
        );
        let mut out = Vec::with_capacity(resp_head.len() + payload.len());
        out.extend_from_slice(resp_head.as_bytes());
        out.extend_from_slice(payload);
        if sock.write_all(&out).await.is_err() {
            return;
        }
        buf.drain(..head_end + len);
    }
}

/// Starts the mock server on its own thread and runtime; returns its base URL.
fn start_server() -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let json: Arc<[u8]> = COMPLETION.as_bytes().into();
    let sse: Arc<[u8]> = sse_body().into_bytes().into();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = TcpListener::from_std(std_listener) else {
                return;
            };
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve_conn(sock, json.clone(), sse.clone()));
            }
        });
    });
    Ok(format!("http://{addr}/v1"))
}

fn report(
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
    let base = start_server()?;
    let key = "sk-bench-not-a-real-key";
    let provider = AnyProvider::new(
        ProviderSettings::new("bench", ProviderKind::OpenAi, "gpt-4o-mini")
            .with_base_url(&base)
            .with_api_key(SecretString::from(key)),
    )?;
    let raw = reqwest::Client::new();
    let url = format!("{base}/chat/completions");
    let req = ChatRequest::new(vec![
        Message::system("You are a helpful assistant."),
        Message::user("Hello!"),
    ]);
    let body = |stream: bool| {
        serde_json::json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Hello!"}
            ],
            "stream": stream,
        })
    };
    let (json_body, stream_body) = (body(false), body(true));
    let opts = CallOptions::default();

    let baseline_chat = || async {
        let t = Instant::now();
        let bytes = raw
            .post(&url)
            .bearer_auth(key)
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
            .post(&url)
            .bearer_auth(key)
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
            .post(&url)
            .bearer_auth(key)
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
    report("chat", a, b, None, adapter_wall.as_secs_f64());

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
    report("chat_stream", a, b, Some(pb), adapter_wall.as_secs_f64());
    Ok(())
}
