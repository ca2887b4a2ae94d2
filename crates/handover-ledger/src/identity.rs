//! Operation identity and approved parameters (DESIGN §3).
//!
//! An operation is identified by `(scope, key)`: the application's scope
//! (tenant, principal, workflow) and the logical request key chosen when the
//! user approved the action. Both are 1..=255 bytes of visible ASCII
//! (`0x21..=0x7E`). Parameters are stored in RFC 8785 (JCS) canonical form and
//! fingerprinted with SHA-256 over `{"action": …, "params": …}`, so member
//! order never changes identity; their numbers must be I-JSON (see
//! [`crate::ijson`]), so the stored form is exactly what was approved.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::error::ValidationError;

/// Maximum length in bytes of a scope, key or action name.
pub const MAX_IDENT_BYTES: usize = 255;

/// The longest free text an operation keeps (a reason, evidence): a record
/// is returned whole on every read and replay, so no caller stores
/// megabytes in one (params, results and metadata have their own limit).
/// Caller-chosen text past it is refused; a destination's is cut to it.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// The deepest JSON document any [`Limits`] admits: a stored document is
/// parsed back (for the executor, a replay, a read of the record) by a
/// parser that stops at 127 levels, with room left for the envelopes
/// around it.
pub const MAX_JSON_DEPTH: usize = 64;

fn validate_ident(field: &'static str, value: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if value.len() > MAX_IDENT_BYTES {
        return Err(ValidationError::new(
            field,
            format!(
                "must be at most {MAX_IDENT_BYTES} bytes, got {}",
                value.len()
            ),
        ));
    }
    if let Some((pos, b)) = value
        .bytes()
        .enumerate()
        .find(|(_, b)| !(0x21..=0x7E).contains(b))
    {
        return Err(ValidationError::new(
            field,
            format!("byte 0x{b:02x} at position {pos} is not visible ASCII (0x21..=0x7e)"),
        ));
    }
    Ok(())
}

macro_rules! ident {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            #[doc = concat!("Validates a ", $field, ": 1..=255 bytes of visible ASCII; the error names the field `", $field, "`.")]
            pub fn new(value: &str) -> Result<Self, ValidationError> {
                validate_ident($field, value)?;
                Ok(Self(Arc::from(value)))
            }

            /// The validated text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

ident!(
    /// The application-supplied scope of an operation (tenant, principal, workflow).
    Scope,
    "scope"
);
ident!(
    /// The logical request key of an operation, kept across retries and provider switches.
    Key,
    "key"
);
ident!(
    /// A client's name for one user task: every model call under it draws
    /// from one budget (see [`crate::TaskBudgets`]).
    TaskName,
    "task"
);
ident!(
    /// The name of a business action (e.g. `create_shipment`).
    ActionName,
    "action"
);

/// The identity of an operation: `(scope, key)`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct OperationId {
    /// Application scope.
    pub scope: Scope,
    /// Logical request key.
    pub key: Key,
}

impl OperationId {
    /// Validates both parts; the error names `scope` or `key`.
    pub fn new(scope: &str, key: &str) -> Result<Self, ValidationError> {
        Ok(Self {
            scope: Scope::new(scope)?,
            key: Key::new(key)?,
        })
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "scope={} key={}", self.scope, self.key)
    }
}

/// Size and nesting bounds for parameter and result documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum size of the canonical JSON text in bytes (default 64 KiB).
    pub max_params_bytes: usize,
    /// Maximum nesting depth: a scalar has depth 0, `{}`/`[]` depth 1,
    /// `{"a":[1]}` depth 2 (default 32). Values above
    /// [`MAX_JSON_DEPTH`] act as it.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_params_bytes: 64 * 1024,
            max_depth: 32,
        }
    }
}

/// Nesting depth of a JSON value: scalars 0, each array/object level adds 1.
pub(crate) fn json_depth(v: &serde_json::Value) -> usize {
    // Iterative so a hostile document cannot overflow the stack.
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            serde_json::Value::Array(items) => {
                max = max.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            serde_json::Value::Object(map) => {
                max = max.max(d + 1);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => max = max.max(d),
        }
    }
    max
}

/// Validates a JSON document against `limits` and I-JSON (see
/// [`crate::ijson`]) and returns its canonical text.
pub(crate) fn canonical_json(
    field: &'static str,
    v: &serde_json::Value,
    limits: &Limits,
) -> Result<String, ValidationError> {
    let depth = json_depth(v);
    let max_depth = limits.max_depth.min(MAX_JSON_DEPTH);
    if depth > max_depth {
        return Err(ValidationError::new(
            field,
            format!("nesting depth {depth} exceeds the limit of {max_depth}"),
        ));
    }
    crate::ijson::check_value(field, v)?;
    let text = crate::jcs::to_string(v);
    if text.len() > limits.max_params_bytes {
        return Err(ValidationError::new(
            field,
            format!(
                "canonical size {} bytes exceeds the limit of {} bytes",
                text.len(),
                limits.max_params_bytes
            ),
        ));
    }
    Ok(text)
}

/// SHA-256 over the canonical JSON of `{"action": …, "params": …}`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// Fingerprint of an action and canonical parameter text.
    pub fn compute(action: &ActionName, canonical_params: &str) -> Self {
        let mut h = Sha256::new();
        // "action" sorts before "params", so this concatenation is exactly
        // the RFC 8785 form of the wrapper object.
        h.update(b"{\"action\":");
        h.update(
            serde_json::to_string(action.as_str())
                .unwrap_or_default()
                .as_bytes(),
        );
        h.update(b",\"params\":");
        h.update(canonical_params.as_bytes());
        h.update(b"}");
        Self(h.finalize().into())
    }

    /// Parses 64 lowercase or uppercase hex digits.
    pub fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hi = (chunk[0] as char).to_digit(16)?;
            let lo = (chunk[1] as char).to_digit(16)?;
            out[i] = u8::try_from(hi * 16 + lo).ok()?;
        }
        Some(Self(out))
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    // On every record written (its fingerprint column): a table, not `fmt`.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl serde::Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The destination idempotency key of an operation.
///
/// `"ho1-"` followed by the first 32 hex digits (128 bits) of
/// `SHA-256("handover/destination-key/v1" 0x00 scope 0x00 key)`. It depends on
/// the identity only, so every re-send of the same operation — by any
/// executor, after any provider switch — carries the same key, and two
/// operations never share one. The `ho1-` prefix versions the derivation.
pub fn destination_key(id: &OperationId) -> String {
    let mut h = Sha256::new();
    h.update(b"handover/destination-key/v1");
    h.update([0u8]);
    h.update(id.scope.as_str().as_bytes());
    h.update([0u8]);
    h.update(id.key.as_str().as_bytes());
    let digest: [u8; 32] = h.finalize().into();
    format!("ho1-{}", hex(&digest[..16]))
}

/// A validated request to perform one business action.
///
/// ```
/// use handover_ledger::{Limits, OperationRequest};
/// use serde_json::json;
///
/// let a = OperationRequest::new("tenant-1", "K-701", "create_shipment",
///     &json!({"order": 42, "carrier": "dhl"}), &Limits::default())?;
/// let b = OperationRequest::new("tenant-1", "K-701", "create_shipment",
///     &json!({"carrier": "dhl", "order": 42}), &Limits::default())?;
/// assert_eq!(a.fingerprint(), b.fingerprint()); // member order is irrelevant
/// assert_eq!(a.canonical_params(), r#"{"carrier":"dhl","order":42}"#);
///
/// let err = OperationRequest::new("tenant 1", "K-701", "create_shipment",
///     &json!({}), &Limits::default()).unwrap_err();
/// assert_eq!(err.field(), "scope");
/// # Ok::<(), handover_ledger::ValidationError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRequest {
    id: OperationId,
    action: ActionName,
    params: Arc<str>,
    fingerprint: Fingerprint,
}

impl OperationRequest {
    /// Validates identity, action and parameters; nothing is written anywhere.
    pub fn new(
        scope: &str,
        key: &str,
        action: &str,
        params: &serde_json::Value,
        limits: &Limits,
    ) -> Result<Self, ValidationError> {
        let id = OperationId::new(scope, key)?;
        let action = ActionName::new(action)?;
        Self::from_parts(id, action, params, limits)
    }

    /// Like [`OperationRequest::new`] with already validated identity parts.
    pub fn from_parts(
        id: OperationId,
        action: ActionName,
        params: &serde_json::Value,
        limits: &Limits,
    ) -> Result<Self, ValidationError> {
        let canonical = canonical_json("params", params, limits)?;
        let fingerprint = Fingerprint::compute(&action, &canonical);
        Ok(Self {
            id,
            action,
            params: Arc::from(canonical),
            fingerprint,
        })
    }

    /// The operation identity.
    pub fn id(&self) -> &OperationId {
        &self.id
    }

    /// The action name.
    pub fn action(&self) -> &ActionName {
        &self.action
    }

    /// An owned copy of the canonical parameters.
    pub fn params(&self) -> serde_json::Value {
        serde_json::from_str(&self.params).unwrap_or(serde_json::Value::Null)
    }

    /// The canonical (RFC 8785) parameter text.
    pub fn canonical_params(&self) -> &str {
        &self.params
    }

    /// SHA-256 over `{action, params}`.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The destination idempotency key of this operation.
    pub fn destination_key(&self) -> String {
        destination_key(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::{Fingerprint, OperationId, destination_key};

    #[test]
    fn destination_keys_and_fingerprints_are_lower_case_hex_of_their_digest() {
        // sha256("handover/destination-key/v1\0acme\0order-42")[..16], by
        // Python's hashlib: a key destinations may already hold must not change.
        let id = OperationId::new("acme", "order-42").unwrap();
        assert_eq!(destination_key(&id), "ho1-70d4290dc113fdacddb5d10315252060");
        let fp = Fingerprint(std::array::from_fn(|i| (i * 17) as u8));
        let text = fp.to_string();
        assert_eq!(&text[..8], "00112233");
        assert_eq!(&text[56..], "dcedfe0f");
        assert_eq!(Fingerprint::from_hex(&text), Some(fp));
    }
}
