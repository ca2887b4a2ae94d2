//! Configuration problems, each naming the path of the offending value.

use std::fmt;

/// One problem found in a configuration file, with the dotted path of the
/// value it concerns (`policies.default.chain[1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted path of the offending value, e.g. `policies.default.chain[1]`.
    pub path: String,
    /// What is wrong with it, e.g. `unknown provider "deepsek"`.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every problem found in one configuration file (never empty when returned
/// as an error).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigIssues(pub Vec<ConfigIssue>);

impl ConfigIssues {
    pub(crate) fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigIssue {
            path: path.into(),
            message: message.into(),
        });
    }

    /// True when no problem was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in the order they were found.
    pub fn iter(&self) -> impl Iterator<Item = &ConfigIssue> {
        self.0.iter()
    }
}

impl fmt::Display for ConfigIssues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}
