//! `floor-serve`: the least an HTTP gateway on this stack can do — axum
//! in front, reqwest behind, the body passed through untouched (no token,
//! no policy, no JSON, no ledger, no metrics; only a cap on the requests
//! in flight upstream, `--max-concurrency`, as a provider's admission caps
//! them). `gateway --target floor` (and `gateway --stalled N --target
//! floor`) measures it exactly as it measures Handover's gateway, so the machine's
//! own cost of a proxy hop (two loopback connections, the kernel's TCP
//! work and thread wake-ups, hyper on both sides) is measured on the same
//! machine in the same way, and what Handover adds on top is the
//! difference between the two.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::{BenchResult, args::Args};

#[derive(Clone)]
struct Upstream {
    client: reqwest::Client,
    url: reqwest::Url,
    /// Upstream requests in flight at most (waiters queue here).
    slots: std::sync::Arc<tokio::sync::Semaphore>,
}

/// `floor-serve --mock URL`: like `gateway-serve` (prints `pid N`, then its
/// base URL; stops when its stdin closes), but a bare pass-through.
pub(crate) async fn serve(args: Args) -> BenchResult {
    let mock = args.string("mock", "");
    if mock.is_empty() {
        return Err("floor-serve needs --mock URL".into());
    }
    let upstream = Upstream {
        client: reqwest::Client::builder()
            .pool_max_idle_per_host(4096)
            .build()?,
        url: format!("{mock}/v1/chat/completions").parse()?,
        slots: std::sync::Arc::new(tokio::sync::Semaphore::new(
            usize::try_from(args.number("max-concurrency", 4096)?)?.max(1),
        )),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(forward))
        .with_state(upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("pid {}", std::process::id());
    println!("http://{}", listener.local_addr()?);
    let stop = async {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await?;
    Ok(())
}

async fn forward(State(up): State<Upstream>, headers: HeaderMap, body: Bytes) -> Response {
    let mut req = up.client.post(up.url.clone()).body(body);
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let Ok(_slot) = up.slots.acquire().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    match req.send().await {
        Ok(resp) => {
            let status = resp.status();
            let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
            let mut out = Response::new(Body::from_stream(resp.bytes_stream()));
            *out.status_mut() = status;
            if let Some(ct) = ct {
                out.headers_mut().insert(header::CONTENT_TYPE, ct);
            }
            out
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}
