//! The long-run worker's result: the JSON object between `OUTPUT_JSON_START` and
//! `OUTPUT_JSON_END` (seed Step 3), and what each status means for the task. Pure.

use serde_json::Value;

use crate::pure::question::{Choice, Kind, Question};

/// The marker line before the block.
pub const START: &str = "OUTPUT_JSON_START";
/// The marker line after the block.
pub const END: &str = "OUTPUT_JSON_END";

/// A parsed block.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The plan is done; the fields feed its summary.
    Completed(Completed),
    /// The worker stopped: it needs the user's decision (seed Rule 4).
    NeedsDecision(Question),
    /// The worker stopped: the user must do something first.
    NeedsAction(Question),
    /// The worker failed.
    Failed { reason: String },
}

/// The fields of a `COMPLETED` block the summary keeps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completed {
    pub summary: String,
    pub tasks_completed: Vec<String>,
    pub commits: Vec<String>,
    pub files_modified: Vec<String>,
    pub deviations: Vec<String>,
}

/// Why the output holds no usable block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    #[error("no {START} … {END} block in the output")]
    Missing,
    #[error("{START} without {END}")]
    Unterminated,
    #[error("the {START} block is not valid JSON: {0}")]
    Json(String),
    #[error("the {START} block has no \"status\" string")]
    NoStatus,
    #[error(
        "the {START} block has status {0:?}; expected COMPLETED, NEEDS_DECISION, NEEDS_ACTION or FAILED"
    )]
    UnknownStatus(String),
}

/// The text of the last block: between the last `OUTPUT_JSON_START` line and the next
/// `OUTPUT_JSON_END` line (markers may carry surrounding spaces or backticks).
fn block(output: &str) -> Result<String, OutputError> {
    let is = |line: &str, marker: &str| line.trim().trim_matches('`').trim() == marker;
    let lines: Vec<&str> = output.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| is(l, START))
        .ok_or(OutputError::Missing)?;
    let len = lines[start + 1..]
        .iter()
        .position(|l| is(l, END))
        .ok_or(OutputError::Unterminated)?;
    Ok(lines[start + 1..start + 1 + len].join("\n"))
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        other => Some(other.to_string()),
    }
}

/// A string list field: strings as they are, other items (objects) as compact JSON.
fn list(v: &Value, key: &str) -> Vec<String> {
    match v.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("description")
                    .or_else(|| o.get("name"))
                    .and_then(Value::as_str)
                    .map_or_else(|| i.to_string(), str::to_string),
                other => other.to_string(),
            })
            .collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// Parses the worker's output.
pub fn parse(output: &str) -> Result<Output, OutputError> {
    let json = block(output)?;
    let v: Value = serde_json::from_str(&json).map_err(|e| OutputError::Json(e.to_string()))?;
    let status = v
        .get("status")
        .and_then(Value::as_str)
        .ok_or(OutputError::NoStatus)?;
    Ok(match status.trim().to_ascii_uppercase().as_str() {
        "COMPLETED" => Output::Completed(Completed {
            summary: text(&v, "summary").unwrap_or_default(),
            tasks_completed: list(&v, "tasks_completed"),
            commits: list(&v, "commits"),
            files_modified: list(&v, "files_modified"),
            deviations: list(&v, "deviations"),
        }),
        "NEEDS_DECISION" => {
            let options = match v.get("options") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|o| match o {
                        Value::String(s) => Choice {
                            key: s.clone(),
                            description: String::new(),
                        },
                        _ => Choice {
                            key: text(o, "key").unwrap_or_else(|| o.to_string()),
                            description: text(o, "description").unwrap_or_default(),
                        },
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let mut q = text(&v, "decision_needed").unwrap_or_else(|| "(no question given)".into());
            if let Some(c) = text(&v, "context") {
                q.push_str("\nContext: ");
                q.push_str(&c);
            }
            Output::NeedsDecision(Question {
                options,
                blocked_at: text(&v, "blocked_at"),
                ..Question::new(Kind::Decision, q)
            })
        }
        "NEEDS_ACTION" => {
            let mut q = text(&v, "action_needed").unwrap_or_else(|| "(no action given)".into());
            let steps = list(&v, "instructions");
            if !steps.is_empty() {
                q.push_str("\nSteps:");
                for (n, s) in steps.iter().enumerate() {
                    q.push_str(&format!("\n{}. {s}", n + 1));
                }
            }
            Output::NeedsAction(Question {
                blocked_at: text(&v, "blocked_at"),
                ..Question::new(Kind::Action, q)
            })
        }
        "FAILED" => {
            let mut reason = text(&v, "error").unwrap_or_else(|| "no error given".into());
            if let Some(at) = text(&v, "failed_at") {
                reason = format!("failed at {at}: {reason}");
            }
            Output::Failed { reason }
        }
        other => return Err(OutputError::UnknownStatus(other.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap(json: &str) -> String {
        format!("working…\n```\n{START}\n{json}\n{END}\n```\n")
    }

    #[test]
    fn each_status() {
        let o = parse(&wrap(
            r#"{"status":"COMPLETED","summary":"done","tasks_completed":["1","2"],"commits":["abc"],"files_modified":["a.rs"],"deviations":[{"rule":1,"description":"fixed typo"}]}"#,
        ))
        .unwrap();
        let Output::Completed(c) = o else { panic!() };
        assert_eq!(c.tasks_completed, vec!["1", "2"]);
        assert_eq!(c.deviations, vec!["fixed typo"]);
        let o = parse(&wrap(
            r#"{"status":"NEEDS_DECISION","blocked_at":"Task 3","decision_needed":"Which DB?","options":[{"key":"pg","description":"Postgres"},"sqlite"],"context":"both work"}"#,
        ))
        .unwrap();
        let Output::NeedsDecision(q) = o else {
            panic!()
        };
        assert_eq!(q.text, "Which DB?\nContext: both work");
        assert_eq!(q.options[1].key, "sqlite");
        assert_eq!(q.blocked_at.as_deref(), Some("Task 3"));
        let o = parse(&wrap(
            r#"{"status":"NEEDS_ACTION","action_needed":"Verify the email","instructions":["open inbox","click"]}"#,
        ))
        .unwrap();
        let Output::NeedsAction(q) = o else { panic!() };
        assert_eq!(q.text, "Verify the email\nSteps:\n1. open inbox\n2. click");
        let o = parse(&wrap(
            r#"{"status":"FAILED","failed_at":"Task 2","error":"tests fail"}"#,
        ))
        .unwrap();
        assert_eq!(
            o,
            Output::Failed {
                reason: "failed at Task 2: tests fail".into()
            }
        );
    }

    #[test]
    fn malformed_blocks() {
        assert_eq!(parse("COMPLETED: x").unwrap_err(), OutputError::Missing);
        assert_eq!(
            parse(&format!("{START}\n{{}}")).unwrap_err(),
            OutputError::Unterminated
        );
        assert!(matches!(
            parse(&wrap("{\"status\": COMPLETED}")).unwrap_err(),
            OutputError::Json(_)
        ));
        assert_eq!(parse(&wrap("{}")).unwrap_err(), OutputError::NoStatus);
        assert_eq!(
            parse(&wrap(r#"{"status":"DONE"}"#))
                .unwrap_err()
                .to_string(),
            "the OUTPUT_JSON_START block has status \"DONE\"; expected COMPLETED, NEEDS_DECISION, NEEDS_ACTION or FAILED"
        );
        // The last block counts.
        let two = format!(
            "{}{}",
            wrap(r#"{"status":"FAILED"}"#),
            wrap(r#"{"status":"COMPLETED"}"#)
        );
        assert!(matches!(parse(&two).unwrap(), Output::Completed(_)));
    }
}
