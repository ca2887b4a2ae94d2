//! The loss-of-confirmation proof suite (issue 7): end-to-end scenarios
//! through the `handover` facade, with real HTTP mock providers and a real
//! HTTP mock destination (`handover-testkit`), and the ledger on every
//! backend.
//!
//! Each scenario is an `async fn(Run)`: it arranges the fault, plays the
//! user's story, and asserts the destination's effect count, the requests
//! each mock received, the ledger's state and the outcome the caller got.
//! [`per_backend!`] instantiates every scenario in modules named after the
//! backend (`memory::…`, `sqlite::…`, `sqlite::across_restart::…`,
//! `postgres::…` and `postgres::across_restart::…`).
//! The `metrics` test replays every scenario into one scoreboard and prints
//! the §9 metrics of the run (duplicates must be 0).
//!
//! Time: scenarios with wiremock mocks (`MockProvider`, `MockDestination`)
//! run in real time with short waits and move the *business* clock
//! (`ManualClock`, shared by the ledger and the destination); scenarios
//! where provider time matters (late answers, stalled streams, budgets) use
//! `TcpProvider` under paused tokio time.

#![allow(unreachable_pub)]

mod support;

/// Instantiates scenario functions per ledger backend.
///
/// ```text
/// per_backend! {
///     #[tokio::test] scenario_a,
///     #[tokio::test(start_paused = true)] scenario_b;
///     across_restart: #[tokio::test] scenario_a,
/// }
/// ```
macro_rules! per_backend {
    (
        $( #[$attr:meta] $name:ident ),* $(,)?
        $( ; across_restart: $( #[$rattr:meta] $rname:ident ),* $(,)? )?
    ) => {
        mod memory {
            $(
                #[$attr]
                async fn $name() {
                    super::$name(crate::support::Run::new(crate::support::Backend::Memory, false)).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[$attr]
                async fn $name() {
                    super::$name(crate::support::Run::new(crate::support::Backend::Sqlite, false)).await;
                }
            )*
            $(
                /// The same scenarios with a process restart (the ledger
                /// reopened from its file) at the critical point.
                mod across_restart {
                    $(
                        #[$rattr]
                        async fn $rname() {
                            super::super::$rname(crate::support::Run::new(crate::support::Backend::Sqlite, true)).await;
                        }
                    )*
                }
            )?
        }
        /// PostgreSQL, each store in its own schema of the database named by
        /// `HANDOVER_TEST_POSTGRES_URL`: skipped (with a note) when it is
        /// unset, failing when it is set and unreachable.
        mod postgres {
            $(
                #[$attr]
                async fn $name() {
                    let Some(backend) = crate::support::Backend::postgres() else {
                        eprintln!("skipped: HANDOVER_TEST_POSTGRES_URL not set");
                        return;
                    };
                    super::$name(crate::support::Run::new(backend, false)).await;
                }
            )*
            $(
                mod across_restart {
                    $(
                        #[$rattr]
                        async fn $rname() {
                            let Some(backend) = crate::support::Backend::postgres() else {
                                eprintln!("skipped: HANDOVER_TEST_POSTGRES_URL not set");
                                return;
                            };
                            super::super::$rname(crate::support::Run::new(backend, true)).await;
                        }
                    )*
                }
            )?
        }
    };
}

mod approval;
mod content_fallback;
mod layered_retries;
mod lost_response;
mod metrics;
mod operation_identity;
mod reconciliation;
mod retention;
