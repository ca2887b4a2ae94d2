//! A minimal keep-alive HTTP/1.1 server on its own thread and runtime, for
//! benchmarks: it answers every request with a fixed JSON body, or with a
//! fixed SSE body when the request body asks for `"stream":true` (or its
//! URL for `alt=sse`, as Gemini's streaming method does). Being
//! this small keeps the server's own cost out of the comparison.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The fixed answers.
#[derive(Clone)]
pub(crate) struct Answers {
    /// Body for ordinary requests (`application/json`).
    pub(crate) json: Arc<[u8]>,
    /// Body for `"stream":true` requests (`text/event-stream`).
    pub(crate) sse: Arc<[u8]>,
}

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

/// A chat completion and its streamed form, as OpenAI sends them.
pub(crate) fn llm_answers() -> Answers {
    Answers {
        json: COMPLETION.as_bytes().into(),
        sse: sse_body().into_bytes().into(),
    }
}

const MESSAGE: &str = r#"{"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hello! How can I assist you today?"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":19,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":10,"service_tier":"standard"}}"#;

fn anthropic_sse_body() -> String {
    let event = |name: &str, data: &str| format!("event: {name}\ndata: {data}\n\n");
    let mut s = event(
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":19,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}"#,
    );
    s.push_str(&event(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ));
    s.push_str(&event("ping", r#"{"type":"ping"}"#));
    let words = [
        "Hello", "!", " How", " can", " I", " assist", " you", " today", "?",
    ];
    for w in words {
        s.push_str(&event(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{w}"}}}}"#
            ),
        ));
    }
    s.push_str(&event(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ));
    s.push_str(&event(
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10}}"#,
    ));
    s.push_str(&event("message_stop", r#"{"type":"message_stop"}"#));
    s
}

/// A Messages API answer and its streamed form, as Anthropic sends them.
pub(crate) fn anthropic_answers() -> Answers {
    Answers {
        json: MESSAGE.as_bytes().into(),
        sse: anthropic_sse_body().into_bytes().into(),
    }
}

/// A Responses API `response` object (with the request echo OpenAI returns).
fn response_object(status: &str, output: &str, usage: &str) -> String {
    format!(
        r#"{{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"{status}","background":false,"error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"model":"gpt-4o-mini-2024-07-18","output":[{output}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{{"effort":null,"summary":null}},"service_tier":"default","store":false,"temperature":1.0,"text":{{"format":{{"type":"text"}},"verbosity":"medium"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{usage},"user":null,"metadata":{{}}}}"#
    )
}

const RESPONSES_MESSAGE: &str = r#"{"type":"message","id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello! How can I assist you today?","annotations":[],"logprobs":[]}]}"#;
const RESPONSES_USAGE: &str = r#"{"input_tokens":19,"input_tokens_details":{"cached_tokens":0},"output_tokens":10,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":29}"#;

/// The Responses stream OpenAI sends for the same answer: created, in
/// progress, the item and part opened, one delta per word, the `*.done`
/// repeats and `response.completed` with the whole response.
fn responses_sse_body() -> String {
    let words = [
        "Hello", "!", " How", " can", " I", " assist", " you", " today", "?",
    ];
    let mut seq = 0;
    let mut s = String::new();
    let mut event = |kind: &str, rest: String| {
        s.push_str(&format!(
            "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{seq},{rest}}}\n\n"
        ));
        seq += 1;
    };
    let open = response_object("in_progress", "", "null");
    event("response.created", format!(r#""response":{open}"#));
    event("response.in_progress", format!(r#""response":{open}"#));
    let item = r#""item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0"#;
    event(
        "response.output_item.added",
        r#""output_index":0,"item":{"type":"message","id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","status":"in_progress","role":"assistant","content":[]}"#.into(),
    );
    event(
        "response.content_part.added",
        format!(
            r#"{item},"content_index":0,"part":{{"type":"output_text","text":"","annotations":[],"logprobs":[]}}"#
        ),
    );
    for w in words {
        event(
            "response.output_text.delta",
            format!(r#"{item},"content_index":0,"delta":"{w}","logprobs":[],"obfuscation":"Xs9c""#),
        );
    }
    let text = "Hello! How can I assist you today?";
    event(
        "response.output_text.done",
        format!(r#"{item},"content_index":0,"text":"{text}","logprobs":[]"#),
    );
    event(
        "response.content_part.done",
        format!(
            r#"{item},"content_index":0,"part":{{"type":"output_text","text":"{text}","annotations":[],"logprobs":[]}}"#
        ),
    );
    event(
        "response.output_item.done",
        format!(r#""output_index":0,"item":{RESPONSES_MESSAGE}"#),
    );
    let done = response_object("completed", RESPONSES_MESSAGE, RESPONSES_USAGE);
    event("response.completed", format!(r#""response":{done}"#));
    s
}

/// A Responses API answer and its stream, as OpenAI sends them.
pub(crate) fn responses_answers() -> Answers {
    let json = response_object("completed", RESPONSES_MESSAGE, RESPONSES_USAGE);
    Answers {
        json: json.into_bytes().into(),
        sse: responses_sse_body().into_bytes().into(),
    }
}

const GEMINI_ANSWER: &str = r#"{"candidates":[{"content":{"parts":[{"text":"Hello! How can I assist you today?"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":19,"candidatesTokenCount":10,"totalTokenCount":29,"promptTokensDetails":[{"modality":"TEXT","tokenCount":19}]},"modelVersion":"gemini-2.5-flash","responseId":"c2Q6aOSdFsqmz7IP7K3b2QM"}"#;

fn gemini_sse_body() -> String {
    let words = [
        "Hello", "!", " How", " can", " I", " assist", " you", " today", "?",
    ];
    let mut s = String::new();
    for (i, w) in words.iter().enumerate() {
        let last = i + 1 == words.len();
        let finish = if last {
            r#","finishReason":"STOP""#
        } else {
            ""
        };
        let usage = if last {
            r#","usageMetadata":{"promptTokenCount":19,"candidatesTokenCount":10,"totalTokenCount":29}"#
        } else {
            r#","usageMetadata":{"promptTokenCount":19,"totalTokenCount":19}"#
        };
        s.push_str(&format!(
            r#"data: {{"candidates":[{{"content":{{"parts":[{{"text":"{w}"}}],"role":"model"}}{finish},"index":0}}]{usage},"modelVersion":"gemini-2.5-flash","responseId":"c2Q6aOSdFsqmz7IP7K3b2QM"}}"#
        ));
        s.push_str("\r\n\r\n");
    }
    s
}

/// A `generateContent` answer and its `alt=sse` stream, as Gemini sends them.
pub(crate) fn gemini_answers() -> Answers {
    Answers {
        json: GEMINI_ANSWER.as_bytes().into(),
        sse: gemini_sse_body().into_bytes().into(),
    }
}

/// Starts the server; returns `http://127.0.0.1:PORT`.
pub(crate) fn start(answers: Answers) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = TcpListener::from_std(std_listener) else {
                return;
            };
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve_conn(sock, answers.clone()));
            }
        });
    });
    Ok(format!("http://{addr}"))
}

/// Serves one keep-alive connection.
async fn serve_conn(mut sock: TcpStream, answers: Answers) {
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
        let request_line = head.lines().next().unwrap_or_default();
        let stream =
            body.windows(13).any(|w| w == b"\"stream\":true") || request_line.contains("alt=sse");
        let (ctype, payload) = if stream {
            ("text/event-stream", &answers.sse)
        } else {
            ("application/json", &answers.json)
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
