//! Untrusted text made safe to print on a terminal and to put in a commit message.
//!
//! Worker output (status lines, stderr tails, log lines) and anything derived from it is
//! hostile: an escape sequence in a `COMPLETED:` message could retitle the user's terminal,
//! clear it, or hide text. [`line()`] and [`text`] are the one place that neutralises it:
//! escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ST`, DCS/SOS/PM/APC strings and
//! two-character escapes) are removed whole, and every other control character — C0 but tab
//! (and newline in [`text`]), DEL, C1, and the bidirectional overrides that reorder what a
//! reader sees — becomes U+FFFD. Printable text, any script, is kept as it is.
//!
//! And a worker's words made inert on GitHub ([`unreferenced`]): no issue reference a
//! closing keyword acts on, no mention, in a pull request's Markdown or a commit message.

/// What a removed control character is shown as.
pub const REPLACEMENT: char = '\u{FFFD}';

/// One line: escape sequences removed, control characters replaced, line breaks and tabs
/// turned into spaces.
pub fn line(s: &str) -> String {
    clean(s, false)
}

/// Several lines: like [`line()`] but `\n` is kept (a `\r\n` becomes `\n`).
pub fn text(s: &str) -> String {
    clean(s, true)
}

/// A worker's words made inert on GitHub: a zero-width space after each `#` or `@` before a
/// letter or digit, so `Fixes #12` closes no issue when the pull request (or the commit, in
/// its message) reaches the default branch and `@login` pings nobody. In `markdown` (a pull
/// request's body, a comment) the space is written `&#8203;`, and one also goes after each
/// `&` that starts an entity (`&num;`, `&#x23;`: Markdown decodes them) other than `&lt;`;
/// in plain text (a commit message) it is the character itself.
pub fn unreferenced(s: &str, markdown: bool) -> String {
    let mark = if markdown { "&#8203;" } else { "\u{200B}" };
    let mut out = String::with_capacity(s.len());
    for (at, c) in s.char_indices() {
        out.push(c);
        let rest = &s[at + c.len_utf8()..];
        let next = rest.chars().next().unwrap_or(' ');
        let breaks = match c {
            '#' | '@' => next.is_alphanumeric(),
            '&' => {
                markdown && (next == '#' || next.is_ascii_alphabetic()) && !rest.starts_with("lt;")
            }
            _ => false,
        };
        if breaks {
            out.push_str(mark);
        }
    }
    out
}

/// Whether `s` holds anything [`line()`] would change (a control character of any kind).
pub fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control() || is_bidi_control(c))
}

/// The bidirectional embedding, override and isolate controls ("Trojan Source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

fn clean(s: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\n' if keep_newlines => out.push('\n'),
            '\r' if keep_newlines && chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() || is_bidi_control(c) => out.push(REPLACEMENT),
            c => out.push(c),
        }
    }
    out
}

/// Consumes the rest of an escape sequence whose `ESC` was just read.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        // CSI: parameters and intermediates, then one final byte in @..~.
        Some('[') => {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        // OSC, DCS, SOS, PM, APC: a string ended by BEL or ST (`ESC \`).
        Some(']' | 'P' | 'X' | '^' | '_') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                    }
                    break;
                }
            }
        }
        // A two-character escape (`ESC c`, `ESC 7`, …), or ESC at the end.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_removed_whole() {
        let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J done \u{1b}[31mred\u{1b}[0m \u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\ \u{1b}c!";
        assert_eq!(line(hostile), " done red link !");
        assert!(!line(hostile).contains('\u{1b}'));
    }

    #[test]
    fn controls_are_replaced_and_lines_joined() {
        assert_eq!(line("a\u{0}b\u{7f}c\u{9b}d"), "a�b�c�d");
        assert_eq!(line("one\ntwo\r\tthree"), "one two  three");
        assert_eq!(text("one\r\ntwo\nthree\u{8}"), "one\ntwo\nthree�");
        assert_eq!(line("abc\u{202E}fed"), "abc�fed");
        assert_eq!(line("héllo 世界 — ok"), "héllo 世界 — ok");
        assert_eq!(line("unterminated \u{1b}]0;title"), "unterminated ");
        assert_eq!(line("trailing \u{1b}"), "trailing ");
    }

    #[test]
    fn has_control_sees_every_kind() {
        assert!(!has_control("plain — text ✓"));
        for s in ["a\u{0}", "a\u{1b}", "a\n", "a\t", "a\u{85}", "a\u{2067}"] {
            assert!(has_control(s), "{s:?}");
        }
    }
}
