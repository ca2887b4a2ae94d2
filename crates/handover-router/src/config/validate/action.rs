//! `[actions.NAME]`: what the destination of a business action offers (the
//! write contract): block width, lease, timeout, idempotency key, lookup.

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
    ActionContract {
        name: name.to_owned(),
        block,
        lease: parse_or(
            issues,
            &format!("{path}.lease"),
            raw.lease.as_deref(),
            ledger.lease,
        ),
        timeout: parse_or(
            issues,
            &format!("{path}.timeout"),
            raw.timeout.as_deref(),
            d::ACTION_TIMEOUT,
        ),
        idempotency,
        lookup,
        http_lookup,
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
