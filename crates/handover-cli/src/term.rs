//! Terminal helpers: colour only on a terminal, time formatting, a spinner
//! on stderr for commands that wait on the network.

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use handover::ledger::Timestamp;

/// Writes to stdout, reporting failure instead of panicking as `print!`
/// does: `handover ops list | head` closes the pipe early, a redirect to a
/// full disk fails. Used through the `out!` and `outln!` macros.
pub(crate) fn out(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(args)
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")
}

/// Text from the ledger (a reason, evidence, a holder's name: written by
/// clients, executors and operators) made safe for a terminal: control
/// characters (C0, DEL, C1) and the bidirectional-text controls are
/// printed escaped (`\n`, `\u{1b}`, `\u{202e}`), so a record cannot
/// colour, move or clear the screen, reorder what is shown, or start a
/// line that looks like another field. Everything else is kept as is;
/// JSON output is serde's, already escaped, and left exact.
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `e` is stdout's reader having gone away.
pub(crate) fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// ANSI styling, switched off when the stream is not a terminal or
/// `NO_COLOR` is set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    on: bool,
}

impl Style {
    /// Styling for stdout.
    pub(crate) fn stdout() -> Self {
        Self {
            on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(crate) fn bold(self, t: &str) -> String {
        self.wrap("1", t)
    }
    pub(crate) fn dim(self, t: &str) -> String {
        self.wrap("2", t)
    }
    pub(crate) fn red(self, t: &str) -> String {
        self.wrap("31", t)
    }
    pub(crate) fn green(self, t: &str) -> String {
        self.wrap("32", t)
    }
    pub(crate) fn yellow(self, t: &str) -> String {
        self.wrap("33", t)
    }
    pub(crate) fn blue(self, t: &str) -> String {
        self.wrap("34", t)
    }
    pub(crate) fn magenta(self, t: &str) -> String {
        self.wrap("35", t)
    }
    pub(crate) fn cyan(self, t: &str) -> String {
        self.wrap("36", t)
    }

    /// A state name in its colour (green terminal success, red refusal, yellow unknown).
    pub(crate) fn state(self, s: &str) -> String {
        match s {
            "confirmed" => self.green(s),
            "rejected" | "cancelled" => self.red(s),
            "unknown" | "diverged" => self.yellow(s),
            _ => self.bold(s),
        }
    }
}

/// A ledger timestamp as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    let ms = u64::try_from(t.as_millis()).unwrap_or(0);
    let st = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(st).to_string()
}

/// A coarse human duration: `12m 5s`, `3h 2m`, `450ms`.
pub(crate) fn age(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    let coarse = if secs >= 3600 {
        Duration::from_secs(secs - secs % 60)
    } else {
        Duration::from_secs(secs)
    };
    humantime::format_duration(coarse).to_string()
}

/// How long before `now` the ledger stamped `then`, as [`age`]; a stamp
/// ahead of this machine's clock (another host's clock, or the demo's,
/// which runs ahead to play its story in a second) reads "in …" instead
/// of a misleading "0ms".
pub(crate) fn age_at(now: Timestamp, then: Timestamp) -> String {
    if then > now {
        format!("in {}", age(then.saturating_since(now)))
    } else {
        age(now.saturating_since(then))
    }
}

/// [`age_at`] in a sentence: "5m ago", or "in 5m" for a stamp ahead.
pub(crate) fn ago(now: Timestamp, then: Timestamp) -> String {
    if then > now {
        age_at(now, then)
    } else {
        format!("{} ago", age_at(now, then))
    }
}

/// The wall clock as a ledger timestamp.
pub(crate) fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_millis(ms)
}

/// A spinner line on stderr while a future runs, only when stderr is a
/// terminal. Dropping it clears the line.
pub(crate) struct Spinner {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Spinner {
    pub(crate) fn start(message: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { task: None };
        }
        let message = message.to_owned();
        let task = tokio::spawn(async move {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            let mut tick = tokio::time::interval(Duration::from_millis(120));
            let mut i = 0usize;
            loop {
                tick.tick().await;
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r{} {message}", FRAMES[i % FRAMES.len()]);
                let _ = err.flush();
                i += 1;
            }
        });
        Self { task: Some(task) }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// Pads `rows` into aligned columns separated by two spaces.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let last = row.len().saturating_sub(1);
        for (c, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if c < last {
                let pad = widths[c] - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_text_is_printed_with_its_control_characters_escaped() {
        assert_eq!(printable("r\n\x1b[31mFAKE"), "r\\n\\u{1b}[31mFAKE");
        assert_eq!(printable("a\rb\tc\u{7f}\u{9b}"), "a\\rb\\tc\\u{7f}\\u{9b}");
        assert_eq!(printable("gpj.\u{202e}exe"), "gpj.\\u{202e}exe");
        let plain = "not applied: Müller \\ 42 ✓";
        assert!(matches!(printable(plain), std::borrow::Cow::Borrowed(t) if t == plain));
    }

    #[test]
    fn table_aligns_columns_and_leaves_no_trailing_padding() {
        let rows = vec![
            vec!["SCOPE".to_owned(), "KEY".to_owned(), "STATE".to_owned()],
            vec![
                "customer-42".to_owned(),
                "K-1".to_owned(),
                "unknown".to_owned(),
            ],
        ];
        assert_eq!(
            table(&rows),
            "SCOPE        KEY  STATE\ncustomer-42  K-1  unknown\n"
        );
    }

    #[test]
    fn ages_are_coarse_and_timestamps_are_utc() {
        assert_eq!(age(Duration::from_millis(450)), "450ms");
        assert_eq!(age(Duration::from_secs(725)), "12m 5s");
        assert_eq!(age(Duration::from_secs(3 * 3600 + 125)), "3h 2m");
        let t = Timestamp::from_millis(1_700_000_000_000);
        assert_eq!(age_at(t.plus(Duration::from_secs(65)), t), "1m 5s");
        assert_eq!(age_at(t, t.plus(Duration::from_secs(65))), "in 1m 5s");
        assert_eq!(ago(t.plus(Duration::from_secs(65)), t), "1m 5s ago");
        assert_eq!(ago(t, t.plus(Duration::from_secs(65))), "in 1m 5s");
        assert_eq!(
            rfc3339(Timestamp::from_millis(1_700_000_000_123)),
            "2023-11-14T22:13:20.123Z"
        );
    }
}
