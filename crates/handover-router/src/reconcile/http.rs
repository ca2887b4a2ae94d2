//! The HTTP lookup Handover runs itself, from `[actions.NAME.lookup]`
//! (`url`, `method`, `headers`, `not_found_status`, `records`, `match`):
//! one more [`Lookup`], usable from Rust like an application's own.
//!
//! Reading the answer: a status in `not_found_status` is "no record"; a 2xx
//! answer carries the records (the list at the `records` JSON pointer, or
//! the whole body as one record); anything else — another status, a body
//! that is not JSON, a pointer that does not lead to a list, a transport
//! error, a placeholder whose parameter is missing — is a failed lookup,
//! which proves nothing. A record's fields named under `match` are
//! compared with the approved parameters by the reconciler: any
//! difference is a divergence for review.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use reqwest::header::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::{FoundRecord, Lookup, LookupContext};
use crate::answer_body::{self, Capped, DESTINATION_BODY_BYTES};
use crate::config::validate::lookup::{dot_segment, fill};
use crate::config::{Config, ConfigIssues, HttpLookupSpec, LookupHeader};
use crate::error::RouterError;

/// An HTTP lookup built from an action's configuration. Cheap to clone.
#[derive(Clone)]
pub struct HttpLookup(Arc<Inner>);

struct Inner {
    client: reqwest::Client,
    method: reqwest::Method,
    url: String,
    headers: Vec<(HeaderName, Header)>,
    not_found: Vec<u16>,
    records: Option<String>,
    match_fields: BTreeMap<String, String>,
}

enum Header {
    Literal(HeaderValue),
    /// Read from the environment once; only ever written into a request.
    Secret {
        prefix: String,
        secret: SecretString,
    },
}

impl fmt::Debug for HttpLookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpLookup")
            .field("method", &self.0.method)
            .field("url", &self.0.url)
            .field("headers", &names)
            .finish_non_exhaustive()
    }
}

impl HttpLookup {
    /// The lookup `spec` declares, with header secrets read through `env`
    /// now (an unset variable is an error naming its path), sending with
    /// `client`.
    pub fn from_spec(
        path: &str,
        spec: &HttpLookupSpec,
        env: &dyn Fn(&str) -> Option<String>,
        client: reqwest::Client,
    ) -> Result<Self, RouterError> {
        let mut issues = ConfigIssues::default();
        let mut headers = Vec::with_capacity(spec.headers.len());
        for (name, value) in &spec.headers {
            let at = format!("{path}.headers.{name}");
            let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
                issues.push(&at, "not a valid header name");
                continue;
            };
            let header = match value {
                LookupHeader::Literal(v) => match HeaderValue::from_str(v) {
                    Ok(v) => Header::Literal(v),
                    Err(_) => {
                        issues.push(&at, "not a valid header value");
                        continue;
                    }
                },
                LookupHeader::Env { var, prefix } => match env(var).filter(|v| !v.is_empty()) {
                    Some(secret) => Header::Secret {
                        prefix: prefix.clone(),
                        secret: SecretString::from(secret),
                    },
                    None => {
                        issues.push(
                            format!("{at}.env"),
                            format!("environment variable {var} is not set"),
                        );
                        continue;
                    }
                },
            };
            headers.push((name, header));
        }
        let method = reqwest::Method::from_bytes(spec.method.as_bytes()).unwrap_or_else(|_| {
            issues.push(format!("{path}.method"), "not an HTTP method");
            reqwest::Method::GET
        });
        if !issues.is_empty() {
            return Err(RouterError::Config(issues));
        }
        Ok(Self(Arc::new(Inner {
            client,
            method,
            url: spec.url.clone(),
            headers,
            not_found: spec.not_found_status.clone(),
            records: spec.records.clone(),
            match_fields: spec.match_fields.clone(),
        })))
    }

    /// Every HTTP lookup `config` declares, by action name.
    pub fn from_config(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, Self)>, RouterError> {
        let client = reqwest::Client::builder()
            // Not followed: a redirect to a page that answers a
            // `not_found_status` would read as "no record" (and allow a
            // re-send), and the lookup's secret headers would go along.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| RouterError::Internal(format!("building the lookup HTTP client: {e}")))?;
        config
            .actions()
            .iter()
            .filter_map(|(name, a)| a.http_lookup.as_ref().map(|spec| (name, spec)))
            .map(|(name, spec)| {
                let path = format!("actions.{name}.lookup");
                Self::from_spec(&path, spec, env, client.clone()).map(|l| (name.clone(), l))
            })
            .collect()
    }

    fn request(&self, ctx: &LookupContext) -> Result<reqwest::RequestBuilder, String> {
        let url = fill(&self.0.url, |name| placeholder(ctx, name))
            .map_err(|e| format!("lookup URL: {e}"))?;
        if let Some(why) = dot_segment(&url) {
            return Err(format!("lookup URL, filled for this operation: {why}"));
        }
        let mut req = self.0.client.request(self.0.method.clone(), url);
        for (name, header) in &self.0.headers {
            let value = match header {
                Header::Literal(v) => v.clone(),
                Header::Secret { prefix, secret } => {
                    let mut v =
                        HeaderValue::from_str(&format!("{prefix}{}", secret.expose_secret()))
                            .map_err(|_| {
                                format!("header {name}: the secret is not a valid header value")
                            })?;
                    v.set_sensitive(true);
                    v
                }
            };
            req = req.header(name.clone(), value);
        }
        Ok(req)
    }

    async fn run(self, ctx: LookupContext) -> Result<Vec<FoundRecord>, String> {
        let mut resp = self
            .request(&ctx)?
            .send()
            .await
            .map_err(|e| format!("lookup request failed: {}", e.without_url()))?;
        let status = resp.status().as_u16();
        if self.0.not_found.contains(&status) {
            return Ok(Vec::new());
        }
        if !resp.status().is_success() {
            return Err(format!("lookup answered HTTP {status}"));
        }
        let body = match answer_body::read(&mut resp, DESTINATION_BODY_BYTES).await {
            Ok(Capped::Whole(body)) => body,
            Ok(Capped::Cut(_)) => {
                return Err(format!(
                    "lookup answer is over {DESTINATION_BODY_BYTES} bytes: not read, proves nothing"
                ));
            }
            Err(e) => {
                return Err(format!(
                    "lookup answer could not be read: {}",
                    e.without_url()
                ));
            }
        };
        let body: Value =
            serde_json::from_slice(&body).map_err(|e| format!("lookup answer is not JSON: {e}"))?;
        let records = match self.0.records.as_deref() {
            None | Some("") => vec![body],
            Some(p) => match body.pointer(p) {
                Some(Value::Array(list)) => list.clone(),
                Some(Value::Null) | None => {
                    return Err(format!("lookup answer has no list at {p:?}"));
                }
                Some(_) => return Err(format!("lookup answer's {p:?} is not a list")),
            },
        };
        Ok(records
            .into_iter()
            .map(|record| FoundRecord {
                params: self.as_params(&ctx.params, &record),
                result: record,
            })
            .collect())
    }

    fn as_params(&self, approved: &Value, record: &Value) -> Value {
        as_params(&self.0.match_fields, approved, record)
    }
}

/// The approved parameters with every `match` field replaced by the
/// record's value: equal to the approved ones exactly when they agree.
///
/// **Absent and `null` are the same, on both sides**: a field the
/// approved parameters leave out or set to `null` agrees with a record
/// that leaves it out or holds `null` there (the approved form is kept as
/// it is), and with nothing else; a value on one side and none on the
/// other diverges. (Before, an approved `qty: null` was confirmed by a
/// record without `qty` while approved parameters without `qty` diverged
/// from the same record.)
fn as_params(match_fields: &BTreeMap<String, String>, approved: &Value, record: &Value) -> Value {
    let mut params = approved.clone();
    if let Value::Object(map) = &mut params {
        for (param, pointer) in match_fields {
            let found = record.pointer(pointer).filter(|v| !v.is_null());
            let wanted = map.get(param).filter(|v| !v.is_null());
            if found.is_none() && wanted.is_none() {
                continue;
            }
            map.insert(param.clone(), found.cloned().unwrap_or(Value::Null));
        }
    }
    params
}

impl Lookup for HttpLookup {
    fn lookup(&self, ctx: LookupContext) -> BoxFuture<'static, Result<Vec<FoundRecord>, String>> {
        Box::pin(self.clone().run(ctx))
    }
}

fn placeholder(ctx: &LookupContext, name: &str) -> Result<String, String> {
    let raw = match name {
        "destination_key" => ctx.destination_key.clone(),
        "scope" => ctx.operation.scope.as_str().to_owned(),
        "key" => ctx.operation.key.as_str().to_owned(),
        _ => {
            let param = name
                .strip_prefix("params.")
                .ok_or_else(|| format!("unknown placeholder {{{name}}}"))?;
            match ctx.params.get(param) {
                Some(Value::String(s)) => s.clone(),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
                Some(_) => {
                    return Err(format!(
                        "parameter {param:?} is not a string, number or bool"
                    ));
                }
                None => return Err(format!("the approved parameters have no {param:?}")),
            }
        }
    };
    Ok(encode(&raw))
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so a
/// value can never change the URL's structure.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> BTreeMap<String, String> {
        [("order", "/order"), ("qty", "/qty")]
            .into_iter()
            .map(|(p, ptr)| (p.to_owned(), ptr.to_owned()))
            .collect()
    }

    /// Whether the record confirms the approved parameters (the
    /// reconciler's comparison: equal as JSON).
    fn agrees(approved: Value, record: Value) -> bool {
        as_params(&fields(), &approved, &record) == approved
    }

    #[test]
    fn absent_and_null_are_the_same_on_both_sides() {
        for approved in [json!({"order": "A"}), json!({"order": "A", "qty": null})] {
            for record in [json!({"order": "A"}), json!({"order": "A", "qty": null})] {
                assert!(
                    agrees(approved.clone(), record.clone()),
                    "{approved} vs {record}"
                );
            }
        }
    }

    #[test]
    fn a_value_on_one_side_only_or_another_value_diverges() {
        assert!(!agrees(
            json!({"order": "A"}),
            json!({"order": "A", "qty": 2})
        ));
        assert!(!agrees(
            json!({"order": "A", "qty": null}),
            json!({"order": "A", "qty": 2})
        ));
        assert!(!agrees(
            json!({"order": "A", "qty": 2}),
            json!({"order": "A"})
        ));
        assert!(!agrees(
            json!({"order": "A", "qty": 2}),
            json!({"order": "A", "qty": null})
        ));
        assert!(!agrees(
            json!({"order": "A", "qty": 2}),
            json!({"order": "A", "qty": 3})
        ));
        assert!(agrees(
            json!({"order": "A", "qty": 2}),
            json!({"order": "A", "qty": 2, "id": "r"})
        ));
    }

    #[test]
    fn fields_outside_match_are_not_compared() {
        let approved = json!({"order": "A", "note": "fragile"});
        assert!(agrees(approved, json!({"order": "A", "note": "other"})));
    }
}
