//! Parsing a plan's text into the model, diagnosing why it cannot be read, and the text it is
//! written back as. The file itself is read and written by [`crate::edge::plan_file`].

use std::path::Path;

use serde_json::Value;

use super::error::PlanError;
use super::model::{Plan, SUPPORTED_SCHEMA_VERSIONS};

/// Parses plan text; `path` is only used in messages.
///
/// The happy path parses once. Only when that fails is the text looked at again, in the order a
/// person would want to hear about it: not JSON at all, then the schema version, then missing
/// tasks, then the first field of the wrong shape (with its path, e.g. `task 2 blockedBy[0]`).
pub fn parse(text: &str, path: &Path) -> Result<Plan, PlanError> {
    match serde_json::from_str::<Plan>(text) {
        Ok(plan) => {
            check_version(&Value::from(plan.schema_version))?;
            if plan.tasks.is_empty() {
                return Err(PlanError::NoTasks);
            }
            Ok(plan)
        }
        Err(_) => Err(diagnose(text, path)),
    }
}

fn check_version(v: &Value) -> Result<(), PlanError> {
    if v.as_u64()
        .is_some_and(|n| SUPPORTED_SCHEMA_VERSIONS.contains(&n))
    {
        return Ok(());
    }
    let found = match v {
        Value::Null => "(missing)".to_string(),
        other => other.to_string(),
    };
    Err(PlanError::SchemaVersion { found })
}

fn diagnose(text: &str, path: &Path) -> PlanError {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return PlanError::Syntax {
                path: path.to_path_buf(),
                line: e.line(),
                column: e.column(),
                message: strip_position(&e.to_string()),
            };
        }
    };
    let Some(obj) = value.as_object() else {
        return PlanError::Shape {
            location: String::new(),
            message: "a plan is a JSON object with schemaVersion, goal and tasks".into(),
        };
    };
    if let Err(e) = check_version(obj.get("schemaVersion").unwrap_or(&Value::Null)) {
        return e;
    }
    if obj
        .get("tasks")
        .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty))
    {
        return PlanError::NoTasks;
    }
    match serde_path_to_error::deserialize::<_, Plan>(&value) {
        Ok(_) => PlanError::Shape {
            location: String::new(),
            message: "the plan could not be read".into(),
        },
        Err(e) => {
            let location = describe_path(&e.path().to_string());
            let message = human(&e.into_inner().to_string(), &location);
            PlanError::Shape { location, message }
        }
    }
}

/// A deserializer's message in the words of a plan's author, not Rust's: "invalid type:
/// string "a", expected usize" → "expected a task index (a whole number from 0), found the
/// string "a""; an unknown variant `done` → "\"done\" is not one of: …".
fn human(message: &str, location: &str) -> String {
    let quoted = |s: &str| s.trim_matches('`').to_string();
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (value, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let options: Vec<String> = expected
            .trim_start_matches("one of ")
            .split(", ")
            .map(quoted)
            .filter(|o| !o.is_empty())
            .collect();
        return if options.is_empty() {
            format!("{:?} is not a value this field takes", quoted(value))
        } else {
            format!("{:?} is not one of: {}", quoted(value), options.join(", "))
        };
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return format!("the required field {:?} is missing", quoted(field));
    }
    if let Some(field) = message.strip_prefix("duplicate field ") {
        return format!("the field {:?} is given twice", quoted(field));
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.split_once(", expected ")
        {
            return format!(
                "expected {}, found {}",
                expected_words(expected, location),
                found_words(found)
            );
        }
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((n, expected)) = rest.split_once(", expected ")
    {
        return format!(
            "expected {}, found {n} entries",
            expected_words(expected, location)
        );
    }
    message.to_string()
}

/// What serde expected (`usize`, `a sequence`, `struct Agent`), said in JSON's words.
fn expected_words(expected: &str, location: &str) -> String {
    let index = location.contains("blockedBy") || location.contains("fileOverlaps");
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" if index => {
            "a task index (a whole number from 0)".into()
        }
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number from 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a sequence" => "a list ([…])".into(),
        "a boolean" => "true or false".into(),
        "a borrowed string" | "a string" => "a string".into(),
        e if e == "a map" || e.starts_with("struct ") || e.starts_with("a map") => {
            "an object ({…})".into()
        }
        e if e.starts_with("enum ") => "one of the field's values".into(),
        e => e.to_string(),
    }
}

/// What the file holds instead (an integer, a sequence), said in JSON's words.
fn found_words(found: &str) -> String {
    let inner = |s: &str| s.trim().trim_matches('`').to_string();
    if let Some(n) = found
        .strip_prefix("integer ")
        .or_else(|| found.strip_prefix("floating point "))
    {
        return format!("the number {}", inner(n));
    }
    if let Some(b) = found.strip_prefix("boolean ") {
        return inner(b);
    }
    if found.starts_with("string ") {
        return format!("the {found}");
    }
    match found {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        "unit value" | "null" => "null".into(),
        f => f.to_string(),
    }
}

/// `serde_json` appends " at line X column Y"; the position is already in the message prefix.
fn strip_position(msg: &str) -> String {
    msg.rfind(" at line ")
        .map_or(msg, |i| &msg[..i])
        .to_string()
}

/// `tasks[2].agent.model` → `task 2 agent.model`.
fn describe_path(p: &str) -> String {
    if let Some(rest) = p.strip_prefix("tasks[")
        && let Some(end) = rest.find(']')
    {
        let idx = &rest[..end];
        let field = rest[end + 1..].trim_start_matches('.');
        return format!("task {idx} {field}").trim_end().to_string();
    }
    p.to_string()
}

/// Serialises the plan as the file's text: two-space indented JSON and a final newline.
pub fn to_text(plan: &Plan) -> String {
    let mut s = serde_json::to_string_pretty(plan).expect("a plan always serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, Path::new("plan.json")).unwrap_err().to_string()
    }

    #[test]
    fn diagnoses_in_order() {
        let cases = [
            (
                "{\"schemaVersion\": 2, \"tasks\": [ {\"subject\": \"x\", }",
                "plan.json:1:50: malformed JSON: trailing comma",
            ),
            (
                "[1]",
                "a plan is a JSON object with schemaVersion, goal and tasks",
            ),
            (
                "{\"tasks\": []}",
                "schemaVersion: unsupported schema version (missing) (dagexec reads schemaVersion 2 and 3)",
            ),
            (
                "{\"schemaVersion\": 1, \"tasks\": [{\"weird\": 1}]}",
                "schemaVersion: unsupported schema version 1 (dagexec reads schemaVersion 2 and 3)",
            ),
            (
                "{\"schemaVersion\": \"2\", \"tasks\": []}",
                "schemaVersion: unsupported schema version \"2\" (dagexec reads schemaVersion 2 and 3)",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": []}",
                "tasks: the plan contains no tasks",
            ),
            (
                "{\"schemaVersion\": 3}",
                "tasks: the plan contains no tasks",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": [{\"subject\": \"a\"}, {\"blockedBy\": [\"0\"]}]}",
                "task 1 blockedBy[0]: expected a task index (a whole number from 0), found the string \"0\"",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": [{\"status\": \"done\"}]}",
                "task 0 status: \"done\" is not one of: pending, in_progress, completed, failed, blocked, skipped",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": [{\"agent\": {\"model\": 3}}]}",
                "task 0 agent.model: expected a string, found the number 3",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": [{\"blockedBy\": [-1]}]}",
                "task 0 blockedBy[0]: expected a task index (a whole number from 0), found the number -1",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": [{\"metadata\": {\"files\": {\"create\": \"a.txt\"}}}]}",
                "task 0 metadata.files.create: expected a list ([…]), found the string \"a.txt\"",
            ),
            (
                "{\"schemaVersion\": 2, \"tasks\": [{\"agent\": []}]}",
                "task 0 agent: expected an object ({…}), found a list",
            ),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert!(
                got.starts_with(want),
                "for {text}\n got: {got}\nwant: {want}"
            );
            // No word of Rust's in a message a plan's author reads.
            for rust in [
                "usize",
                "u32",
                "u64",
                "i64",
                "variant",
                "sequence",
                "struct",
                "invalid type",
                "a map",
            ] {
                assert!(!got.contains(rust), "{rust:?} in {got}");
            }
        }
    }

    #[test]
    fn round_trip_preserves_unknown_fields_and_absence() {
        for name in [
            "auth-v2.json",
            "auth-v3.json",
            "auth-v2-waves.json",
            "random-40-v2.json",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(name);
            let text = std::fs::read_to_string(&path).unwrap();
            let plan = parse(&text, &path).unwrap();
            let a: Value = serde_json::from_str(&text).unwrap();
            let b: Value = serde_json::from_str(&to_text(&plan)).unwrap();
            assert_eq!(a, b, "{name} changed on a round trip");
        }
        let text = r#"{"schemaVersion":2,"owner":"x","tasks":[{"subject":"a","custom":{"k":[1,2]},"agent":{"role":"r","mood":"calm"}}],"progress":{"completedTasks":[],"surprises":[],"decisions":[],"note":1}}"#;
        let plan = parse(text, Path::new("p")).unwrap();
        let out: Value = serde_json::from_str(&to_text(&plan)).unwrap();
        assert_eq!(out["owner"], "x");
        assert_eq!(out["tasks"][0]["custom"]["k"][1], 2);
        assert_eq!(out["tasks"][0]["agent"]["mood"], "calm");
        assert_eq!(out["progress"]["note"], 1);
        assert!(out["tasks"][0]["agent"].get("constraints").is_none());
    }
}
