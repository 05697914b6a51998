//! The lines of a Markdown file as GitHub renders it, for every reader of a Markdown task list
//! (Spec Kit's and Kiro's `tasks.md`, a GitHub issue's body): which lines are text, which are
//! the lines of a fenced code block (with its info string), a fence itself or an HTML comment.
//! One scanner, so the readers agree on what a reader of the rendered page sees; and what a
//! link in it names.

use std::sync::LazyLock;

use regex::Regex;

/// A Markdown link `[text](target "title")`: its text (1), its target in angle brackets (2) or
/// not (3).
pub(crate) static LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\[([^\]]*)\]\(\s*(?:<([^>]*)>|([^()\s]*))(?:\s+"[^"]*")?\s*\)"#).unwrap()
});

/// The repository path a link's `target` in the Markdown file at `file` (repository-relative)
/// names, its `#anchor` and `?query` dropped: from `file`'s folder when it starts with `./` or
/// `../` (as GitHub renders it), from the root when it starts with `/` (as GitHub does) or
/// with neither (as task lists write a path: `[src/app.ts](src/app.ts)`). `None` for a web
/// address or an anchor alone; the target as written when it leads out of the repository, for
/// the path rules to refuse.
pub(crate) fn link_path(target: &str, file: &str) -> Option<String> {
    let target = target.split(['#', '?']).next().unwrap_or_default();
    if target.is_empty() || target.contains(':') {
        return None;
    }
    if let Some(from_root) = target.strip_prefix('/') {
        return Some(from_root.to_string());
    }
    if !target.starts_with("./") && !target.starts_with("../") {
        return Some(target.to_string());
    }
    Some(crate::pure::paths::resolve_link(file, target).unwrap_or_else(|| target.to_string()))
}

/// One line of a Markdown file.
pub(crate) struct Content<'a> {
    /// 1-based line number.
    pub(crate) number: usize,
    /// Byte offset of `text` in the file.
    pub(crate) start: usize,
    /// The line without its line end, trailing whitespace and (on line 1) a UTF-8 BOM.
    pub(crate) text: &'a str,
    /// What the line is part of.
    pub(crate) block: Block<'a>,
}

/// What a line is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block<'a> {
    /// The page's text.
    Text,
    /// A line that opens or closes a fenced code block.
    Fence,
    /// A line inside a fenced code block, whose info string (`rust`, `files`, …) is given.
    Code(&'a str),
    /// A line of an HTML comment (from a line starting `<!--` to the line that holds `-->`).
    Comment,
}

/// Every line of `text`. A fence is three or more backticks (with no backtick after them) or
/// tildes; inside it only a line of the same character, at least as long and with nothing
/// after it, closes it (`CommonMark`).
pub(crate) fn lines(text: &str) -> impl Iterator<Item = Content<'_>> {
    let mut fence: Option<(char, usize, &str)> = None;
    let mut in_comment = false;
    let mut offset = 0;
    text.split_inclusive('\n').enumerate().map(move |(i, raw)| {
        let mut start = offset;
        offset += raw.len();
        let mut line = raw.strip_suffix('\n').unwrap_or(raw);
        if i == 0
            && let Some(rest) = line.strip_prefix('\u{feff}')
        {
            start += '\u{feff}'.len_utf8();
            line = rest;
        }
        let line = line.trim_end();
        let trimmed = line.trim_start();
        // A backtick fence's info string holds no backtick (else the line is a code span).
        let opens = ['`', '~'].into_iter().find_map(|c| {
            let n = trimmed.chars().take_while(|&x| x == c).count();
            (n >= 3 && !(c == '`' && trimmed[n..].contains('`'))).then_some((c, n))
        });
        let block = if let Some((c, n, info)) = fence {
            if opens.is_some_and(|(o, m)| o == c && m >= n)
                && trimmed.trim_start_matches(c).is_empty()
            {
                fence = None;
                Block::Fence
            } else {
                Block::Code(info)
            }
        } else if in_comment || trimmed.starts_with("<!--") {
            in_comment = !trimmed.contains("-->");
            Block::Comment
        } else if let Some((c, n)) = opens {
            // The fence characters are ASCII: `n` of them are `n` bytes.
            fence = Some((c, n, trimmed[n..].trim()));
            Block::Fence
        } else {
            Block::Text
        };
        Content {
            number: i + 1,
            start,
            text: line,
            block,
        }
    })
}

/// The text lines of `text` (outside HTML comments and fenced code blocks, the comment and
/// fence lines themselves excluded): the one scanner behind Spec Kit's and Kiro's parsers and
/// their ticking, so a line a parser reads as a task is exactly a line ticking may change.
pub(crate) fn content_lines(text: &str) -> impl Iterator<Item = Content<'_>> {
    lines(text).filter(|c| c.block == Block::Text)
}
