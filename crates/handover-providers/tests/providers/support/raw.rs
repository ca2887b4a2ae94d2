//! A tiny HTTP/1.1 server on a raw `TcpListener`, for responses wiremock
//! cannot produce: streams written event by event, cut, stalled, or a
//! connection dropped without any response. Runs on the test's runtime, so
//! it works under paused tokio time.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

pub struct RawServer {
    pub base: String,
    requests: Arc<AtomicUsize>,
}

impl RawServer {
    /// Complete requests read so far (head and body).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Serves every connection with `script`, after reading one request.
pub async fn serve<F, Fut>(script: F) -> RawServer
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    let script = Arc::new(script);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let counter = counter.clone();
            let script = script.clone();
            tokio::spawn(async move {
                if read_request(&mut sock).await {
                    counter.fetch_add(1, Ordering::SeqCst);
                    script(sock).await;
                }
            });
        }
    });
    RawServer { base, requests }
}

/// Reads one request (head plus Content-Length body). False on EOF.
async fn read_request(sock: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                match sock.read(&mut tmp).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            }
            return true;
        }
        match sock.read(&mut tmp).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// Writes 200 headers for an SSE body delimited by connection close.
pub async fn sse_head(sock: &mut TcpStream) {
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-request-id: req_raw_1\r\nconnection: close\r\n\r\n",
    )
    .await
    .unwrap();
}

/// Writes 200 headers for a chunked SSE body.
pub async fn sse_head_chunked(sock: &mut TcpStream) {
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
}

/// Writes one chunk of a chunked body.
pub async fn chunk(sock: &mut TcpStream, data: &str) {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    let _ = sock.write_all(framed.as_bytes()).await;
}

/// Writes raw bytes, ignoring errors (the client may be gone).
pub async fn write(sock: &mut TcpStream, data: &str) {
    let _ = sock.write_all(data.as_bytes()).await;
    let _ = sock.flush().await;
}

/// Never returns: keeps the connection open and silent.
pub async fn hold(sock: TcpStream) {
    std::future::pending::<()>().await;
    drop(sock);
}
