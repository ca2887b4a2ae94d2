//! The `adapter` benchmark (not yet implemented).

use crate::{BenchResult, args::Args};

/// Runs the `adapter` benchmark.
pub(crate) async fn run(_args: Args) -> BenchResult {
    Err("the adapter benchmark is not implemented yet".into())
}
