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

/// The longest duration any setting accepts: 100 years. Every duration is
/// added to clock readings (deadlines, leases, retention cut-offs); a
/// bound keeps that arithmetic far from overflow in every backend's
/// timestamp type.
pub(crate) const MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Parses a required duration at `path`.
pub(crate) fn parse(issues: &mut ConfigIssues, path: &str, text: &str) -> Option<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) if d.is_zero() => {
            issues.push(path, format!("duration {text:?} must be greater than zero"));
            None
        }
        Ok(d) if d > MAX => too_long(issues, path, text),
        // A number past what a duration holds is too long, not malformed.
        Err(humantime::DurationError::NumberOverflow) => too_long(issues, path, text),
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

fn too_long(issues: &mut ConfigIssues, path: &str, text: &str) -> Option<Duration> {
    issues.push(
        path,
        format!("duration {text:?} is too long (at most 100 years)"),
    );
    None
}
