//! The `handover` command-line tool.

fn main() {}
