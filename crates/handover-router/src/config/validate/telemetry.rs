//! `[telemetry]`: where spans are exported (OTLP/HTTP), under which
//! service name, with which deadlines and headers.

use super::super::defaults as d;
use super::super::issues::ConfigIssues;
use super::super::model::TelemetrySettings;
use super::super::raw::RawTelemetry;
use super::{EnvLookup, lookup, positive_u32, provider};

/// `None` when no `otlp_endpoint` is set: nothing is exported (the other
/// fields are still checked, so a typo is not silently ignored).
pub(super) fn validate(
    issues: &mut ConfigIssues,
    missing: &mut ConfigIssues,
    env: EnvLookup<'_>,
    raw: RawTelemetry,
) -> Option<TelemetrySettings> {
    let endpoint = raw.otlp_endpoint.map(|url| {
        if let Err(why) = provider::http_url(&url) {
            issues.push("telemetry.otlp_endpoint", why);
        }
        traces_url(&url)
    });
    let service_name = raw
        .service_name
        .unwrap_or_else(|| d::TELEMETRY_SERVICE_NAME.to_owned());
    let visible =
        |s: &str| !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| (32..127).contains(&b));
    if !visible(&service_name) {
        issues.push(
            "telemetry.service_name",
            "must be 1-255 printable ASCII characters",
        );
    }
    let export_timeout = duration!(
        issues,
        "telemetry",
        raw.export_timeout,
        d::TELEMETRY_EXPORT_TIMEOUT
    );
    let export_interval = duration!(
        issues,
        "telemetry",
        raw.export_interval,
        d::TELEMETRY_EXPORT_INTERVAL
    );
    let max_queued_spans = positive_u32(
        issues,
        "telemetry.max_queued_spans",
        raw.max_queued_spans,
        d::TELEMETRY_MAX_QUEUED_SPANS,
    );
    let headers = lookup::headers(issues, missing, env, "telemetry", raw.headers);
    Some(TelemetrySettings {
        otlp_endpoint: endpoint?,
        service_name,
        export_timeout,
        export_interval,
        max_queued_spans,
        headers,
    })
}

/// The collector's base URL gets the OTLP traces path; a URL with a path
/// is used as written.
fn traces_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) if u.path() == "/" || u.path().is_empty() => {
            format!("{}/v1/traces", url.trim_end_matches('/'))
        }
        _ => url.to_owned(),
    }
}
