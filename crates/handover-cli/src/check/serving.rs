//! What `handover serve` runs with: `[gateway]` and `[telemetry]`.

use std::fmt::Write as _;

use handover::router::config::{GatewaySettings, LookupHeader, TelemetrySettings};

use super::{d, list};
use crate::term::Style;

pub(super) fn gateway(out: &mut String, g: Option<&GatewaySettings>, s: Style) {
    let _ = writeln!(out, "\n{}", s.bold("gateway"));
    let Some(g) = g else {
        let _ = writeln!(
            out,
            "  (none: `handover serve` refuses this file; it needs [gateway] with at least one [gateway.clients.NAME])"
        );
        return;
    };
    let _ = writeln!(
        out,
        "  listen {}, body at most {} bytes, keep-alive {}, shutdown grace {}, reconciler every {}",
        g.listen,
        g.max_body_bytes,
        d(g.keepalive),
        d(g.shutdown_grace),
        d(g.reconcile_every)
    );
    let _ = writeln!(
        out,
        "  connections at most {}, header within {}, body within {}, idle at most {}, {} request(s) in flight per client",
        g.max_connections,
        d(g.header_read_timeout),
        d(g.body_read_timeout),
        d(g.idle_timeout),
        g.max_in_flight_per_client
    );
    // Token hashes are never printed, only who may call and in which scope.
    for c in g.clients.values() {
        let _ = writeln!(out, "  client {} -> scope {}", c.name, c.scope);
    }
    let operators: Vec<&String> = g.operators.values().map(|o| &o.name).collect();
    let _ = writeln!(out, "  operators: {}", list(operators, "(none)"));
    for (alias, policy) in &g.models {
        let _ = writeln!(out, "  model {alias} -> policy {policy}");
    }
}

/// `[telemetry]`: where spans go; header secrets by variable name only.
pub(super) fn telemetry(out: &mut String, t: Option<&TelemetrySettings>, s: Style) {
    let _ = writeln!(out, "\n{}", s.bold("telemetry"));
    let Some(t) = t else {
        let _ = writeln!(out, "  (no span export: set [telemetry] otlp_endpoint)");
        return;
    };
    let _ = writeln!(
        out,
        "  OTLP/HTTP JSON to {} as service {:?}, every {}, deadline {}, at most {} span(s) queued",
        t.otlp_endpoint,
        t.service_name,
        d(t.export_interval),
        d(t.export_timeout),
        t.max_queued_spans
    );
    for (name, h) in &t.headers {
        let from = match h {
            LookupHeader::Literal(_) => "literal".to_owned(),
            LookupHeader::Env { var, .. } => format!("${var}"),
        };
        let _ = writeln!(out, "  header {name} from {from}");
    }
}
