//! Placeholder: see the issue that builds this crate.
