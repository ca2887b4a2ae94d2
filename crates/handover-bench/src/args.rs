//! Minimal `--name value` argument parsing shared by every benchmark.

use std::collections::HashMap;

/// Parsed `--name value` pairs.
pub(crate) struct Args(HashMap<String, String>);

impl Args {
    /// Parses `--name value` pairs; anything else is an error naming the argument.
    pub(crate) fn parse(raw: Vec<String>) -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut it = raw.into_iter();
        while let Some(name) = it.next() {
            let Some(stripped) = name.strip_prefix("--") else {
                return Err(format!(
                    "unexpected argument {name:?} (expected --name value)"
                ));
            };
            let value = it
                .next()
                .ok_or_else(|| format!("argument --{stripped} needs a value"))?;
            map.insert(stripped.to_owned(), value);
        }
        Ok(Self(map))
    }

    /// Fails naming the first argument not in `known`: a misspelt flag
    /// would otherwise leave its default in place and measure something
    /// else than was asked for.
    pub(crate) fn only(&self, known: &[&str]) -> Result<(), String> {
        let mut unknown: Vec<&String> = self
            .0
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .collect();
        unknown.sort();
        match unknown.first() {
            None => Ok(()),
            Some(name) => Err(format!(
                "unknown argument --{name} (this benchmark takes --{})",
                known.join(", --")
            )),
        }
    }

    /// The string value of `--name`, or `default`.
    pub(crate) fn string(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    /// The numeric value of `--name`, or `default`; a non-number is an error naming it.
    pub(crate) fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: expected a whole number, got {v:?}")),
        }
    }
}
