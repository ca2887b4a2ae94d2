//! `[actions.NAME.lookup]` with a `url`: the HTTP lookup Handover runs
//! itself. Everything is checked here, before anything runs: the method,
//! the URL template's placeholders (and that it is a URL once filled), the
//! header names and values, the statuses and the JSON pointers. A header's
//! unset environment variable is reported like an unset API key (an error
//! at startup, a warning for `handover check`).

use std::collections::BTreeMap;

use super::super::issues::ConfigIssues;
use super::super::model::{HttpLookupSpec, LookupHeader};
use super::super::raw::{RawHeaderValue, RawLookup};
use super::EnvLookup;

/// The placeholders a template may use, filled with `sample` to check it.
pub(crate) fn fill(
    template: &str,
    mut value: impl FnMut(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        out.push_str(&rest[..open]);
        if rest[open..].starts_with('}') {
            return Err("unmatched '}'".into());
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| "unclosed '{'".to_owned())?;
        let name = &rest[open + 1..open + close];
        out.push_str(&value(name)?);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Why a filled lookup URL would not be sent as written, or `None`: a path
/// segment that is `.` or `..` (spelled with `%2e` too) is removed by the
/// URL's parser, taking the segment before it along for `..`. A scope or
/// key may be `..` (it is visible ASCII, and `.` is left as it is by the
/// percent-encoding, since `%2e` means the same), so `/shipments/{key}`
/// would ask for `/`: the un-narrowed answer could confirm the operation
/// from another one's record. Checked on the template at validation (a
/// dot segment written in the file) and on every filled URL before it is
/// sent (one from a value); a lookup refused this way proves nothing and
/// the operation stays unknown.
pub(crate) fn dot_segment(filled: &str) -> Option<&'static str> {
    let rest = filled.split_once("://").map_or(filled, |(_, r)| r);
    let rest = &rest[rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len())..];
    let path = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    path.split(['/', '\\'])
        .any(|segment| {
            let s = segment.to_ascii_lowercase().replace("%2e", ".");
            s == "." || s == ".."
        })
        .then_some("a path segment is '.' or '..', which the URL's parser removes (with the segment before it for '..'), so the request would not ask for this operation's record")
}

/// Whether `name` is a placeholder the template language knows.
pub(crate) fn known_placeholder(name: &str) -> bool {
    matches!(name, "destination_key" | "scope" | "key")
        || name
            .strip_prefix("params.")
            .is_some_and(|p| !p.is_empty() && !p.contains(['{', '}', '/']))
}

fn pointer_ok(p: &str) -> bool {
    p.is_empty() || p.starts_with('/')
}

pub(super) fn validate(
    issues: &mut ConfigIssues,
    missing: &mut ConfigIssues,
    env: EnvLookup<'_>,
    path: &str,
    l: &mut RawLookup,
) -> Option<HttpLookupSpec> {
    let path = format!("{path}.lookup");
    let Some(url) = l.url.take() else {
        let stray = [
            ("method", l.method.is_some()),
            ("headers", !l.headers.is_empty()),
            ("not_found_status", l.not_found_status.is_some()),
            ("records", l.records.is_some()),
            ("match", !l.match_fields.is_empty()),
        ];
        for (field, set) in stray {
            if set {
                issues.push(
                    format!("{path}.{field}"),
                    "needs lookup.url (the HTTP lookup)",
                );
            }
        }
        return None;
    };
    let before = issues.0.len();
    let method = l.method.take().unwrap_or_else(|| "GET".to_owned());
    if !matches!(method.as_str(), "GET" | "POST" | "HEAD") {
        issues.push(
            format!("{path}.method"),
            format!("unknown method {method:?} (expected \"GET\", \"POST\" or \"HEAD\")"),
        );
    }
    check_url(issues, &path, &url);
    let headers = headers(issues, missing, env, &path, std::mem::take(&mut l.headers));
    let not_found_status = l.not_found_status.take().unwrap_or_else(|| vec![404]);
    // "No such record" lets the reconciler reject (and an agent retry under
    // a new key): only a client error can say it. A 2xx is the lookup
    // answering, a 3xx is not followed, a 5xx is the destination failing;
    // read as "absent", any of them would reject an action that was done.
    for (i, s) in not_found_status.iter().enumerate() {
        let why = match s {
            400..=499 => continue,
            100..=599 => format!(
                "{s} cannot mean \"no such record\": only a 4xx can (a 2xx is the lookup answering, a 5xx the destination failing; read as absent, a performed action would be rejected)"
            ),
            _ => format!("{s} is not an HTTP status"),
        };
        issues.push(format!("{path}.not_found_status[{i}]"), why);
    }
    let records = l.records.take();
    if records.as_deref().is_some_and(|p| !pointer_ok(p)) {
        issues.push(
            format!("{path}.records"),
            "must be a JSON pointer (\"\" or starting with '/', e.g. \"/items\")",
        );
    }
    let match_fields = std::mem::take(&mut l.match_fields);
    for (param, pointer) in &match_fields {
        if !pointer_ok(pointer) || pointer.is_empty() {
            issues.push(
                format!("{path}.match.{param}"),
                "must be a JSON pointer into the record, e.g. \"/sku\"",
            );
        }
    }
    // The reconciler confirms from the record this URL returns, so the URL
    // must ask for this operation's record. `match` only compares
    // parameters, which another operation can share.
    if let Some(why) = operation_not_named(&url) {
        issues.push(format!("{path}.url"), why);
    }
    (issues.0.len() == before).then_some(HttpLookupSpec {
        method,
        url,
        headers,
        not_found_status,
        records,
        match_fields,
    })
}

/// Why the URL does not ask the destination for this operation's record
/// by its identity, or `None` when it does. The identity is the destination
/// key (derived from scope and key) or both scope and key; parameters are
/// not one (two identical actions approved under two keys are two
/// operations with the same parameters). Only what is sent can narrow the
/// answer: the path and the query. A fragment is never sent (the
/// destination would answer the URL without it), and a placeholder in the
/// userinfo or the host picks where to ask, not which record. A template
/// that does not parse answers `None`: `check_url` reports it.
fn operation_not_named(url: &str) -> Option<String> {
    // Each placeholder filled with its own marker (lowercase letters and
    // digits, which a URL's parser keeps as they are, in a host too), so
    // the parsed URL shows where each one landed.
    let mut names = Vec::new();
    let filled = fill(url, |name| {
        names.push(name.to_owned());
        Ok(marker(names.len() - 1))
    })
    .ok()?;
    let parsed = reqwest::Url::parse(&filled).ok()?;
    if parsed.fragment().is_some() {
        return Some(
            "has a fragment ('#'): a fragment is never sent, so the destination would answer the URL without it (and a record found that way may be another operation's); put {destination_key}, or both {scope} and {key}, in the path or the query".to_owned(),
        );
    }
    let sent = |n: &str| {
        names.iter().enumerate().any(|(i, x)| {
            x == n && {
                let m = marker(i);
                parsed.path().contains(&m) || parsed.query().is_some_and(|q| q.contains(&m))
            }
        })
    };
    if sent("destination_key") || (sent("scope") && sent("key")) {
        return None;
    }
    let named = |n: &str| names.iter().any(|x| x == n);
    let elsewhere = if named("destination_key") || (named("scope") && named("key")) {
        " (here they sit in the userinfo or the host, which choose where to ask, not which record)"
    } else {
        ""
    };
    Some(format!(
        "must name the operation ({{destination_key}}, or both {{scope}} and {{key}}) in its path or query{elsewhere}: a record found by anything else (with or without lookup.match) may be another operation's, and would confirm this one"
    ))
}

/// The marker standing for the `i`th placeholder in `operation_not_named`.
fn marker(i: usize) -> String {
    format!("x0handover{i}ph0x")
}

fn check_url(issues: &mut ConfigIssues, path: &str, url: &str) {
    let filled = fill(url, |name| {
        if known_placeholder(name) {
            Ok("sample".to_owned())
        } else {
            Err(format!(
                "unknown placeholder {{{name}}} (use {{destination_key}}, {{scope}}, {{key}} or {{params.NAME}})"
            ))
        }
    });
    let error = match filled {
        Err(e) => Some(e),
        Ok(u) => match reqwest::Url::parse(&u) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {
                super::provider::credentials(&parsed).or_else(|| dot_segment(&u).map(Into::into))
            }
            Ok(_) => Some("must be an http:// or https:// URL".to_owned()),
            Err(e) => Some(format!("not a URL: {e}")),
        },
    };
    if let Some(e) = error {
        issues.push(format!("{path}.url"), e);
    }
}

/// Headers that carry a credential by definition (lower case): their value
/// is never written in the file.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
];

pub(super) fn headers(
    issues: &mut ConfigIssues,
    missing: &mut ConfigIssues,
    env: EnvLookup<'_>,
    path: &str,
    raw: BTreeMap<String, RawHeaderValue>,
) -> Vec<(String, LookupHeader)> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let at = format!("{path}.headers.{name}");
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            issues.push(&at, format!("{name:?} is not a valid header name"));
            continue;
        }
        let header = match value {
            RawHeaderValue::Literal(v) => {
                if CREDENTIAL_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    issues.push(
                        &at,
                        "a credential: write it as { env = \"VAR\", prefix = \"...\" }; secrets come from environment variables, never from this file",
                    );
                } else if reqwest::header::HeaderValue::from_str(&v).is_err() {
                    issues.push(&at, "not a valid header value");
                }
                LookupHeader::Literal(v)
            }
            RawHeaderValue::Env(e) => {
                if let Some(problem) = super::env_name_problem(&e.env) {
                    issues.push(format!("{at}.env"), problem);
                } else if let Some(why) = super::secret_missing(env, &e.env) {
                    missing.push(format!("{at}.env"), why);
                }
                LookupHeader::Env {
                    var: e.env,
                    prefix: e.prefix.unwrap_or_default(),
                }
            }
        };
        out.push((name, header));
    }
    out
}
