//! The crate's folders are its architecture (ARCHITECTURE.md): rooms on floors, each using only
//! the rooms below it, and a pure core that never touches the world. These tests read the
//! source and fail on an arrow up, an import circle between rooms, or an edge in `pure/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The rooms, lowest first: a file may use its own room and the rooms before it.
const FLOORS: [&str; 7] = ["pure", "edge", "sources", "flow", "local", "action", "cli"];

/// What `pure/` may not name outside its tests: processes, the disk, the network, git,
/// tokio, and every room above it.
const NOT_IN_PURE: [&str; 16] = [
    "std::process",
    "std::fs",
    "std::net",
    "std::os::unix::process",
    "tokio",
    "git2",
    "octocrab",
    "reqwest",
    "nix::",
    "tempfile",
    "crate::edge",
    "crate::sources",
    "crate::flow",
    "crate::local",
    "crate::action",
    "crate::cli",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The production code of a file: its unit-test module and test-only files left out, and
/// comments (doc links included) taken away.
fn production(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if name == "tests.rs" || name.ends_with("_tests.rs") || name == "testing.rs" {
        return None;
    }
    let mut text = std::fs::read_to_string(path).unwrap();
    while let Some(i) = text.find("#[cfg(test)]\nmod tests {") {
        let open = i + text[i..].find('{').unwrap();
        let end = block_end(&text, open);
        text.replace_range(i..end, "");
    }
    Some(
        text.lines()
            .map(|l| match l.find("//") {
                // A `//` inside a string literal (a URL) keeps the line: good enough for
                // paths, which never follow a URL on a line.
                Some(i) if !l[..i].contains('"') => &l[..i],
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The end of the block whose `{` is at `open`: braces counted outside string, raw string,
/// char literals and comments.
fn block_end(text: &str, open: usize) -> usize {
    let b = text.as_bytes();
    let (mut i, mut depth) = (open, 0usize);
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && !b[i - 1].is_ascii_alphanumeric()
                && b[i - 1] != b'_' =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let start = i + 2 + hashes;
                i = start
                    + b[start..]
                        .windows(close.len())
                        .position(|w| w == close.as_slice())
                        .unwrap_or(b.len() - start)
                    + close.len()
                    - 1;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Every file of `src/` by room, with its production text.
fn rooms() -> BTreeMap<&'static str, Vec<(String, String)>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut rooms: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap().to_string_lossy().to_string();
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
        let Some(room) = FLOORS.iter().find(|r| **r == top) else {
            assert!(
                ["lib", "main", "testing"].contains(&top),
                "src/{rel} is in no room: put it under one of {FLOORS:?} (ARCHITECTURE.md)"
            );
            continue;
        };
        if let Some(text) = production(&f) {
            rooms.entry(room).or_default().push((rel, text));
        }
    }
    rooms
}

/// The rooms a text names through `crate::room` (grouped `crate::{room::…}` imports too).
fn named_rooms(text: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let heads: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(|s| s.trim().split("::").next().unwrap_or(""))
                .collect()
        } else {
            vec![
                rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or(""),
            ]
        };
        for h in heads {
            if let Some(r) = FLOORS.iter().find(|r| **r == h)
                && !out.contains(r)
            {
                out.push(*r);
            }
        }
    }
    out
}

#[test]
fn no_room_uses_a_room_above_it() {
    let mut up = Vec::new();
    for (room, files) in rooms() {
        let floor = FLOORS.iter().position(|r| *r == room).unwrap();
        for (rel, text) in files {
            for used in named_rooms(&text) {
                let at = FLOORS.iter().position(|r| *r == used).unwrap();
                if at > floor {
                    up.push(format!("src/{rel} ({room}) uses {used}, a room above it"));
                }
            }
        }
    }
    assert!(
        up.is_empty(),
        "arrows up (move the item down, or the caller up; ARCHITECTURE.md):\n{}",
        up.join("\n")
    );
}

#[test]
fn the_pure_core_touches_no_process_disk_network_git_or_tokio() {
    let rooms = rooms();
    let mut found = Vec::new();
    for (rel, text) in &rooms["pure"] {
        for (n, line) in text.lines().enumerate() {
            for bad in NOT_IN_PURE {
                let hit = line.match_indices(bad).any(|(i, _)| {
                    // A whole path segment: `tokio` but not `tokio_free`, `std::fs` but not
                    // `std::fsx`.
                    let before = line[..i].chars().last();
                    let after = line[i + bad.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if hit {
                    found.push(format!("src/{rel}:{}: {bad}", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the pure core must take values and return values; these lines reach outside it \
         (move the I/O to edge/ or flow/ and pass the result in):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_layout_check_sees_an_edge_in_the_core_and_an_arrow_up() {
    // The checks above would pass vacuously if they read nothing: they see every room, and
    // they see what they look for.
    let rooms = rooms();
    for room in FLOORS {
        assert!(rooms.contains_key(room), "no file found in src/{room}/");
    }
    assert_eq!(
        named_rooms("use crate::{pure::plan, edge::git::Repo};\nlet x = crate::cli::run();"),
        ["pure", "edge", "cli"]
    );
    assert_eq!(named_rooms("crate::pure_x::y"), Vec::<&str>::new());
}

#[test]
fn git_is_started_only_by_the_git_edge() {
    // `edge::git`'s `cmd.rs` gives every call the environment that keeps a hook's GIT_DIR, a
    // user's pager or locale and our own Ctrl-C away from git; a `git` started anywhere else
    // misses all of that.
    let mut found = Vec::new();
    for (room, files) in rooms() {
        for (rel, text) in files {
            if rel == "edge/git/cmd.rs" {
                continue;
            }
            for (n, line) in text.lines().enumerate() {
                if line.contains("Command::new(\"git\")") {
                    found.push(format!("src/{rel}:{} (room {room})", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "git is started outside src/edge/git/cmd.rs; call a function of edge::git instead:\n{}",
        found.join("\n")
    );
}
