//! Human-readable durations (`"30s"`, `"250ms"`, `"72h"`, `"30d"`).

use std::time::Duration;

use super::issues::ConfigIssues;

/// Parses an optional duration at `path`, falling back to `default`.
/// Zero, negative and malformed values are recorded as issues naming `path`.
pub(crate) fn parse_or(
    issues: &mut ConfigIssues,
    path: &str,
    raw: Option<&str>,
    default: Duration,
) -> Duration {
    match raw {
        None => default,
        Some(text) => parse(issues, path, text).unwrap_or(default),
    }
}

/// Parses a required duration at `path`.
pub(crate) fn parse(issues: &mut ConfigIssues, path: &str, text: &str) -> Option<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) if d.is_zero() => {
            issues.push(path, format!("duration {text:?} must be greater than zero"));
            None
        }
        Ok(d) => Some(d),
        Err(_) => {
            issues.push(
                path,
                format!("invalid duration {text:?} (expected a positive value such as \"30s\", \"250ms\" or \"2m\")"),
            );
            None
        }
    }
}
