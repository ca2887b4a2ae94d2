//! Numbers the ledger records follow I-JSON (RFC 7493): what is approved,
//! handed to the executor, recorded and replayed is exactly one number,
//! never a silently rounded one.
//!
//! RFC 8785 (JCS), the canonical form parameters and results are stored
//! and fingerprinted in, writes every number as the IEEE-754 double it
//! denotes, in the shortest text that reads back as that double. A number
//! is therefore refused, with an error naming its JSON path
//! (`params.items[2].batch`), when
//! * its canonical text is an integer outside ±(2^53−1)
//!   (`9007199254740993`, `12345678901234567891`, `1e19`): parsers differ on
//!   such integers, and two of them can share one double (so they would
//!   share a fingerprint and replay each other); or
//! * (for JSON text, [`validate_json_text`]) its text is not exactly the
//!   number its double stands for (`3.14159265358979323846`): storing it
//!   would change it.
//!
//! Anything else (`0.1`, `-0`, `1.5e300`) is stored as its canonical text
//! and reads back as the same number. Send values that need more (big
//! integers, exact decimals) as strings.

use std::fmt::Write;

use crate::error::ValidationError;

/// The largest integer every I-JSON reader holds exactly: 2^53 − 1.
pub const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// [`MAX_EXACT_INTEGER`] as a double (exact: it is below 2^53).
const MAX_EXACT_DOUBLE: f64 = 9_007_199_254_740_991.0;

/// JCS writes integral doubles below this magnitude as integer literals.
const INTEGER_NOTATION_BELOW: f64 = 1e21;

/// A JSON path under construction: `params`, `params.items[2].batch`,
/// `result["odd key"]`.
#[derive(Clone, Debug)]
pub(crate) struct Path(String);

impl Path {
    pub(crate) fn root(field: &str) -> Self {
        Self(field.to_owned())
    }

    fn key(&self, key: &str) -> Self {
        let mut p = self.0.clone();
        let plain = !key.is_empty()
            && !key.starts_with(|c: char| c.is_ascii_digit())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if plain {
            if !p.is_empty() {
                p.push('.');
            }
            p.push_str(key);
        } else {
            let quoted = serde_json::to_string(key).unwrap_or_default();
            let _ = write!(p, "[{quoted}]");
        }
        Self(p)
    }

    fn index(&self, i: usize) -> Self {
        let mut p = self.0.clone();
        let _ = write!(p, "[{i}]");
        Self(p)
    }

    fn refuse(&self, reason: String) -> ValidationError {
        let field = if self.0.is_empty() { "body" } else { &self.0 };
        ValidationError::new(field.to_owned(), reason)
    }
}

fn integer_out_of_range(path: &Path, text: &str) -> ValidationError {
    path.refuse(format!(
        "integer {text} is outside ±(2^53−1) and cannot be recorded exactly \
         (I-JSON, RFC 7493); send it as a string"
    ))
}

/// Checks a number given as a double (what a `serde_json::Value` holds).
fn check_double(path: &Path, x: f64) -> Result<(), ValidationError> {
    let integral_literal = x.fract() == 0.0 && x.abs() < INTEGER_NOTATION_BELOW;
    if integral_literal && x.abs() > MAX_EXACT_DOUBLE {
        return Err(integer_out_of_range(path, &format!("{x:.0}")));
    }
    Ok(())
}

/// Checks every number in `v`; the error names the path below `path`.
pub(crate) fn check_value(path: &Path, v: &serde_json::Value) -> Result<(), ValidationError> {
    // Iterative, like the depth check: a hostile document cannot overflow the stack.
    let mut stack = vec![(path.clone(), v)];
    while let Some((path, v)) = stack.pop() {
        match v {
            serde_json::Value::Number(n) => check_number(&path, n)?,
            serde_json::Value::Array(items) => {
                stack.extend(
                    items
                        .iter()
                        .enumerate()
                        .rev()
                        .map(|(i, v)| (path.index(i), v)),
                );
            }
            serde_json::Value::Object(map) => {
                stack.extend(map.iter().rev().map(|(k, v)| (path.key(k), v)));
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_number(path: &Path, n: &serde_json::Number) -> Result<(), ValidationError> {
    let exact = match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => Some(i.unsigned_abs()),
        (None, Some(u)) => Some(u),
        (None, None) => None,
    };
    match exact {
        Some(m) if m > MAX_EXACT_INTEGER => Err(integer_out_of_range(path, &n.to_string())),
        Some(_) => Ok(()),
        None => check_double(path, n.as_f64().unwrap_or(0.0)),
    }
}

/// Checks the numbers of a JSON text as written, before a parser rounds
/// them: every number must be recordable exactly (see the module docs).
/// The error names the number's path from the document's root
/// (`params.items[2].batch`). Other syntax is not checked here (parse the
/// text as well); a malformed text may pass.
///
/// ```
/// use handover_ledger::validate_json_text;
///
/// assert!(validate_json_text(r#"{"params": {"qty": 1, "price": 0.1}}"#).is_ok());
/// let e = validate_json_text(r#"{"params": {"items": [{}, {}, {"batch": 9007199254740993}]}}"#)
///     .unwrap_err();
/// assert_eq!(e.field(), "params.items[2].batch");
/// let e = validate_json_text(r#"{"result": {"pi": 3.14159265358979323846}}"#).unwrap_err();
/// assert_eq!(e.field(), "result.pi");
/// ```
pub fn validate_json_text(text: &str) -> Result<(), ValidationError> {
    scan::numbers(text, check_token)
}

/// Checks one number token.
fn check_token(path: &Path, token: &str) -> Result<(), ValidationError> {
    let is_integer_literal = !token.contains(['.', 'e', 'E']);
    let Ok(x) = token.parse::<f64>() else {
        return Err(path.refuse(format!("{token} is not a number")));
    };
    if !x.is_finite() {
        return Err(path.refuse(format!(
            "number {token} is beyond the range of a double (I-JSON, RFC 7493)"
        )));
    }
    let exact = same_decimal(token, &format!("{x:e}"));
    if is_integer_literal && !exact {
        return Err(integer_out_of_range(path, token));
    }
    if !exact {
        return Err(path.refuse(format!(
            "number {token} cannot be recorded exactly (it would become {x}); \
             send it as a string"
        )));
    }
    check_double(path, x)
}

/// A decimal number as `(negative, significant digits, exponent)`, with
/// value `0.DIGITS × 10^exponent`; zero is `(false, "", 0)`.
fn decimal(text: &str) -> (bool, String, i64) {
    let (neg, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = int.chars().chain(frac.chars()).collect();
    let point = i64::try_from(int.len()).unwrap_or(i64::MAX);
    let lead = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    if significant.is_empty() {
        return (false, String::new(), 0);
    }
    let lead = i64::try_from(lead).unwrap_or(0);
    (neg, significant.to_owned(), exp + point - lead)
}

/// Whether two number texts denote the same decimal value (`-0` = `0`).
fn same_decimal(a: &str, b: &str) -> bool {
    decimal(a) == decimal(b)
}

/// A minimal walk over JSON text that reports each number token with its
/// path. It trusts the text's syntax (a parser checks that separately).
mod scan {
    use super::Path;
    use crate::error::ValidationError;

    enum Frame {
        Object { path: Path, key: Option<String> },
        Array { path: Path, next: usize },
    }

    /// The path of the value that starts at the current position.
    fn value_path(stack: &[Frame]) -> Path {
        match stack.last() {
            None => Path::root(""),
            Some(Frame::Object { path, key }) => path.key(key.as_deref().unwrap_or("")),
            Some(Frame::Array { path, next }) => path.index(*next),
        }
    }

    /// After a value ends: the next array element gets the next index.
    fn value_done(stack: &mut [Frame]) {
        if let Some(Frame::Array { next, .. }) = stack.last_mut() {
            *next += 1;
        }
    }

    /// The end of the string starting at `start` (the opening quote), and its text.
    fn string(text: &str, start: usize) -> (usize, String) {
        let bytes = text.as_bytes();
        let mut i = start + 1;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let raw = text.get(start..=i.min(text.len() - 1)).unwrap_or("\"\"");
        (i + 1, serde_json::from_str(raw).unwrap_or_default())
    }

    pub(super) fn numbers(
        text: &str,
        mut on_number: impl FnMut(&Path, &str) -> Result<(), ValidationError>,
    ) -> Result<(), ValidationError> {
        let bytes = text.as_bytes();
        let mut stack: Vec<Frame> = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    let path = value_path(&stack);
                    stack.push(Frame::Object { path, key: None });
                    i += 1;
                }
                b'[' => {
                    let path = value_path(&stack);
                    stack.push(Frame::Array { path, next: 0 });
                    i += 1;
                }
                b'}' | b']' => {
                    stack.pop();
                    value_done(&mut stack);
                    i += 1;
                }
                b'"' => {
                    let (end, s) = string(text, i);
                    let is_key = matches!(stack.last(), Some(Frame::Object { key: None, .. }));
                    match stack.last_mut() {
                        Some(Frame::Object { key, .. }) if is_key => *key = Some(s),
                        _ => value_done(&mut stack),
                    }
                    i = end;
                }
                b',' => {
                    if let Some(Frame::Object { key, .. }) = stack.last_mut() {
                        *key = None;
                    }
                    i += 1;
                }
                b'-' | b'0'..=b'9' => {
                    let end = text[i..]
                        .find(|c: char| {
                            !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
                        })
                        .map_or(text.len(), |n| i + n);
                    on_number(&value_path(&stack), &text[i..end])?;
                    value_done(&mut stack);
                    i = end;
                }
                b't' | b'f' | b'n' => {
                    let end = text[i..]
                        .find(|c: char| !c.is_ascii_alphabetic())
                        .map_or(text.len(), |n| i + n);
                    value_done(&mut stack);
                    i = end;
                }
                _ => i += 1,
            }
        }
        Ok(())
    }
}
