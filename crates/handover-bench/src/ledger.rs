//! The `ledger` benchmark (not yet implemented).

use crate::{BenchResult, args::Args};

/// Runs the `ledger` benchmark.
pub(crate) async fn run(_args: Args) -> BenchResult {
    Err("the ledger benchmark is not implemented yet".into())
}
