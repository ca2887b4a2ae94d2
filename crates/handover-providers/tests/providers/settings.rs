//! Settings and class names: bad input gets a typed error naming the field.

use std::{str::FromStr, time::Duration};

use handover_providers::{
    AnyProvider, DeepSeekProvider, ErrorClass, ProviderKind, ProviderSettings, ReasoningPassback,
    Timeouts,
};

fn err_of(s: ProviderSettings) -> String {
    AnyProvider::new(s).unwrap_err().to_string()
}

#[test]
fn invalid_settings_name_the_field() {
    let ok = || ProviderSettings::new("p", ProviderKind::OpenAi, "gpt-4o-mini");
    assert!(AnyProvider::new(ok()).is_ok());
    assert!(err_of(ProviderSettings::new("", ProviderKind::OpenAi, "m")).contains("name"));
    assert!(err_of(ProviderSettings::new("p", ProviderKind::OpenAi, " ")).contains("model"));
    assert!(err_of(ok().with_base_url("ftp://x")).contains("base_url"));
    assert!(err_of(ok().with_base_url("not a url")).contains("base_url"));
    assert!(
        err_of(ProviderSettings::new(
            "p",
            ProviderKind::OpenAiCompatible,
            "m"
        ))
        .contains("base_url")
    );
    let zero = Timeouts {
        idle: Duration::ZERO,
        ..Timeouts::default()
    };
    assert!(err_of(ok().with_timeouts(zero)).contains("timeouts.idle"));
    let zero = Timeouts {
        stream_first_byte: Duration::ZERO,
        ..Timeouts::default()
    };
    assert!(err_of(ok().with_timeouts(zero)).contains("timeouts.stream_first_byte"));
    let mismatch = DeepSeekProvider::new(ok()).unwrap_err();
    assert!(mismatch.to_string().contains("kind"), "{mismatch}");
    assert!(!mismatch.was_sent());
    assert_eq!(mismatch.class(), ErrorClass::Other);
}

#[test]
fn error_class_names_round_trip_and_unknown_names_list_the_valid_ones() {
    for c in ErrorClass::ALL {
        assert_eq!(ErrorClass::from_str(c.as_str()).unwrap(), c);
        assert_eq!(c.to_string(), c.as_str());
    }
    let names: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
    for want in [
        "connect",
        "timeout",
        "rate_limited",
        "quota_exhausted",
        "overloaded",
        "server_error",
        "auth",
        "billing",
        "invalid_request",
        "context_length",
        "content_filter",
        "stream_interrupted",
        "stream_stalled",
        "malformed_stream",
        "decode",
    ] {
        assert!(names.contains(&want), "{want}");
    }
    let err = ErrorClass::from_str("rate_limit").unwrap_err();
    assert!(err.to_string().contains("rate_limited"), "{err}");
    assert!(!ErrorClass::Other.is_retryable());
}

#[test]
fn timeouts_cap_to_remaining_budget() {
    let t = Timeouts::default().capped(Duration::from_secs(5));
    assert_eq!(t.total, Duration::from_secs(5));
    assert_eq!(t.idle, Duration::from_secs(5));
    assert_eq!(t.connect, Duration::from_secs(5));
    assert_eq!(t.stream_first_byte, Duration::from_secs(5));
    let t = Timeouts::default().capped(Duration::from_secs(15));
    assert_eq!(
        t.stream_first_byte,
        Duration::from_secs(10),
        "already shorter"
    );
    let m = Timeouts::default().min(Timeouts {
        first_token: Duration::from_secs(1),
        stream_first_byte: Duration::from_secs(2),
        ..Timeouts::default()
    });
    assert_eq!(m.first_token, Duration::from_secs(1));
    assert_eq!(m.stream_first_byte, Duration::from_secs(2));
    assert_eq!(m.total, Timeouts::default().total);
}

#[test]
fn provider_kind_names_and_passback_defaults() {
    for k in ProviderKind::ALL {
        assert_eq!(k.as_str().parse::<ProviderKind>().unwrap(), k);
    }
    // Azure needs its resource URL.
    let azure = ProviderSettings::new("az", ProviderKind::AzureOpenAi, "gpt-4o-deployment");
    assert!(err_of(azure.clone()).contains("base_url"));
    assert_eq!(azure.api_version(), Some("2024-10-21"));
    let azure = azure
        .with_base_url("https://res.openai.azure.com")
        .with_api_version("2025-01-01-preview");
    assert_eq!(azure.api_version(), Some("2025-01-01-preview"));
    assert!(AnyProvider::new(azure.clone()).is_ok());
    assert!(err_of(azure.with_api_version("a b")).contains("api_version"));
    let claude = ProviderSettings::new("c", ProviderKind::Anthropic, "claude-sonnet-4-5");
    assert_eq!(claude.base_url, "https://api.anthropic.com/v1");
    assert_eq!(claude.api_version(), Some("2023-06-01"));
    assert!(AnyProvider::new(claude).is_ok());
    let gemini = ProviderSettings::new("g", ProviderKind::Gemini, "gemini-2.5-flash");
    assert_eq!(
        gemini.base_url,
        "https://generativelanguage.googleapis.com/v1beta"
    );
    assert!(AnyProvider::new(gemini).is_ok());
    assert!(
        "deepsek"
            .parse::<ProviderKind>()
            .unwrap_err()
            .to_string()
            .contains("deepsek")
    );
    let ds = ProviderSettings::new("d", ProviderKind::DeepSeek, "deepseek-chat");
    assert_eq!(
        ds.passback_for("deepseek-chat"),
        ReasoningPassback::OnToolCallTurns
    );
    assert_eq!(
        ds.passback_for("deepseek-reasoner"),
        ReasoningPassback::Never
    );
    let oa = ProviderSettings::new("o", ProviderKind::OpenAi, "gpt-4o-mini");
    assert_eq!(oa.passback_for("gpt-4o-mini"), ReasoningPassback::Never);
}
