//! Our stream semantics over an SSE body (parsed by [`crate::sse`]).
//!
//! * Only **data** events count as progress: SSE comments (`: keep-alive`)
//!   and blank lines never produce an event, so they cannot reset the
//!   first-token or idle deadline.
//! * `[DONE]` ends the stream. A body that closes without `[DONE]` is
//!   complete if a finish reason arrived, otherwise
//!   [`ProviderError::StreamInterrupted`] with the number of data events.
//! * `{"error": ...}` inside a 200 stream ends it with
//!   [`ProviderError::Api`]. An event whose data is not a chunk yields
//!   [`ProviderError::MalformedStream`] and the stream stays usable (the
//!   caller decides whether to skip it); invalid UTF-8, or one event over
//!   16 MiB, yields the same class but ends the stream.
//! * Any deadline (first token, idle, total) ends the stream.

use std::{collections::VecDeque, pin::Pin, sync::Arc};

use futures::{Stream, StreamExt};
use secrecy::SecretString;
use tokio::time::{Instant, timeout_at};
use tracing::{Instrument, Span};

use crate::{
    classify,
    dialect::{Decoded, StreamDecoder},
    error::{ProviderError, TimeoutPhase},
    settings::Timeouts,
    sse::{Event, SseError, SseStream},
    telemetry,
    types::{StreamEvent, Usage},
};

type Events = Pin<Box<dyn Stream<Item = Result<Event, SseError<reqwest::Error>>> + Send>>;

pub(crate) struct SseState {
    events: Events,
    decoder: Box<dyn StreamDecoder>,
    provider: Arc<str>,
    key: Option<SecretString>,
    status: u16,
    request_id: Option<String>,
    timeouts: Timeouts,
    opened_at: Instant,
    total_deadline: Instant,
    last_data: Option<Instant>,
    data_events: usize,
    /// The answer's content type when it names something other than
    /// server-sent events: if no event comes, the answer was not a
    /// stream (a proxy that ignores `stream: true`, an HTML page), which
    /// is malformed, not an interruption worth retrying.
    not_sse: Option<String>,
    saw_finish: bool,
    done: bool,
    queue: VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    span: Span,
    // For the span, recorded when the stream ends.
    model: Option<String>,
    usage: Option<Usage>,
    finish: Option<String>,
}

/// Everything [`sse`] needs besides the response.
pub(crate) struct SseSetup {
    pub(crate) provider: Arc<str>,
    pub(crate) key: Option<SecretString>,
    pub(crate) decoder: Box<dyn StreamDecoder>,
    pub(crate) timeouts: Timeouts,
    pub(crate) total_deadline: Instant,
    pub(crate) span: Span,
}

/// Turns an opened 2xx SSE response into our event stream.
pub(crate) fn sse(
    response: reqwest::Response,
    status: u16,
    request_id: Option<String>,
    opened_at: Instant,
    setup: SseSetup,
) -> impl Stream<Item = Result<StreamEvent, ProviderError>> + Send + 'static {
    let not_sse = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()))
        .filter(|ct| !is_event_stream(ct))
        // The provider's words, so kept short (an error message names it);
        // allocated only when the answer is not an event stream.
        .map(|ct| ct.chars().take(64).collect::<String>());
    let state = SseState {
        not_sse,
        events: Box::pin(SseStream::new(Box::pin(response.bytes_stream()))),
        decoder: setup.decoder,
        provider: setup.provider,
        key: setup.key,
        status,
        request_id,
        timeouts: setup.timeouts,
        opened_at,
        total_deadline: setup.total_deadline,
        last_data: None,
        data_events: 0,
        saw_finish: false,
        done: false,
        queue: VecDeque::new(),
        scratch: Vec::new(),
        span: setup.span,
        model: None,
        usage: None,
        finish: None,
    };
    // Boxed: `unfold` moves its state into and out of every item's future;
    // a pointer moves, not the whole state.
    futures::stream::unfold(Box::new(state), |mut s| async move {
        let span = s.span.clone();
        let item = s.next_item().instrument(span).await?;
        Some((item, s))
    })
}

/// Whether a content type is `text/event-stream` (any parameters, any case).
fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("text/event-stream")
}

impl SseState {
    fn provider(&self) -> String {
        self.provider.to_string()
    }

    /// Ends the stream with `err` (recorded on the span).
    fn fail(&mut self, err: ProviderError) -> Option<Result<StreamEvent, ProviderError>> {
        self.done = true;
        telemetry::record_error(&self.span, &err);
        self.record_progress(None);
        tracing::debug!(error = %err.for_log(), "stream ended with an error");
        Some(Err(err))
    }

    /// Ends the stream: its bytes are not server-sent events we can read.
    fn malformed(&mut self, detail: String) -> Option<Result<StreamEvent, ProviderError>> {
        let err = ProviderError::MalformedStream {
            provider: self.provider(),
            events: self.data_events,
            detail,
        };
        self.fail(err)
    }

    /// Ends the stream successfully.
    fn complete(&mut self) -> Option<Result<StreamEvent, ProviderError>> {
        self.done = true;
        self.record_progress(Some("answered"));
        None
    }

    fn record_progress(&self, outcome: Option<&'static str>) {
        telemetry::record_stream_end(
            &self.span,
            outcome,
            self.model.as_deref(),
            self.usage.as_ref(),
            self.finish.as_deref(),
            self.data_events,
        );
    }

    fn deadline(&self) -> (Instant, TimeoutPhase, std::time::Duration) {
        let (data_deadline, phase, after) = match self.last_data {
            None => (
                self.opened_at + self.timeouts.first_token,
                TimeoutPhase::FirstToken,
                self.timeouts.first_token,
            ),
            Some(at) => (
                at + self.timeouts.idle,
                TimeoutPhase::Idle,
                self.timeouts.idle,
            ),
        };
        if self.total_deadline <= data_deadline {
            (
                self.total_deadline,
                TimeoutPhase::Total,
                self.timeouts.total,
            )
        } else {
            (data_deadline, phase, after)
        }
    }

    async fn next_item(&mut self) -> Option<Result<StreamEvent, ProviderError>> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Some(Ok(ev));
            }
            if self.done {
                return None;
            }
            let (deadline, phase, after) = self.deadline();
            let next = match timeout_at(deadline, self.events.next()).await {
                Err(_) => {
                    let err = ProviderError::Timeout {
                        provider: self.provider(),
                        phase,
                        after,
                        events: self.data_events,
                    };
                    return self.fail(err);
                }
                Ok(next) => next,
            };
            let event = match next {
                None if self.saw_finish => return self.complete(),
                None if self.data_events == 0 && self.not_sse.is_some() => {
                    let ct = self.not_sse.take().unwrap_or_default();
                    return self.malformed(format!("the answer is {ct:?}, not server-sent events"));
                }
                None => {
                    let err = ProviderError::StreamInterrupted {
                        provider: self.provider(),
                        events: self.data_events,
                        source: None,
                    };
                    return self.fail(err);
                }
                Some(Err(SseError::Transport(source))) => {
                    if self.saw_finish {
                        // The answer was complete; only the tail broke.
                        return self.complete();
                    }
                    let err = ProviderError::StreamInterrupted {
                        provider: self.provider(),
                        events: self.data_events,
                        source: Some(source),
                    };
                    return self.fail(err);
                }
                Some(Err(SseError::Utf8)) => {
                    return self.malformed("event is not valid utf-8".to_owned());
                }
                Some(Err(SseError::TooLarge)) => {
                    let mib = crate::sse::MAX_EVENT_BYTES / (1024 * 1024);
                    return self.malformed(format!("event is larger than {mib} MiB"));
                }
                Some(Ok(event)) => event,
            };
            if let Some(item) = self.handle(event) {
                return Some(item);
            }
        }
    }

    /// Processes one SSE event; returns an item to yield now, if any.
    /// Keep-alives return before they can count as progress.
    fn handle(&mut self, event: Event) -> Option<Result<StreamEvent, ProviderError>> {
        let mut out = std::mem::take(&mut self.scratch);
        let decoded = self.decoder.decode(&event, &mut out);
        self.enqueue(&mut out);
        self.scratch = out;
        if matches!(decoded, Decoded::KeepAlive) {
            return None;
        }
        self.data_events += 1;
        self.last_data = Some(Instant::now());
        match decoded {
            Decoded::Data | Decoded::KeepAlive => None,
            // Queued events are still yielded before the end.
            Decoded::Done => self.complete(),
            Decoded::Malformed(detail) => {
                // Not terminal: the caller may skip this event.
                let err = ProviderError::MalformedStream {
                    provider: self.provider(),
                    events: self.data_events,
                    detail,
                };
                tracing::debug!(error = %err.for_log(), "malformed stream event");
                Some(Err(err))
            }
            Decoded::Error(error) => {
                let failure = classify::failure_from(self.status, error, None, self.key.as_ref());
                let err = ProviderError::Api {
                    provider: self.provider(),
                    failure: Box::new(failure),
                    events: self.data_events,
                    request_id: self.request_id.clone(),
                };
                self.fail(err)
            }
        }
    }

    /// Queues decoded events, noting what the span records at the end.
    fn enqueue(&mut self, out: &mut Vec<StreamEvent>) {
        for ev in out.drain(..) {
            match &ev {
                StreamEvent::Model(m) => self.model = Some(m.clone()),
                StreamEvent::Usage(u) => self.usage = Some(u.clone()),
                StreamEvent::Finish { reason } => {
                    self.saw_finish = true;
                    self.finish = Some(reason.as_str().to_owned());
                }
                _ => {}
            }
            self.queue.push_back(ev);
        }
    }
}
