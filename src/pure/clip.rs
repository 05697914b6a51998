//! Text cut to a bound, with a mark saying so: the one way dagexec shortens what it shows or
//! stores — by characters for what a person reads on one line (a question's options, the
//! judge's quotes of a worker's output, a merge note), by bytes where a limit is in bytes (the
//! plan's `result`, GitHub's bodies).

/// `s` without surrounding whitespace, at most `max` characters: when longer, its first
/// `max - 1` and an ellipsis.
pub fn chars(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.char_indices().nth(max).is_none() {
        return s.to_string();
    }
    let end = s
        .char_indices()
        .nth(max.saturating_sub(1))
        .map_or(s.len(), |(at, _)| at);
    format!("{}…", s[..end].trim_end())
}

/// `s` made one plain line ([`crate::pure::sanitize::line`]: no escape sequences, no control
/// characters) and cut to `max` characters as [`chars`] cuts: untrusted text a message quotes.
pub fn line(s: &str, max: usize) -> String {
    chars(&crate::pure::sanitize::line(s), max)
}

/// `s` when it fits `max` bytes; else its start, cut on a character boundary and without
/// trailing whitespace, then `mark`, together at most `max` bytes.
pub fn bytes(s: &str, max: usize, mark: &str) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(mark.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{mark}", s[..end].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_characters_the_ellipsis_counts() {
        assert_eq!(chars("  abc \n", 3), "abc");
        assert_eq!(chars("abcd", 3), "ab…");
        assert_eq!(chars("ééé", 2), "é…");
        assert_eq!(chars("a    b", 3), "a…");
        assert_eq!(chars(&"x".repeat(1000), 10).chars().count(), 10);
    }

    #[test]
    fn by_bytes_on_a_character_boundary_the_mark_counts() {
        assert_eq!(bytes("short", 60, " [cut]"), "short");
        let long = "é".repeat(50);
        let cut = bytes(&long, 21, " [cut]");
        assert!(cut.len() <= 21 && cut.ends_with(" [cut]"), "{cut}");
        assert_eq!(cut, format!("{} [cut]", "é".repeat(7)));
        assert_eq!(bytes("abc     def", 8, "!"), "abc!");
    }
}
