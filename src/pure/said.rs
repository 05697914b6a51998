//! What an agent CLI said about how its run ended, beyond the status line: the failure it
//! reports in its machine output (codex's `turn.failed` and `error` events, claude's result
//! `subtype`, `is_error` and `api_error_status`, gemini's `error` object), the tool calls it
//! refused (claude's `permission_denials`), and whether another attempt could help.
//!
//! Pure: [`crate::pure::usage`] reads it from the output, [`crate::edge::worker::classify`] from the exit
//! and stderr (a usage error, a missing or non-executable command); [`crate::pure::outcome::heed`]
//! puts it into the processor's verdict, and [`crate::pure::outcome::decide`] and the engine loops ([`crate::flow::exec`])
//! act on its [`Halt`]:
//!
//! * [`Halt::Task`] — a retry cannot help (a usage error, a command that is missing or not
//!   executable): the task fails at once, its reason saying why it was not retried;
//! * [`Halt::Run`] — the API refused the credentials: every task would fail the same way, so
//!   the task fails and the run stops, naming the secret to fix;
//! * [`Halt::Budget`] — the CLI stopped at its own spending limit (claude's
//!   `error_max_budget_usd`): not a failure; the task is pending again and the run stops as
//!   when `--max-cost` is spent.
//!
//! On GitHub the work job writes it into `result.json` (`said`) and finalize heeds it the
//! same way. It is worker output: at worst it makes its own task fail or stops the run.

use serde::{Deserialize, Serialize};

/// Why no other attempt should follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Halt {
    /// A retry cannot help: the task fails now (why).
    Task { why: String },
    /// The API refused the key: the run stops; `secret` is the variable to fix.
    Run { secret: String },
    /// The CLI's own spending limit stopped it.
    Budget,
}

/// What the CLI said, besides its status line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Said {
    /// The failure the CLI reports, in its words (replaces a reason like "exited with status 1").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Why another attempt would not help, when it would not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt: Option<Halt>,
    /// Tool calls the CLI refused, e.g. `Write /abs/path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// A CLI's failure text is cut to this many characters.
const FAILURE_MAX: usize = 300;

impl Said {
    /// Nothing said.
    pub fn is_empty(&self) -> bool {
        *self == Said::default()
    }

    /// `self`, with what `other` says where `self` says nothing.
    pub fn or(self, other: Said) -> Said {
        Said {
            failure: self.failure.or(other.failure),
            halt: self.halt.or(other.halt),
            refused: if self.refused.is_empty() {
                other.refused
            } else {
                self.refused
            },
        }
    }

    /// Bounded and made safe for a terminal, a plan and a commit message.
    pub fn checked(self) -> Said {
        let line = crate::pure::clip::line;
        Said {
            failure: self.failure.map(|f| line(&f, FAILURE_MAX)),
            halt: self.halt.map(|h| match h {
                Halt::Task { why } => Halt::Task {
                    why: line(&why, FAILURE_MAX),
                },
                Halt::Run { secret } => Halt::Run {
                    secret: line(&secret, 64),
                },
                Halt::Budget => Halt::Budget,
            }),
            refused: self.refused.iter().take(20).map(|r| line(r, 200)).collect(),
        }
    }
}

impl Halt {
    /// `cli`'s API key was refused or is missing: the run stops, naming the secret it lives in.
    pub fn refused_key(cli: &str) -> Halt {
        // The CLI's own secret (`pure::agents`); Claude Code's for a command line of its own.
        let secret = crate::pure::agents::named(cli).map_or("ANTHROPIC_API_KEY", |a| a.secret);
        Halt::Run {
            secret: secret.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_worker_says_is_bounded_and_sanitised() {
        let s = Said {
            failure: Some(format!("\u{1b}]0;pwned\u{7}{}", "x".repeat(1000))),
            halt: Some(Halt::Run {
                secret: "\u{1b}[2JKEY".into(),
            }),
            refused: vec!["r".into(); 50],
        }
        .checked();
        assert!(s.failure.as_ref().unwrap().chars().count() <= FAILURE_MAX);
        assert!(!s.failure.unwrap().contains('\u{1b}'));
        assert_eq!(s.refused.len(), 20);
        assert!(matches!(s.halt, Some(Halt::Run { secret }) if !secret.contains('\u{1b}')));
    }
}
