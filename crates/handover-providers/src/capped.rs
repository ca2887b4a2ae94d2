//! An HTTP answer read with a cap, so that whatever answers at a URL (a
//! provider, a destination, an MCP server) cannot make a Handover process
//! hold an unbounded body. Public because every crate that reads an
//! answer reads it this way (the providers' transport, the write gate's
//! `HttpJsonExecutor` and HTTP lookups, the MCP proxy's HTTP upstream):
//! one reader, one rule.

use bytes::{Bytes, BytesMut};

/// Reads at most `limit` bytes of `response`'s body; a longer body is cut
/// there and the rest never read. A body that arrives as one chunk (most
/// answers) is that chunk, not a copy: only a second chunk starts a
/// buffer. The request's own timeout, if any, still bounds the wait.
pub async fn read(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Capped, reqwest::Error> {
    let mut body = Body::default();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.push(chunk.slice(..room));
            return Ok(Capped::Cut(body.freeze()));
        }
        body.push(chunk);
    }
    Ok(Capped::Whole(body.freeze()))
}

/// A body read up to a limit: all of it, or the limit's worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capped {
    /// The whole body.
    Whole(Bytes),
    /// The body was longer: its first `limit` bytes (the rest never read).
    Cut(Bytes),
}

/// A body being read: its one chunk so far, or a buffer once a second
/// chunk came.
enum Body {
    One(Bytes),
    More(BytesMut),
}

impl Default for Body {
    fn default() -> Self {
        Self::One(Bytes::new())
    }
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Self::One(b) => b.len(),
            Self::More(b) => b.len(),
        }
    }

    fn push(&mut self, chunk: Bytes) {
        match self {
            Self::One(first) if first.is_empty() => *first = chunk,
            Self::One(first) => {
                let mut buf = BytesMut::with_capacity(first.len() + chunk.len());
                buf.extend_from_slice(first);
                buf.extend_from_slice(&chunk);
                *self = Self::More(buf);
            }
            Self::More(buf) => buf.extend_from_slice(&chunk),
        }
    }

    fn freeze(self) -> Bytes {
        match self {
            Self::One(b) => b,
            Self::More(b) => b.freeze(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_chunk_body_is_that_chunk_and_more_chunks_are_joined() {
        let chunk = Bytes::from_static(b"{\"id\":1}");
        let mut one = Body::default();
        one.push(Bytes::new());
        one.push(chunk.clone());
        let one = one.freeze();
        assert_eq!(one.as_ptr(), chunk.as_ptr(), "not copied");
        let mut more = Body::default();
        for part in [&b"{\"id\""[..], b":", b"1}"] {
            more.push(Bytes::copy_from_slice(part));
        }
        assert_eq!(more.len(), 8);
        assert_eq!(&more.freeze()[..], b"{\"id\":1}");
    }
}
