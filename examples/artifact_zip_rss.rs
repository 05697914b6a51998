//! Peak memory of reading a work job's artifact zip, for `bench/artifact_zip.sh` (issue 20 §4):
//! `artifact_zip_rss FILE [dagexec|zip-crate]` reads FILE into memory (as the conductor's
//! download does), then reads it as the conductor does (`dagexec`, the default) or by handing
//! it whole to the `zip` crate (`zip-crate`, how the conductor read it before), and prints the
//! outcome and the process's peak RSS (`VmHWM`) before and after the read.

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

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: artifact_zip_rss FILE [dagexec|zip-crate]");
        std::process::exit(2);
    };
    let mode = args.next().unwrap_or_else(|| "dagexec".into());
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let loaded = peak_kib();
    let outcome = match mode.as_str() {
        "zip-crate" => match zip::ZipArchive::new(Cursor::new(&bytes)) {
            Ok(z) => format!("parsed, {} entries", z.len()),
            Err(e) => format!("refused: {e}"),
        },
        _ => match dagexec::actions::conduct::read_zip(&bytes) {
            Ok(c) => format!("read, task {} attempt {}", c.result.task, c.result.attempt),
            Err(e) => format!("refused: {e}"),
        },
    };
    let peak = peak_kib();
    println!(
        "{mode:>9}: archive {:.1} MiB; peak RSS {:.1} MiB with the archive loaded, {:.1} MiB after \
         the read (the read's own: {:.1} MiB) — {outcome}",
        bytes.len() as f64 / 1048576.0,
        loaded as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak.saturating_sub(loaded) as f64 / 1024.0,
    );
}
