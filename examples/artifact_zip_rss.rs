//! Peak memory of fetching and reading a work job's artifact zip, for `bench/artifact_zip.sh`
//! (issue 20 §4). `artifact_zip_rss MODE ARG` then prints the outcome and the process's peak
//! RSS (`VmHWM`) before and after:
//!   download `API_URL`   the conductor's whole path: `Client::download_artifact` against
//!                      `API_URL` (which redirects to its storage, fetched without the token),
//!                      streamed into a temporary file, then `actions::conduct::read_zip` of it
//!   dagexec FILE       `read_zip` of FILE alone (no download)
//!   zip-crate FILE     FILE read into memory and handed whole to the `zip` crate (how the
//!                      conductor read an artifact before)

use std::io::Cursor;

/// The process's peak resident set so far, in KiB (Linux), else 0.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn read(r: Result<dagexec::action::artifact::Collected, String>) -> String {
    match r {
        Ok(c) => format!(
            "read, task {} attempt {}, patch {} B, log {} B",
            c.result.task,
            c.result.attempt,
            c.patch.len(),
            c.log.map_or(0, |l| l.len())
        ),
        Err(e) => format!("refused: {e}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, arg] = args.as_slice() else {
        eprintln!("usage: artifact_zip_rss download API_URL | dagexec FILE | zip-crate FILE");
        std::process::exit(2);
    };
    let before = peak_kib();
    let (before, outcome) = match mode.as_str() {
        "download" => {
            use dagexec::edge::github::{Client, RepoName, Token};
            // As the conductor's (actions::runtime).
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            let _entered = rt.enter();
            let repo = RepoName::parse("o/r").expect("a repo");
            let client = Client::new(arg, &Token::new("ghs_bench"), repo).expect("a client");
            // The runtime and client set up: what the conductor has anyway.
            let before = peak_kib();
            let limit = dagexec::action::jobs::conduct::MAX_ARTIFACT_BYTES;
            let outcome = match rt.block_on(client.download_artifact(1, limit)) {
                Ok(file) => {
                    let size = file.metadata().map_or(0, |m| m.len());
                    let outcome = read(dagexec::action::jobs::conduct::read_zip(file));
                    format!("downloaded {:.1} MiB; {outcome}", size as f64 / 1048576.0)
                }
                Err(e) => format!("download failed: {e}"),
            };
            (before, outcome)
        }
        "dagexec" => {
            let file = std::fs::File::open(arg).unwrap_or_else(|e| panic!("{arg}: {e}"));
            (before, read(dagexec::action::jobs::conduct::read_zip(file)))
        }
        "zip-crate" => {
            let bytes = std::fs::read(arg).unwrap_or_else(|e| panic!("{arg}: {e}"));
            let outcome = match zip::ZipArchive::new(Cursor::new(&bytes)) {
                Ok(z) => format!("parsed, {} entries", z.len()),
                Err(e) => format!("refused: {e}"),
            };
            (before, format!("(archive loaded) {outcome}"))
        }
        _ => {
            eprintln!("unknown mode {mode}");
            std::process::exit(2);
        }
    };
    let peak = peak_kib();
    println!(
        "{mode:>9}: peak RSS {:.1} MiB ({:.1} MiB before it, {:.1} MiB for it) — {outcome}",
        mib(peak),
        mib(before),
        mib(peak.saturating_sub(before)),
    );
}
