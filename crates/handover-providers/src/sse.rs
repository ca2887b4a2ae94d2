//! Server-sent events from a response body, by the WHATWG parsing rules.
//!
//! Why our own: a streamed answer is a few dozen events, and the parser we
//! used before (eventsource-stream) spent more instructions on them than
//! the JSON inside: it matched every line character by character and
//! copied the rest of its buffer after each line, so a body read in one
//! piece was copied once per line. This one splits lines on the raw
//! bytes (`\n`, `\r\n` or `\r`; UTF-8 never has those bytes inside a
//! character), checks each line's UTF-8 once, and drops consumed bytes once
//! per read.
//!
//! The rules kept (and tested below): a leading BOM is skipped; `:` lines
//! are comments; `field: value` loses one space after the colon, a line
//! without a colon is a field with an empty value; `data` lines are joined
//! with `\n`; a blank line dispatches the event (none if it had no `data`),
//! whose type is `message` unless an `event` line named one; an event the
//! body ends before dispatching is dropped. Only `event` and `data` are
//! kept: nothing here reconnects, so `id` and `retry` have no use.
//! Invalid UTF-8 in a line ends the stream with [`SseError::Utf8`]; so
//! does an event growing past [`MAX_EVENT_BYTES`] ([`SseError::TooLarge`]),
//! instead of buffering without bound.
//!
//! Public because every SSE body a Handover process reads is read this
//! way: a provider's streamed answer here, and an MCP server's Streamable
//! HTTP answer in the MCP proxy. One parser, one bound.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

/// The most one event (its pending line plus its data so far) may hold.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// How many body pieces one poll reads before it yields (an answer's
/// events come a few per piece; only one event spanning many pieces gets
/// here).
const READS_PER_POLL: u32 = 64;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// The `event` field, `message` when the event named none.
    pub event: String,
    /// The `data` lines, joined with `\n`.
    pub data: String,
}

/// Why the events stopped. After one, the stream yields nothing more.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseError<E> {
    /// A line is not valid UTF-8.
    #[error("an SSE line is not valid UTF-8")]
    Utf8,
    /// One event grew past [`MAX_EVENT_BYTES`].
    #[error("an SSE event is larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
    /// The body itself failed.
    #[error("the SSE body failed")]
    Transport(#[source] E),
}

/// The events of a byte stream (see the module docs).
pub struct SseStream<S> {
    body: S,
    buf: Vec<u8>,
    /// Start of the unparsed bytes in `buf`.
    pos: usize,
    /// Where the search for the next line end resumes: the bytes from
    /// `pos` to here hold none. Without it a long line read in many pieces
    /// was searched again from its start after every piece (an 8 MB event
    /// took time growing with the square of its size).
    scanned: usize,
    started: bool,
    ended: bool,
    event: String,
    data: String,
}

impl<S> SseStream<S> {
    /// The events of `body`, a stream of byte chunks (a response's
    /// `bytes_stream()`); nothing is read until the first poll.
    pub fn new(body: S) -> Self {
        Self {
            body,
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            started: false,
            ended: false,
            event: String::new(),
            data: String::new(),
        }
    }

    /// The next complete line in `buf[pos..]`, consumed; `None` if the
    /// bytes there do not end a line yet. A `\r` last in the buffer waits
    /// for the next read (it may be half of `\r\n`) unless the body ended.
    fn next_line(&mut self) -> Option<(usize, usize)> {
        let from = self.scanned.max(self.pos);
        let Some(found) = memchr::memchr2(b'\n', b'\r', &self.buf[from..]) else {
            self.scanned = self.buf.len();
            return None;
        };
        let at = from + found;
        let len = match self.buf[at] {
            b'\r' => match self.buf.get(at + 1) {
                Some(b'\n') => 2,
                Some(_) => 1,
                None if self.ended => 1,
                None => {
                    // Looked at again once the next byte is here.
                    self.scanned = at;
                    return None;
                }
            },
            _ => 1,
        };
        let start = self.pos;
        self.pos = at + len;
        self.scanned = self.pos;
        Some((start, at))
    }

    /// Applies one line; the event it dispatches, if any.
    fn line<E>(&mut self, start: usize, end: usize) -> Result<Option<Event>, SseError<E>> {
        let line = std::str::from_utf8(&self.buf[start..end]).map_err(|_| SseError::Utf8)?;
        if line.is_empty() {
            if self.data.is_empty() {
                self.event.clear();
                return Ok(None);
            }
            if self.data.ends_with('\n') {
                self.data.pop();
            }
            let event = match std::mem::take(&mut self.event) {
                e if e.is_empty() => "message".to_owned(),
                e => e,
            };
            let data = std::mem::take(&mut self.data);
            return Ok(Some(Event { event, data }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.data.len() + value.len() >= MAX_EVENT_BYTES {
                    return Err(SseError::TooLarge);
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            _ => {}
        }
        Ok(None)
    }

    /// Parses what is buffered; an event, or `None` when more bytes are needed.
    fn parse<E>(&mut self) -> Result<Option<Event>, SseError<E>> {
        if !self.started {
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            let head = &self.buf[self.pos..];
            if head.len() < BOM.len() && BOM.starts_with(head) && !self.ended {
                return Ok(None);
            }
            self.started = true;
            if head.starts_with(BOM) {
                self.pos += BOM.len();
            }
        }
        while let Some((start, end)) = self.next_line() {
            if let Some(ev) = self.line(start, end)? {
                return Ok(Some(ev));
            }
        }
        if self.buf.len() - self.pos + self.data.len() >= MAX_EVENT_BYTES {
            return Err(SseError::TooLarge);
        }
        Ok(None)
    }
}

impl<S, B, E> Stream for SseStream<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    type Item = Result<Event, SseError<E>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut reads = 0u32;
        loop {
            match this.parse() {
                Ok(Some(ev)) => return Poll::Ready(Some(Ok(ev))),
                Ok(None) => {}
                Err(e) => {
                    // Nothing after an error: the stream is over.
                    this.ended = true;
                    this.buf.clear();
                    this.pos = 0;
                    this.scanned = 0;
                    return Poll::Ready(Some(Err(e)));
                }
            }
            if this.ended {
                return Poll::Ready(None);
            }
            // A body that is always ready (one huge event arriving) must
            // not keep this task, and the deadlines around it, from
            // yielding: give the worker back now and then.
            reads += 1;
            if reads > READS_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // Consumed bytes go once per read, not once per line.
            this.buf.drain(..this.pos);
            this.scanned -= this.pos.min(this.scanned);
            this.pos = 0;
            match Pin::new(&mut this.body).poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => this.buf.extend_from_slice(bytes.as_ref()),
                Poll::Ready(Some(Err(e))) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(SseError::Transport(e))));
                }
                // One more parse: a final `\r` now ends its line.
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// Every event of `chunks`, read as those pieces.
    fn events(chunks: &[&[u8]]) -> Vec<Result<Event, String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let body = futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, std::convert::Infallible>(c.to_vec()))
                .collect::<Vec<_>>(),
        );
        rt.block_on(
            SseStream::new(body)
                .map(|r| {
                    r.map_err(|e| match e {
                        SseError::Utf8 => "utf8".to_owned(),
                        SseError::TooLarge => "too large".to_owned(),
                        SseError::Transport(_) => "transport".to_owned(),
                    })
                })
                .collect(),
        )
    }

    fn ev(event: &str, data: &str) -> Result<Event, String> {
        Ok(Event {
            event: event.to_owned(),
            data: data.to_owned(),
        })
    }

    #[test]
    fn every_line_ending_and_every_split_of_the_body_give_the_same_events() {
        let body = b"\xEF\xBB\xBFdata: a\r\n\r\n: comment\revent: add\ndata:b\ndata\ndata:  c\r\rid: 7\nretry: 9\nfoo\n\ndata: \xC3\xA9\n\n";
        let want = vec![ev("message", "a"), ev("add", "b\n\n c"), ev("message", "é")];
        assert_eq!(events(&[body]), want);
        for cut in 1..body.len() {
            let (a, b) = body.split_at(cut);
            assert_eq!(events(&[a, b]), want, "split at byte {cut}");
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(events(&bytes), want, "one byte per read");
    }

    #[test]
    fn a_line_that_has_not_ended_is_not_searched_again() {
        let body = futures::stream::empty::<Result<Vec<u8>, std::convert::Infallible>>();
        let mut s = SseStream::new(body);
        s.buf.extend_from_slice(b"data: aaaa");
        assert!(matches!(s.parse::<()>(), Ok(None)));
        assert_eq!(s.scanned, s.buf.len());
        s.buf.extend_from_slice(b"bb\r");
        assert!(matches!(s.parse::<()>(), Ok(None)));
        assert_eq!(
            s.scanned,
            s.buf.len() - 1,
            "a last \\r waits for its next byte"
        );
        s.buf.extend_from_slice(b"\n\n");
        assert_eq!(
            s.parse::<()>().ok().flatten().map(|e| e.data),
            Some("aaaabb".to_owned())
        );
    }

    #[test]
    fn one_event_spanning_many_ready_pieces_yields_the_worker_between_them() {
        let mut pieces = vec![b"data: ".to_vec()];
        pieces.extend((0..3 * READS_PER_POLL).map(|_| b"x".to_vec()));
        pieces.push(b"\n\n".to_vec());
        let body = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::convert::Infallible>));
        let mut s = SseStream::new(body);
        let woken = std::sync::Arc::new(Woken::default());
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut pendings = 0;
        let event = loop {
            match Pin::new(&mut s).poll_next(&mut cx) {
                Poll::Pending => pendings += 1,
                Poll::Ready(ev) => break ev,
            }
        };
        assert_eq!(
            event.map(|e| e.ok().map(|e| e.data.len())),
            Some(Some(3 * READS_PER_POLL as usize))
        );
        assert!(pendings >= 2, "yielded {pendings} times");
        assert_eq!(
            woken.0.load(std::sync::atomic::Ordering::Relaxed),
            pendings,
            "woken to go on each time"
        );
    }

    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicU32);

    impl std::task::Wake for Woken {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_forgets_its_type() {
        assert_eq!(
            events(&[b"event: ping\n\ndata: x\n\n"]),
            vec![ev("message", "x")]
        );
        // An empty data line still makes an event, with empty data.
        assert_eq!(events(&[b"data:\n\n"]), vec![ev("message", "")]);
    }

    #[test]
    fn an_event_the_body_ends_inside_is_dropped() {
        assert_eq!(events(&[b"data: a\n\ndata: b\n"]), vec![ev("message", "a")]);
        assert_eq!(events(&[b"data: a\n\ndata: b"]), vec![ev("message", "a")]);
        // A final `\r` still ends its line.
        assert_eq!(
            events(&[b"data: a\r\r"]),
            vec![ev("message", "a")],
            "CR CR at the end"
        );
    }

    #[test]
    fn invalid_utf8_ends_the_stream_with_an_error() {
        assert_eq!(
            events(&[b"data: a\n\ndata: \xFF\n\ndata: b\n\n"]),
            vec![ev("message", "a"), Err("utf8".to_owned())]
        );
    }

    #[test]
    fn a_line_that_never_ends_is_refused_at_the_size_limit() {
        let big = vec![b'x'; MAX_EVENT_BYTES / 4];
        let mut chunks: Vec<&[u8]> = vec![b"data: "];
        chunks.extend(std::iter::repeat_n(big.as_slice(), 5));
        assert_eq!(events(&chunks), vec![Err("too large".to_owned())]);
    }
}
