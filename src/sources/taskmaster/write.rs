//! Writing `"status": "done"` into a Taskmaster `tasks.json` as the only change: the document
//! is scanned for the byte span of each task's and subtask's `status` value, and only those
//! bytes are replaced, so key order, unknown fields, spacing and line ends stay as written.

use std::collections::BTreeSet;

use serde_json::Value;

use super::read::{id_of, tasks_of};

/// A JSON value and where it is in the text.
#[derive(Debug)]
enum Node {
    Object(Vec<(String, Node)>, usize),
    Array(Vec<Node>),
    Scalar(usize, usize),
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            // A key written twice: the last, as JSON readers (serde_json, JavaScript) read it.
            Node::Object(fields, _) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn string_end(&mut self) -> Result<usize, String> {
        let start = self.i;
        self.i += 1;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Ok(self.i);
                }
                _ => self.i += 1,
            }
        }
        Err(format!("unterminated string at byte {start}"))
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        if depth > 256 {
            return Err("nested too deeply".into());
        }
        self.ws();
        let start = self.i;
        match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                loop {
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Node::Object(fields, start));
                        }
                        Some(b',') => self.i += 1,
                        Some(b'"') => {
                            let k0 = self.i;
                            let k1 = self.string_end()?;
                            let key: String =
                                serde_json::from_str(&self.s[k0..k1]).map_err(|e| e.to_string())?;
                            self.ws();
                            if self.b.get(self.i) != Some(&b':') {
                                return Err(format!("expected `:` at byte {}", self.i));
                            }
                            self.i += 1;
                            let v = self.value(depth + 1)?;
                            fields.push((key, v));
                        }
                        _ => return Err(format!("unexpected byte at {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Node::Array(items));
                        }
                        Some(b',') => self.i += 1,
                        Some(_) => items.push(self.value(depth + 1)?),
                        None => return Err("unterminated array".into()),
                    }
                }
            }
            Some(b'"') => {
                let end = self.string_end()?;
                Ok(Node::Scalar(start, end))
            }
            Some(_) => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
                Ok(Node::Scalar(start, self.i))
            }
            None => Err("unexpected end".into()),
        }
    }
}

/// An edit: replace `start..end` with `with`.
type Edit = (usize, usize, &'static str);

/// The edit that makes `obj`'s status `done` (nothing when it is already).
fn set_done(text: &str, obj: &Node) -> Option<Edit> {
    match obj.get("status") {
        Some(Node::Scalar(s, e)) => {
            let now: Option<String> = serde_json::from_str(&text[*s..*e]).ok();
            (now.as_deref() != Some("done")).then_some((*s, *e, "\"done\""))
        }
        Some(_) => None,
        None => match obj {
            Node::Object(_, start) => Some((start + 1, start + 1, "\"status\": \"done\", ")),
            _ => None,
        },
    }
}

fn id_at(text: &str, obj: &Node) -> Option<String> {
    match obj.get("id")? {
        Node::Scalar(s, e) => id_of(&serde_json::from_str::<Value>(&text[*s..*e]).ok()?),
        _ => None,
    }
}

fn status_at(text: &str, obj: &Node) -> Option<String> {
    match obj.get("status")? {
        Node::Scalar(s, e) => serde_json::from_str(&text[*s..*e]).ok(),
        _ => None,
    }
}

/// `text` with every unit in `done` set to `"done"`, and a task whose subtasks are all done
/// (or cancelled) too; the tag is `tag` (`None`: the plain form).
pub(crate) fn write_done(
    text: &str,
    done: &BTreeSet<String>,
    tag: Option<&str>,
) -> Result<String, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let (found, _) = tasks_of(&doc, tag)?;
    if found.as_deref() != tag {
        return Err(format!("the tag {tag:?} is gone"));
    }
    let mut sc = Scanner {
        b: text.as_bytes(),
        s: text,
        i: 0,
    };
    let root = sc.value(0)?;
    let scope = match tag {
        Some(t) => root.get(t).ok_or("the tag is gone")?,
        None => &root,
    };
    let Some(Node::Array(tasks)) = scope.get("tasks") else {
        return Err("no tasks array".into());
    };
    let mut edits: Vec<Edit> = Vec::new();
    for t in tasks {
        let Some(id) = id_at(text, t) else { continue };
        match t.get("subtasks") {
            Some(Node::Array(subs)) if !subs.is_empty() => {
                let mut all = true;
                for s in subs {
                    let Some(local) = id_at(text, s) else {
                        all = false;
                        continue;
                    };
                    if done.contains(&format!("{id}.{local}")) {
                        edits.extend(set_done(text, s));
                    } else if !matches!(
                        status_at(text, s).as_deref(),
                        Some("done" | "cancelled" | "completed")
                    ) {
                        all = false;
                    }
                }
                if all {
                    edits.extend(set_done(text, t));
                }
            }
            _ => {
                if done.contains(&id) {
                    edits.extend(set_done(text, t));
                }
            }
        }
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_string();
    for (s, e, with) in edits {
        out.replace_range(s..e, with);
    }
    Ok(out)
}
