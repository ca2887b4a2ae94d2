//! The demo's timeline: what happened, when, and who did it.
//!
//! Time is the demo's [`DemoClock`], shared by the ledger, the mock
//! destination and the reconciler. It follows real time while HTTP calls
//! run, and jumps forward where the story waits (the reconciler's next
//! check, the destination's 30 s visibility lag), so the demo finishes in
//! about a second while telling the story with realistic times. The story
//! is dated in the past (see `story::START_BEFORE_NOW`), so the jumps end
//! before the wall clock: the ledger it leaves holds no time ahead of real
//! time.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use handover::ledger::{Clock, Timestamp};
use serde::Serialize;

use crate::term::Style;

/// Who did something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Actor {
    User,
    Provider,
    Gate,
    Ledger,
    Destination,
    Reconciler,
}

impl Actor {
    fn paint(self, s: Style, text: &str) -> String {
        match self {
            Actor::User => s.blue(text),
            Actor::Provider => s.cyan(text),
            Actor::Gate | Actor::Ledger => s.yellow(text),
            Actor::Destination => s.magenta(text),
            Actor::Reconciler => s.green(text),
        }
    }
}

/// One line of the timeline.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Event {
    /// Milliseconds since the demo started (demo clock).
    pub(super) at_ms: u64,
    /// Who.
    pub(super) actor: Actor,
    /// The actor's name (`openai`, `deepseek`, `ledger`, ...).
    pub(super) name: String,
    /// The attempt, if the event is one (`openai #1`, `dispatch #1`, `lookup #2`).
    pub(super) attempt: Option<String>,
    /// What happened.
    pub(super) what: String,
    /// The operation's state change, if any (`dispatched -> unknown`).
    pub(super) state: Option<String>,
}

/// Real time since the demo started plus the story's jumps. Clones share
/// the same time.
#[derive(Debug, Clone)]
pub(super) struct DemoClock {
    base: Timestamp,
    started: Instant,
    /// The story's jumps, and the one move of [`start_at`](Self::start_at).
    offset_ms: Arc<AtomicI64>,
}

impl DemoClock {
    pub(super) fn new(base: Timestamp) -> Self {
        Self {
            base,
            started: Instant::now(),
            offset_ms: Arc::new(AtomicI64::new(0)),
        }
    }

    /// Sets the time to `t`, earlier or later. Only before the story
    /// records anything: afterwards time only moves forward.
    pub(super) fn start_at(&self, t: Timestamp) {
        let delta = t.as_millis() - self.now().as_millis();
        self.offset_ms.fetch_add(delta, Ordering::SeqCst);
    }

    /// The story waits until `t` (no real waiting).
    pub(super) fn wait_until(&self, t: Timestamp) {
        let ahead = t.saturating_since(self.now());
        let ms = i64::try_from(ahead.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for DemoClock {
    fn now(&self) -> Timestamp {
        let elapsed = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let offset = self.offset_ms.load(Ordering::SeqCst);
        Timestamp::from_millis(
            self.base
                .as_millis()
                .saturating_add(elapsed)
                .saturating_add(offset),
        )
    }
}

/// The clock and the events.
#[derive(Debug)]
pub(super) struct Timeline {
    clock: DemoClock,
    start: Timestamp,
    pub(super) events: Vec<Event>,
}

impl Timeline {
    pub(super) fn new(clock: DemoClock) -> Self {
        let start = clock.now();
        Self {
            clock,
            start,
            events: Vec::new(),
        }
    }

    /// Offset of `t` from the start of the demo.
    pub(super) fn offset(&self, t: Timestamp) -> Duration {
        t.saturating_since(self.start)
    }

    /// An event now.
    pub(super) fn push(
        &mut self,
        actor: Actor,
        name: &str,
        attempt: Option<String>,
        what: impl Into<String>,
        state: Option<&str>,
    ) {
        let now = self.clock.now();
        self.push_at(now, actor, name, attempt, what, state);
    }

    /// An event at `t` (a time the ledger or the destination recorded).
    pub(super) fn push_at(
        &mut self,
        t: Timestamp,
        actor: Actor,
        name: &str,
        attempt: Option<String>,
        what: impl Into<String>,
        state: Option<&str>,
    ) {
        let at = u64::try_from(self.offset(t).as_millis()).unwrap_or(u64::MAX);
        // Events are pushed in story order; times recorded in whole
        // milliseconds by different parts may round a hair backwards.
        let at_ms = at.max(self.events.last().map_or(0, |e| e.at_ms));
        self.events.push(Event {
            at_ms,
            actor,
            name: name.to_owned(),
            attempt,
            what: what.into(),
            state: state.map(str::to_owned),
        });
    }
}

/// The timeline as aligned text.
pub(super) fn render(events: &[Event], s: Style) -> String {
    let name_w = events.iter().map(|e| e.name.len()).max().unwrap_or(0);
    let attempt_w = events
        .iter()
        .map(|e| e.attempt.as_deref().map_or(0, str::len))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for e in events {
        #[allow(clippy::cast_precision_loss)]
        let secs = e.at_ms as f64 / 1000.0;
        let name = format!("{:<name_w$}", e.name);
        let attempt = format!("{:<attempt_w$}", e.attempt.as_deref().unwrap_or(""));
        let _ = write!(
            out,
            "  {}  {}  {}  {}",
            s.dim(&format!("+{secs:>7.3}s")),
            e.actor.paint(s, &name),
            s.dim(&attempt),
            e.what
        );
        if let Some(st) = &e.state {
            let _ = write!(out, "  [{}]", s.bold(st));
        }
        out.push('\n');
    }
    out
}
