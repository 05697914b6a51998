//! What an issue body says beyond its prose: `Depends on #N` / `Blocked by #N` lines (the
//! edges written by hand) and the files the task touches (a fenced block whose info string is
//! `files`, or a `Files:` list). Pure: text in, values out. Lines inside other fenced blocks
//! are prose (a code sample naming `Depends on #3` is not an edge), and nothing in an HTML
//! comment (GitHub does not show it) is read.

use crate::sources::markdown::{Block, lines};

/// An issue named in a body: `#12`, `owner/repo#12` or `https://github.com/owner/repo/issues/12`,
/// its repository resolved against the repository of the issue the body belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ref {
    /// `owner/name`, lower case.
    pub repo: String,
    pub number: u64,
}

impl Ref {
    pub fn new(repo: &str, number: u64) -> Ref {
        Ref {
            repo: repo.to_ascii_lowercase(),
            number,
        }
    }

    /// `#N` in `home`, `owner/repo#N` elsewhere.
    pub fn show(&self, home: &str) -> String {
        if self.repo.eq_ignore_ascii_case(home) {
            format!("#{}", self.number)
        } else {
            format!("{}#{}", self.repo, self.number)
        }
    }
}

/// What a body declares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Declared {
    /// The issues named on `Depends on` / `Blocked by` lines, in order, without repeats.
    pub depends_on: Vec<Ref>,
    /// The files, as written (checked by the caller), in order, without repeats.
    pub files: Vec<String>,
}

/// Reads `body`, an issue of `repo`.
pub fn declared(repo: &str, body: &str) -> Declared {
    let mut out = Declared::default();
    let mut files_list = false;
    for content in lines(body) {
        let line = content.text.trim();
        match content.block {
            Block::Text => {}
            Block::Code(info) => {
                if info.eq_ignore_ascii_case("files") && !line.is_empty() {
                    push_file(&mut out.files, line);
                }
                continue;
            }
            Block::Fence | Block::Comment => {
                files_list = false;
                continue;
            }
        }
        let item = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .map(str::trim);
        if files_list {
            match item {
                Some(path) => {
                    push_file(&mut out.files, path);
                    continue;
                }
                None if line.is_empty() => continue,
                None => files_list = false,
            }
        }
        let text = item.unwrap_or(line);
        if let Some(rest) = strip_prefix_ci(text, "files:") {
            let rest = rest.trim();
            if rest.is_empty() {
                files_list = true;
            } else {
                for p in rest.split(',') {
                    push_file(&mut out.files, p);
                }
            }
            continue;
        }
        let text = text.trim_start_matches(['*', '_']); // **Depends on** …
        let rest =
            strip_prefix_ci(text, "depends on").or_else(|| strip_prefix_ci(text, "blocked by"));
        if let Some(rest) = rest {
            for r in refs(repo, rest) {
                if !out.depends_on.contains(&r) {
                    out.depends_on.push(r);
                }
            }
        }
    }
    out
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn push_file(files: &mut Vec<String>, raw: &str) {
    let p = raw.trim().trim_matches('`').trim();
    if !p.is_empty() && !files.iter().any(|f| f == p) {
        files.push(p.to_string());
    }
}

/// The issue references in `text` (after `Depends on`): words that are `#N`, `owner/repo#N`
/// or an issue URL on github.com; anything else is ignored.
fn refs(repo: &str, text: &str) -> Vec<Ref> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter_map(|w| one_ref(repo, w.trim_matches(|c: char| "`*_().:".contains(c))))
        .collect()
}

/// `w` as one issue reference (`#N`, `owner/repo#N`, an issue URL on github.com), else `None`.
pub(crate) fn one_ref(repo: &str, w: &str) -> Option<Ref> {
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
            .filter(|n| *n > 0)
    };
    if let Some(url) = w
        .strip_prefix("https://github.com/")
        .or_else(|| w.strip_prefix("http://github.com/"))
    {
        let parts: Vec<&str> = url.trim_end_matches('/').split('/').collect();
        if let [owner, name, "issues", n] = parts.as_slice() {
            return Some(Ref::new(&format!("{owner}/{name}"), number(n)?));
        }
        return None;
    }
    let (before, n) = w.split_once('#')?;
    let n = number(n)?;
    if before.is_empty() {
        return Some(Ref::new(repo, n));
    }
    let (owner, name) = before.split_once('/')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    (ok(owner) && ok(name)).then(|| Ref::new(before, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_lines_name_issues_here_and_elsewhere() {
        let body = "Some text mentioning #4.\n\
                    Depends on #2, #3 and other/lib#7\n\
                    - Blocked by https://github.com/Acme/App/issues/9\n\
                    **Depends on** #2\n\
                    depends on nothing in particular\n";
        let d = declared("acme/app", body);
        let shown: Vec<String> = d.depends_on.iter().map(|r| r.show("acme/app")).collect();
        assert_eq!(shown, ["#2", "#3", "other/lib#7", "#9"]);
    }

    #[test]
    fn lines_inside_code_samples_are_prose() {
        let body = "```text\nDepends on #5\nFiles: x\n```\nDepends on #6\n";
        let d = declared("o/r", body);
        assert_eq!(d.depends_on, [Ref::new("o/r", 6)]);
        assert!(d.files.is_empty());
        // Only a line of the fence's own character closes it (CommonMark).
        let mixed = "```\n```~~~\nDepends on #5\n```\nDepends on #6\n";
        assert_eq!(declared("o/r", mixed).depends_on, [Ref::new("o/r", 6)]);
    }

    /// GitHub does not render an HTML comment (an issue template's instructions are often
    /// one), so nothing in it is the issue's: its example lines declare nothing.
    #[test]
    fn lines_inside_an_html_comment_are_not_read() {
        let body = "## Depends on\n<!-- one line per issue, e.g.\nDepends on #5\nFiles: src/example.rs\n-->\nDepends on #6\n<!-- Files: x.rs -->\nFiles: src/a.rs\n";
        let d = declared("o/r", body);
        assert_eq!(d.depends_on, [Ref::new("o/r", 6)]);
        assert_eq!(d.files, ["src/a.rs"]);
    }

    #[test]
    fn files_come_from_a_files_block_or_a_files_list() {
        let block = "Intro\n```files\nsrc/a.rs\n\n`src/b.rs`\n```\n";
        assert_eq!(declared("o/r", block).files, ["src/a.rs", "src/b.rs"]);
        let list = "Files:\n- src/a.rs\n* `docs/x.md`\n\nDepends on #1\n";
        let d = declared("o/r", list);
        assert_eq!(d.files, ["src/a.rs", "docs/x.md"]);
        assert_eq!(d.depends_on, [Ref::new("o/r", 1)]);
        let inline = "files: src/a.rs, src/c.rs\n";
        assert_eq!(declared("o/r", inline).files, ["src/a.rs", "src/c.rs"]);
        let none = "Just prose.\n- a list item\n";
        assert!(declared("o/r", none).files.is_empty());
    }

    #[test]
    fn a_files_list_ends_at_the_first_line_that_is_not_an_item() {
        let d = declared("o/r", "Files:\n- a.txt\nMore prose\n- not a file\n");
        assert_eq!(d.files, ["a.txt"]);
    }
}
