//! Newline-delimited messages (the MCP stdio transport), read so that one
//! bad line costs that line, not the session: a line that is not UTF-8 or
//! is longer than [`MAX_LINE_BYTES`] is an item of its own
//! ([`Line::NotUtf8`], [`Line::TooLong`]) the reader answers or skips,
//! and the next line is read as usual. tokio-util's `LinesCodec` reports
//! both as errors, after which its stream ends: a client's one stray byte
//! closed the whole session, calls in flight included.

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Longest accepted message line (the SDK's default as well).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One line read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line of text, without its `\n` (or `\r\n`).
    Text(String),
    /// A line that is not UTF-8, decoded lossily (to read an id from it).
    NotUtf8(String),
    /// A line longer than [`MAX_LINE_BYTES`]; its bytes are skipped up to
    /// the next newline.
    TooLong,
}

impl Line {
    /// What is wrong with a line that is not text, for an error or a log
    /// (never the line itself).
    pub(crate) fn problem(&self) -> &'static str {
        match self {
            Line::Text(_) => "readable",
            Line::NotUtf8(_) => "the line is not UTF-8",
            Line::TooLong => "the line is longer than 16 MiB",
        }
    }
}

/// Reads [`Line`]s, writes a `String` as one line.
#[derive(Debug, Default)]
pub(crate) struct LineCodec {
    /// Where the search for `\n` resumes in the buffer.
    scanned: usize,
    /// Skipping the rest of a line that was too long.
    discarding: bool,
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        loop {
            let to = buf.len().min(MAX_LINE_BYTES + 1);
            let found = memchr::memchr(b'\n', &buf[self.scanned.min(to)..to]);
            match (self.discarding, found) {
                (true, Some(at)) => {
                    buf.advance(self.scanned + at + 1);
                    self.scanned = 0;
                    self.discarding = false;
                }
                (true, None) => {
                    buf.advance(to);
                    self.scanned = 0;
                    if buf.is_empty() {
                        return Ok(None);
                    }
                }
                (false, Some(at)) => {
                    let end = self.scanned + at;
                    self.scanned = 0;
                    let line = buf.split_to(end + 1);
                    return Ok(Some(text(&line[..end])));
                }
                (false, None) if buf.len() > MAX_LINE_BYTES => {
                    self.discarding = true;
                    self.scanned = 0;
                    return Ok(Some(Line::TooLong));
                }
                (false, None) => {
                    self.scanned = to;
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        // The last line, if the input did not end with a newline.
        self.scanned = 0;
        if self.discarding || buf.is_empty() {
            buf.clear();
            return Ok(None);
        }
        let line = buf.split();
        Ok(Some(text(&line)))
    }
}

impl Encoder<String> for LineCodec {
    type Error = std::io::Error;

    fn encode(&mut self, line: String, buf: &mut BytesMut) -> Result<(), std::io::Error> {
        buf.reserve(line.len() + 1);
        buf.put_slice(line.as_bytes());
        buf.put_u8(b'\n');
        Ok(())
    }
}

/// A line's bytes (a `\r` before its `\n` dropped) as a [`Line`].
fn text(bytes: &[u8]) -> Line {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Line::Text(s.to_owned()),
        Err(_) => Line::NotUtf8(String::from_utf8_lossy(bytes).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[&[u8]]) -> Vec<Line> {
        let mut codec = LineCodec::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in input {
            buf.extend_from_slice(piece);
            while let Some(line) = codec.decode(&mut buf).unwrap() {
                out.push(line);
            }
        }
        while let Some(line) = codec.decode_eof(&mut buf).unwrap() {
            out.push(line);
        }
        out
    }

    fn t(s: &str) -> Line {
        Line::Text(s.to_owned())
    }

    #[test]
    fn a_bad_line_is_one_item_and_the_next_line_is_read() {
        let got = lines(&[
            b"{\"a\":1}\r\n{\"b\":\"\xff\xfe\"}\n",
            b"{\"c\"",
            b":3}\nlast",
        ]);
        assert_eq!(
            got,
            [
                t("{\"a\":1}"),
                Line::NotUtf8("{\"b\":\"\u{fffd}\u{fffd}\"}".to_owned()),
                t("{\"c\":3}"),
                t("last"),
            ]
        );
    }

    #[test]
    fn a_line_past_the_limit_is_skipped_to_its_newline() {
        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        let got = lines(&[
            &long[..MAX_LINE_BYTES / 2],
            &long[MAX_LINE_BYTES / 2..],
            b"x\nnext\n",
        ]);
        assert_eq!(got, [Line::TooLong, t("next")]);
        // Exactly the limit is still a line.
        let mut exact = vec![b'y'; MAX_LINE_BYTES];
        exact.push(b'\n');
        let got = lines(&[&exact]);
        assert!(matches!(&got[..], [Line::Text(s)] if s.len() == MAX_LINE_BYTES));
        // Too long and never ended: nothing more.
        assert_eq!(lines(&[&long]), [Line::TooLong]);
    }
}
