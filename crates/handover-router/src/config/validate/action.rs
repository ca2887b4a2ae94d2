//! `[actions.NAME]`: what the destination of a business action offers (the
//! write contract): block width, lease, timeout, idempotency key, lookup.

use std::time::Duration;

use super::super::defaults as d;
use super::super::duration::{parse, parse_or};
use super::super::issues::ConfigIssues;
use super::super::model::{
    ActionContract, BlockSetting, IdempotencyContract, LedgerSettings, LookupContract,
};
use super::super::raw::{RawAction, RawIdempotency, RawLookup};
use super::{EnvLookup, choice, name_ok};

pub(super) fn validate(
    issues: &mut ConfigIssues,
    missing: &mut ConfigIssues,
    env: EnvLookup<'_>,
    ledger: &LedgerSettings,
    name: &str,
    mut raw: RawAction,
) -> ActionContract {
    let path = format!("actions.{name}");
    name_ok(issues, &path, name);
    let block = choice(
        issues,
        &format!("{path}.block"),
        "block width",
        raw.block.as_deref(),
        &[
            ("operation", BlockSetting::Operation),
            ("scope", BlockSetting::Scope),
            ("action", BlockSetting::Action),
        ],
    )
    .unwrap_or(BlockSetting::Operation);
    let idempotency = raw.idempotency.and_then(|i| idempotency(issues, &path, i));
    let http_lookup = raw
        .lookup
        .as_mut()
        .and_then(|l| super::lookup::validate(issues, missing, env, &path, l));
    let lookup = raw.lookup.and_then(|l| lookup(issues, &path, l));
    let lease = parse_or(
        issues,
        &format!("{path}.lease"),
        raw.lease.as_deref(),
        ledger.lease,
    );
    let timeout = parse_or(
        issues,
        &format!("{path}.timeout"),
        raw.timeout.as_deref(),
        d::ACTION_TIMEOUT,
    );
    // Both fields and values named, and where an unset one comes from.
    let lease_text = if raw.lease.is_some() {
        ""
    } else {
        " (from ledger.lease)"
    };
    let timeout_text = if raw.timeout.is_some() {
        format!("{path}.timeout")
    } else {
        format!("{path}.timeout (default)")
    };
    lease_covers_timeout(
        issues,
        &format!("{path}.lease"),
        (lease, lease_text),
        (timeout, &timeout_text),
    );
    ActionContract {
        name: name.to_owned(),
        block,
        lease,
        timeout,
        idempotency,
        lookup,
        http_lookup,
    }
}

/// A claim's lease must cover its destination call: a client of the
/// operations API holds its claim for the lease alone while it sends, so a
/// lease shorter than the call's timeout could lapse while the call may
/// still run. The dispatched operation would then turn `unknown`, the
/// client's answer would be refused as stale, and a reconciler with an
/// idempotency contract could re-send while the first request is still in
/// flight. (The write gate, which runs the executor itself, holds
/// `timeout + lease` and is safe either way; the rule is for every door.)
/// `lease_note` follows the lease's value (where it came from, if not
/// from `path`); `timeout_field` names the timeout.
pub(super) fn lease_covers_timeout(
    issues: &mut ConfigIssues,
    path: &str,
    (lease, lease_note): (Duration, &str),
    (timeout, timeout_field): (Duration, &str),
) {
    if lease < timeout {
        issues.push(
            path,
            format!(
                "{}{lease_note} is shorter than {timeout_field} = {}: the claim could expire while the destination call may still run (a client of the operations API holds it for the lease alone); set the lease to at least the timeout",
                humantime::format_duration(lease),
                humantime::format_duration(timeout),
            ),
        );
    }
}

fn idempotency(
    issues: &mut ConfigIssues,
    path: &str,
    i: RawIdempotency,
) -> Option<IdempotencyContract> {
    let valid_header = !i.header.is_empty()
        && i.header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid_header {
        issues.push(
            format!("{path}.idempotency.header"),
            format!("{:?} is not a valid header name", i.header),
        );
    }
    let retention = parse(
        issues,
        &format!("{path}.idempotency.retention"),
        &i.retention,
    )?;
    valid_header.then_some(IdempotencyContract {
        header: i.header,
        retention,
    })
}

fn lookup(issues: &mut ConfigIssues, path: &str, l: RawLookup) -> Option<LookupContract> {
    let visibility_lag = parse(
        issues,
        &format!("{path}.lookup.visibility_lag"),
        &l.visibility_lag,
    )?;
    let check_every = parse_or(
        issues,
        &format!("{path}.lookup.check_every"),
        l.check_every.as_deref(),
        d::CHECK_EVERY,
    );
    let max_check_every = parse_or(
        issues,
        &format!("{path}.lookup.max_check_every"),
        l.max_check_every.as_deref(),
        d::MAX_CHECK_EVERY.max(check_every),
    );
    if max_check_every < check_every {
        issues.push(
            format!("{path}.lookup.max_check_every"),
            "must not be shorter than lookup.check_every",
        );
    }
    Some(LookupContract {
        visibility_lag,
        check_every,
        max_check_every,
    })
}
