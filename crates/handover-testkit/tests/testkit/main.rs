//! The integration tests of `handover-testkit`: one binary, each file a module, so the workspace links a handful of test binaries instead of about ninety (linking was most of CI's time on two cores).

mod destination;
mod provider;
