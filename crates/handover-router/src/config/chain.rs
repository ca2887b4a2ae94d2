//! Chain entries and model-name patterns: the pure rules shared by
//! validation (`policies.NAME.chain`, `[gateway.routes]`) and by resolving a
//! request's `model` at run time ([`super::Config::route`]), so a name is
//! judged the same way in `handover check`, at startup and per request.

use std::collections::BTreeMap;

use super::model::{Hop, ProviderConfig};

/// Stands for the requested name in a `[gateway.routes]` chain entry.
pub(crate) const MODEL_PLACEHOLDER: &str = "{model}";

/// One chain entry: `"provider"` (its default model) or `"provider/model"`
/// (a model its `models` allows). The provider name never holds a `/`, so
/// the first `/` splits; the model may hold more (`"or/meta-llama/llama-3"`).
pub(crate) fn hop(
    providers: &BTreeMap<String, ProviderConfig>,
    entry: &str,
) -> Result<Hop, String> {
    let (name, model) = match entry.split_once('/') {
        Some((name, model)) => (name, Some(model)),
        None => (entry, None),
    };
    let provider = providers
        .get(name)
        .ok_or_else(|| format!("unknown provider {name:?}"))?;
    let model = match model {
        None => provider.model.clone(),
        Some("") => return Err(format!("{entry:?} names no model after the '/'")),
        Some(m) if !provider.models.serves(m) => {
            return Err(format!(
                "provider {name:?} does not serve model {m:?} (list it in providers.{name}.models)"
            ));
        }
        Some(m) => m.to_owned(),
    };
    Ok(Hop {
        provider: provider.name.clone(),
        model,
    })
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters (none included) and everything else matches itself.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    // Classic two-pointer match with backtracking to the last star:
    // linear in practice, O(p·n) at worst; both are at most 255 bytes.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == n[j] {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&b| b == b'*')
}

/// How specific a pattern is: its characters other than `*`. Among
/// patterns matching a name, the most specific wins.
pub(crate) fn specificity(pattern: &str) -> usize {
    pattern.bytes().filter(|&b| b != b'*').count()
}

/// Whether some name matches both patterns (so that, at equal
/// specificity, which one wins would be arbitrary).
pub(crate) fn globs_overlap(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    // reach[i][j]: some string takes a[..i] and b[..j] to the same point.
    let mut reach = vec![vec![false; b.len() + 1]; a.len() + 1];
    reach[0][0] = true;
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            if !reach[i][j] {
                continue;
            }
            let (sa, sb) = (a.get(i) == Some(&b'*'), b.get(j) == Some(&b'*'));
            if sa {
                reach[i + 1][j] = true; // the star matches nothing more
            }
            if sb {
                reach[i][j + 1] = true;
            }
            match (a.get(i), b.get(j)) {
                // One side's star swallows the other side's next character.
                (Some(b'*'), Some(_)) if !sb => reach[i][j + 1] = true,
                (Some(_), Some(b'*')) if !sa => reach[i + 1][j] = true,
                (Some(x), Some(y)) if x == y && !sa => reach[i + 1][j + 1] = true,
                _ => {}
            }
        }
    }
    reach[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob_match("fb-*", "fb-1"));
        assert!(glob_match("fb-*", "fb-"));
        assert!(!glob_match("fb-*", "fa-1"));
        assert!(glob_match("*-mini", "gpt-4o-mini"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("*", ""));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
        assert!(glob_match("a*a", "aaa"));
    }

    #[test]
    fn overlap_is_exact() {
        assert!(globs_overlap("fb-*", "*-1"));
        assert!(globs_overlap("a*", "*b"));
        assert!(!globs_overlap("a*", "b*"));
        assert!(!globs_overlap("*a", "*b"));
        assert!(globs_overlap("x*y", "x*y"));
        assert!(!globs_overlap("gpt-*", "claude-*"));
        assert!(globs_overlap("*", "anything*"));
        assert!(!globs_overlap("ab", "a"));
    }
}
