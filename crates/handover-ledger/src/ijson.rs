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

/// One step of a JSON path.
#[derive(Clone, Copy, Debug)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Writes `root` and `steps` as a path: `params.items[2].batch`,
/// `result["odd key"]`, `body` for the root of a bare text.
fn path<'a>(root: &str, steps: impl IntoIterator<Item = Step<'a>>) -> String {
    let mut p = root.to_owned();
    for step in steps {
        match step {
            Step::Index(i) => {
                let _ = write!(p, "[{i}]");
            }
            Step::Key(k)
                if !k.is_empty()
                    && !k.starts_with(|c: char| c.is_ascii_digit())
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                if !p.is_empty() {
                    p.push('.');
                }
                p.push_str(k);
            }
            Step::Key(k) => {
                let quoted = serde_json::to_string(k).unwrap_or_default();
                let _ = write!(p, "[{quoted}]");
            }
        }
    }
    if p.is_empty() { "body".to_owned() } else { p }
}

fn integer_out_of_range(text: &str) -> String {
    format!(
        "integer {text} is outside ±(2^53−1) and cannot be recorded exactly \
         (I-JSON, RFC 7493); send it as a string"
    )
}

/// Why a number given as a double (what a `serde_json::Value` holds) cannot
/// be recorded exactly, if it cannot.
fn check_double(x: f64) -> Result<(), String> {
    let integral_literal = x.fract() == 0.0 && x.abs() < INTEGER_NOTATION_BELOW;
    if integral_literal && x.abs() > MAX_EXACT_DOUBLE {
        return Err(integer_out_of_range(&format!("{x:.0}")));
    }
    Ok(())
}

fn check_number(n: &serde_json::Number) -> Result<(), String> {
    let exact = match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => Some(i.unsigned_abs()),
        (None, Some(u)) => Some(u),
        (None, None) => None,
    };
    match exact {
        Some(m) if m > MAX_EXACT_INTEGER => Err(integer_out_of_range(&n.to_string())),
        Some(_) => Ok(()),
        None => check_double(n.as_f64().unwrap_or(0.0)),
    }
}

/// Checks every number in `v`; the error's field is the number's path
/// below `root` (built only when one is refused).
pub(crate) fn check_value(root: &str, v: &serde_json::Value) -> Result<(), ValidationError> {
    use serde_json::Value;
    // Iterative, like the depth check: a hostile document cannot overflow
    // the stack. `steps[i]` = (parent, step) of the i-th container or number.
    let mut steps: Vec<(usize, Option<Step<'_>>)> = vec![(0, None)];
    let mut todo = vec![(0, v)];
    while let Some((at, v)) = todo.pop() {
        let children: Box<dyn Iterator<Item = (Step<'_>, &Value)>> = match v {
            Value::Number(n) => {
                let Err(reason) = check_number(n) else {
                    continue;
                };
                let mut chain = Vec::new();
                let mut i = at;
                while let (parent, Some(step)) = steps[i] {
                    chain.push(step);
                    i = parent;
                }
                return Err(ValidationError::new(
                    path(root, chain.into_iter().rev()),
                    reason,
                ));
            }
            Value::Array(items) => {
                Box::new(items.iter().enumerate().map(|(i, v)| (Step::Index(i), v)))
            }
            Value::Object(map) => Box::new(map.iter().map(|(k, v)| (Step::Key(k), v))),
            _ => continue,
        };
        for (step, child) in children {
            if matches!(child, Value::Number(_) | Value::Array(_) | Value::Object(_)) {
                steps.push((at, Some(step)));
                todo.push((steps.len() - 1, child));
            }
        }
    }
    Ok(())
}

/// Checks the numbers of a JSON text as written, before a parser rounds
/// them: every number must be recordable exactly (see the module docs);
/// and, as I-JSON asks, no object names a member twice (parsers disagree
/// on which of two counts, so what was approved would be ambiguous).
/// The error names the path of the number or member from the document's
/// root (`params.items[2].batch`). Other syntax is not checked here (parse
/// the text as well); a malformed text may pass.
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
/// let e = validate_json_text(r#"{"params": {"qty": 1, "qty": 100}}"#).unwrap_err();
/// assert_eq!(e.field(), "params.qty");
/// ```
pub fn validate_json_text(text: &str) -> Result<(), ValidationError> {
    scan::numbers(text, check_token)
}

/// Why one number token cannot be recorded exactly, if it cannot.
fn check_token(token: &str) -> Result<(), String> {
    let is_integer_literal = !token.contains(['.', 'e', 'E']);
    let Ok(x) = token.parse::<f64>() else {
        return Err(format!("{token} is not a number"));
    };
    if !x.is_finite() {
        return Err(format!(
            "number {token} is beyond the range of a double (I-JSON, RFC 7493)"
        ));
    }
    // Fast path: short integers are exact.
    if is_integer_literal && token.trim_start_matches('-').len() < 16 {
        return Ok(());
    }
    // A double halfway between two shortest spellings has two: the ledger
    // records ECMAScript's (`ryu-js`: the even one, as V8, Python and
    // serde_json write it), Rust's own formatter writes the upper one. Both
    // read back as the same double, so either is the number exactly.
    let mut ecma = ryu_js::Buffer::new();
    let recorded = ecma.format_finite(x);
    let exact = same_decimal(token, recorded) || same_decimal(token, &format!("{x:e}"));
    if is_integer_literal && !exact {
        return Err(integer_out_of_range(token));
    }
    if !exact {
        return Err(format!(
            "number {token} cannot be recorded exactly (it would become {recorded}); \
             send it as a string"
        ));
    }
    check_double(x)
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

/// A minimal walk over JSON text that checks each number token and names
/// the path of the first refused one. It trusts the text's syntax (a parser
/// checks that separately).
mod scan {
    use std::borrow::Cow;
    use std::collections::HashSet;

    use super::{Step, path};
    use crate::error::ValidationError;

    enum Frame<'a> {
        /// The raw (still escaped, quoted) key of the current member, and
        /// the (unescaped) names of the members so far.
        Object(Option<&'a str>, HashSet<Cow<'a, str>>),
        Array(usize),
    }

    /// A raw quoted key, unescaped (borrowed when it has no escapes).
    fn unescaped(raw: &str) -> Cow<'_, str> {
        match raw.get(1..raw.len().saturating_sub(1)) {
            Some(inner) if !inner.contains('\\') => Cow::Borrowed(inner),
            _ => Cow::Owned(serde_json::from_str(raw).unwrap_or_default()),
        }
    }

    /// The path of the value that starts at the current position.
    fn value_path(stack: &[Frame<'_>]) -> String {
        let keys: Vec<String> = stack
            .iter()
            .map(|f| match f {
                Frame::Object(raw, _) => unescaped(raw.unwrap_or("\"\"")).into_owned(),
                Frame::Array(_) => String::new(),
            })
            .collect();
        let steps = stack.iter().zip(&keys).map(|(f, k)| match f {
            Frame::Object(..) => Step::Key(k),
            Frame::Array(i) => Step::Index(*i),
        });
        path("", steps)
    }

    /// After a value ends: the next array element gets the next index.
    fn value_done(stack: &mut [Frame<'_>]) {
        if let Some(Frame::Array(next)) = stack.last_mut() {
            *next += 1;
        }
    }

    /// The raw string (with its quotes) starting at `start`, and the index after it.
    fn string(text: &str, start: usize) -> (&str, usize) {
        let bytes = text.as_bytes();
        let mut i = start + 1;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let end = (i + 1).min(text.len());
        (text.get(start..end).unwrap_or("\"\""), end)
    }

    /// The index after the run of bytes at `start` that `part` accepts.
    fn run(text: &str, start: usize, part: fn(u8) -> bool) -> usize {
        text.as_bytes()[start..]
            .iter()
            .position(|b| !part(*b))
            .map_or(text.len(), |n| start + n)
    }

    pub(super) fn numbers(
        text: &str,
        check: fn(&str) -> Result<(), String>,
    ) -> Result<(), ValidationError> {
        let bytes = text.as_bytes();
        let mut stack: Vec<Frame<'_>> = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => stack.push(Frame::Object(None, HashSet::new())),
                b'[' => stack.push(Frame::Array(0)),
                b'}' | b']' => {
                    stack.pop();
                    value_done(&mut stack);
                }
                b',' => {
                    if let Some(Frame::Object(key, _)) = stack.last_mut() {
                        *key = None;
                    }
                }
                b'"' => {
                    let (raw, end) = string(text, i);
                    match stack.last_mut() {
                        Some(Frame::Object(key @ None, seen)) => {
                            *key = Some(raw);
                            if !seen.insert(unescaped(raw)) {
                                return Err(ValidationError::new(
                                    value_path(&stack),
                                    "member name given twice: parsers disagree on which one counts \
                                     (I-JSON, RFC 7493, forbids it)",
                                ));
                            }
                        }
                        _ => value_done(&mut stack),
                    }
                    i = end;
                    continue;
                }
                b'-' | b'0'..=b'9' => {
                    let end = run(text, i, |b| b.is_ascii_digit() || b"+-.eE".contains(&b));
                    if let Err(reason) = check(&text[i..end]) {
                        return Err(ValidationError::new(value_path(&stack), reason));
                    }
                    value_done(&mut stack);
                    i = end;
                    continue;
                }
                b't' | b'f' | b'n' => {
                    i = run(text, i, |b| b.is_ascii_alphabetic());
                    value_done(&mut stack);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }
}
