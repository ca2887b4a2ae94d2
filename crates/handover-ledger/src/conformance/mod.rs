//! Conformance suite (placeholder).
