//! A work job's artifact, read by the conductor from its zip archive — the temporary file the
//! download streamed it into — without handing the archive's own central directory to the
//! `zip` crate, and without extracting anything but `changes.patch` (into a temporary file of
//! its own).
//!
//! The archive is task code's (any job of a task run can upload it), and a zip reader that
//! parses the whole central directory holds every entry in memory: a million empty entries
//! took 590 MB, a 256 MiB archive of them 2 GB. So the end-of-central-directory record (and
//! its zip64 form) is read here first, from the archive's last 64 KiB, and an archive with
//! more than [`MAX_ENTRIES`] entries or a central directory over [`MAX_DIRECTORY_BYTES`] is
//! refused before anything else is read. The central directory (at most that size) is then
//! read and walked (no entry is kept but the three expected ones: `result.json`,
//! `changes.patch`, `worker.log`), each of those checked — a regular file, stored or
//! deflated, not encrypted, its data before the directory, its declared size within its
//! bound — and the `zip` crate reads them through a view of the archive whose central
//! directory is a new one naming only them ([`Spliced`]). Whatever else the archive holds is
//! never read. What is kept of the three is bounded too: `result.json` (at most
//! [`RESULT_LIMIT`]) is parsed (past it, only what the attempt spent and the rate-limit holds it
//! met are read out of it as it streams, and the attempt is refused: [`Oversized`]), `changes.patch` (at most
//! [`PATCH_LIMIT`]; past it the attempt is refused, its spend kept) is inflated in
//! chunks into an unlinked temporary file, which is what the arrival's checks and `git apply`
//! read ([`crate::edge::git::PatchFile`]), and of `worker.log` (at most [`LOG_LIMIT`]) only the last
//! [`crate::edge::worker::LOG_CAP`] bytes are kept, as a local run keeps of a work log. So the
//! memory a read takes is the directory, `result.json` and the log's tail, whatever the
//! archive's size or what it says about itself: `bench/artifact_zip.sh` measures it,
//! download included (a peak RSS of 38 MiB with every entry at its bound; 232 MiB when the
//! patch and the whole log were held in memory).

use std::io::{Read, Seek, SeekFrom, Write};

use super::artifact::{Collected, LOG_FILE, PATCH_FILE, RESULT_FILE, WorkResult};
mod spliced;
use spliced::{Spliced, new_directory};

/// A work job's artifact has three entries; an archive with more than this many is refused.
pub const MAX_ENTRIES: u64 = 16;

/// The largest central directory read (its entries' names, extra fields and comments).
pub const MAX_DIRECTORY_BYTES: u64 = 64 << 10;

/// The bound of `result.json`: the worker's output (its last MiB, which JSON's `\u0000`
/// escapes can make 6 MiB), the paths it changed and the acceptance checks' outputs.
pub const RESULT_LIMIT: u64 = 8 << 20;

/// The bound of a `result.json` past [`RESULT_LIMIT`] (a worker that changed more paths than
/// that holds), read as a stream for what the attempt spent and the rate limits it met, none
/// of it held
/// ([`Oversized`]).
const RESULT_STREAM_LIMIT: u64 = 512 << 20;

/// The bound of `changes.patch`, extracted into a temporary file (never held in memory).
pub const PATCH_LIMIT: u64 = 128 << 20;

/// The bound of `worker.log`, of which only the last [`crate::edge::worker::LOG_CAP`] bytes are
/// kept (as a local run keeps of the work log).
pub const LOG_LIMIT: u64 = 32 << 20;

/// The bound of each entry read: `result.json`, `changes.patch`, `worker.log`.
const LIMITS: [(&str, u64); 3] = [
    (RESULT_FILE, RESULT_STREAM_LIMIT),
    (PATCH_FILE, PATCH_LIMIT),
    (LOG_FILE, LOG_LIMIT),
];

/// The chunk an entry is read in.
const CHUNK: usize = 64 << 10;

/// Reads `from` to its end in chunks, handing each to `each`; `Err` when it holds more than
/// `limit` bytes (or cannot be read). Returns how many bytes it held.
fn each_chunk(
    name: &str,
    mut from: impl Read,
    limit: u64,
    mut each: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<u64, String> {
    let mut buf = vec![0; CHUNK];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{name}: {e}")),
        };
        total += n as u64;
        if total > limit {
            return Err(too_large(name, limit));
        }
        each(&buf[..n]).map_err(|e| format!("{name}: {e}"))?;
    }
}

/// Why entry `name` is refused: over its bound, `limit`.
pub(crate) fn too_large(name: &str, limit: u64) -> String {
    format!("{name} is larger than {limit} bytes; refused")
}

const EOCD: u32 = 0x0605_4b50;
const EOCD64: u32 = 0x0606_4b50;
const EOCD64_LOCATOR: u32 = 0x0706_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// What the end-of-central-directory record (zip64 included) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct End {
    entries: u64,
    directory_offset: u64,
    directory_size: u64,
    /// Where the directory must end: the zip64 record, else the record itself.
    limit: u64,
}

const NOT_A_ZIP: &str = "the artifact is not a zip archive";

/// `len` bytes of `archive` from offset `at`.
fn read_at<R: Read + Seek>(archive: &mut R, at: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0; len];
    archive
        .seek(SeekFrom::Start(at))
        .and_then(|_| archive.read_exact(&mut buf))
        .map_err(|e| format!("cannot read the artifact's zip archive: {e}"))?;
    Ok(buf)
}

/// Finds and reads the end-of-central-directory record: the last one whose comment reaches
/// exactly the end of the archive, then its zip64 form when the record says so. Reads the
/// archive's last 64 KiB (the record, its comment, the zip64 locator before it) and the
/// zip64 record, nothing else.
fn end_record<R: Read + Seek>(archive: &mut R) -> Result<End, String> {
    let len = archive
        .seek(SeekFrom::End(0))
        .map_err(|e| format!("cannot read the artifact's zip archive: {e}"))?;
    if len < 22 {
        return Err(format!("{NOT_A_ZIP} (too short)"));
    }
    let from = len.saturating_sub(20 + 22 + u64::from(u16::MAX));
    let bytes = read_at(archive, from, (len - from) as usize)?;
    let tail = bytes.len();
    let lowest = tail.saturating_sub(22 + usize::from(u16::MAX));
    let at = (lowest..=tail - 22)
        .rev()
        .find(|&p| {
            u32_at(&bytes, p) == Some(EOCD)
                && u16_at(&bytes, p + 20).is_some_and(|c| p + 22 + usize::from(c) == tail)
        })
        .ok_or_else(|| format!("{NOT_A_ZIP} (no end of central directory record)"))?;
    let field16 = |o| u16_at(&bytes, at + o).unwrap_or(0);
    let field32 = |o| u32_at(&bytes, at + o).unwrap_or(0);
    if field16(4) != 0 || field16(6) != 0 {
        return Err(format!("{NOT_A_ZIP} (it spans several disks)"));
    }
    let (entries, size, offset) = (field16(10), field32(12), field32(16));
    if entries != u16::MAX && size != u32::MAX && offset != u32::MAX {
        return Ok(End {
            entries: entries.into(),
            directory_offset: offset.into(),
            directory_size: size.into(),
            limit: from + at as u64,
        });
    }
    // Zip64: the locator just before the record names the zip64 record.
    let broken = || format!("{NOT_A_ZIP} (a broken zip64 end of central directory)");
    let locator = at.checked_sub(20).ok_or_else(broken)?;
    if u32_at(&bytes, locator) != Some(EOCD64_LOCATOR) {
        return Err(broken());
    }
    let record = u64_at(&bytes, locator + 8)
        .filter(|r| {
            r.checked_add(56)
                .is_some_and(|e| e <= from + locator as u64)
        })
        .ok_or_else(broken)?;
    let zip64 = read_at(archive, record, 56)?;
    if u32_at(&zip64, 0) != Some(EOCD64) || u32_at(&zip64, 16) != Some(0) {
        return Err(broken());
    }
    let read = |o| u64_at(&zip64, o).ok_or_else(broken);
    Ok(End {
        entries: read(32)?,
        directory_size: read(40)?,
        directory_offset: read(48)?,
        limit: record,
    })
}

/// One of the expected entries, as its central directory record describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    name: &'static str,
    limit: u64,
    flags: u16,
    method: u16,
    crc: u32,
    compressed: u64,
    uncompressed: u64,
    local: u64,
}

/// The values a zip64 extra field holds for the fields of a record set to `0xFFFFFFFF`, in the
/// format's order (uncompressed size, compressed size, local header offset); of several such
/// fields the last counts, as for the `zip` crate.
fn zip64_values(extra: &[u8], wanted: [bool; 3]) -> Option<[Option<u64>; 3]> {
    let mut at = 0;
    let mut found = None;
    while at + 4 <= extra.len() {
        let (id, size) = (u16_at(extra, at)?, usize::from(u16_at(extra, at + 2)?));
        let data = extra.get(at + 4..at + 4 + size)?;
        if id == 1 {
            let mut out = [None; 3];
            let mut from = 0;
            for (slot, want) in out.iter_mut().zip(wanted) {
                if want {
                    *slot = Some(u64_at(data, from)?);
                    from += 8;
                }
            }
            found = Some(out);
        }
        at += 4 + size;
    }
    found
}

/// Reads the central directory (refused first if it is larger than [`MAX_DIRECTORY_BYTES`] or
/// has more than [`MAX_ENTRIES`] entries) and returns the expected entries it names, each
/// checked; every other entry is skipped without being kept.
fn wanted_entries<R: Read + Seek>(archive: &mut R, end: &End) -> Result<Vec<Wanted>, String> {
    if end.entries > MAX_ENTRIES {
        return Err(format!(
            "the artifact's zip has {} entries, more than the {MAX_ENTRIES} a work job's \
             artifact may have (it has 3); refused before reading them",
            end.entries
        ));
    }
    if end.directory_size > MAX_DIRECTORY_BYTES {
        return Err(format!(
            "the artifact's zip has a central directory of {} bytes, more than {MAX_DIRECTORY_BYTES}; refused",
            end.directory_size
        ));
    }
    let start = end.directory_offset;
    let stop = start
        .checked_add(end.directory_size)
        .filter(|&s| s <= end.limit)
        .ok_or_else(|| format!("{NOT_A_ZIP} (its central directory lies outside it)"))?;
    let dir = read_at(archive, start, (stop - start) as usize)?;
    let dir = dir.as_slice();
    let mut found: Vec<Wanted> = Vec::new();
    let mut at = 0;
    for _ in 0..end.entries {
        if u32_at(dir, at) != Some(CENTRAL) {
            return Err(broken("a missing entry"));
        }
        let field16 = |o| u16_at(dir, at + o).ok_or_else(|| broken("a cut entry"));
        let (name_len, extra_len, comment_len) = (field16(28)?, field16(30)?, field16(32)?);
        let name_at = at + 46;
        let extra_at = name_at + usize::from(name_len);
        let next = extra_at + usize::from(extra_len) + usize::from(comment_len);
        if next > dir.len() {
            return Err(broken("a cut entry"));
        }
        let name = &dir[name_at..extra_at];
        let known = LIMITS.iter().find(|(n, _)| n.as_bytes() == name);
        if let Some(&(name, limit)) = known {
            if found.iter().any(|w| w.name == name) {
                return Err(format!("the artifact's zip holds {name} twice; refused"));
            }
            let raw = Raw {
                dir,
                at,
                extra: &dir[extra_at..extra_at + usize::from(extra_len)],
            };
            found.push(check_entry(archive, &raw, name, limit, start)?);
        }
        at = next;
    }
    Ok(found)
}

/// Why the archive is no zip: `what` is wrong in its central directory.
fn broken(what: &str) -> String {
    format!("{NOT_A_ZIP} ({what} in its central directory)")
}

/// A central directory entry: the directory, where the entry starts, its extra field.
struct Raw<'d> {
    dir: &'d [u8],
    at: usize,
    extra: &'d [u8],
}

/// An expected entry (`name`, at most `limit` bytes), checked: a regular file, not
/// encrypted, stored or deflated, within its limit, its data before the central directory
/// (which starts at `start`) and behind a local header.
fn check_entry<R: Read + Seek>(
    archive: &mut R,
    raw: &Raw<'_>,
    name: &'static str,
    limit: u64,
    start: u64,
) -> Result<Wanted, String> {
    let (dir, at) = (raw.dir, raw.at);
    let field16 = |o| u16_at(dir, at + o).ok_or_else(|| broken("a cut entry"));
    let field32 = |o| u32_at(dir, at + o).ok_or_else(|| broken("a cut entry"));
    let made_by = field16(4)?;
    let mode = if made_by >> 8 == 3 {
        field32(38)? >> 16
    } else {
        0
    };
    if !matches!(mode & 0o170_000, 0 | 0o100_000) {
        return Err(format!("{name} is not a regular file in the artifact"));
    }
    let flags = field16(8)?;
    if flags & 1 != 0 {
        return Err(format!("{name} is encrypted in the artifact; refused"));
    }
    let method = field16(10)?;
    if !matches!(method, 0 | 8) {
        return Err(format!(
            "{name} is compressed with method {method} in the artifact (only stored \
             and deflated entries are read); refused"
        ));
    }
    let (compressed, uncompressed, local) = (field32(20)?, field32(24)?, field32(42)?);
    let maxed = [uncompressed, compressed, local].map(|v| v == u32::MAX);
    let [u64u, u64c, u64l] = if maxed.contains(&true) {
        zip64_values(raw.extra, maxed).ok_or_else(|| broken("a broken zip64 field"))?
    } else {
        [None; 3]
    };
    let wanted = Wanted {
        name,
        limit,
        flags,
        method,
        crc: field32(16)?,
        compressed: u64c.unwrap_or(compressed.into()),
        uncompressed: u64u.unwrap_or(uncompressed.into()),
        local: u64l.unwrap_or(local.into()),
    };
    // A patch over its bound refuses the attempt, not the artifact ([`read`]).
    if wanted.uncompressed > limit && name != PATCH_FILE {
        return Err(too_large(name, limit));
    }
    let data_end = wanted
        .local
        .checked_add(30)
        .and_then(|e| e.checked_add(wanted.compressed));
    if data_end.is_none_or(|e| e > start) {
        return Err(format!(
            "{name} lies outside the artifact's data (past its central directory); refused"
        ));
    }
    if u32_at(&read_at(archive, wanted.local, 4)?, 0) != Some(LOCAL) {
        return Err(broken("an entry without its local header"));
    }
    Ok(wanted)
}

/// A `result.json` past [`RESULT_LIMIT`]: what it says of the attempt beside its lists and
/// outputs (which are streamed past, never held), its gateway's rate-limit holds included (the
/// conductor holds the provider's next work from them).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Oversized {
    task: usize,
    attempt: u32,
    round: u32,
    base: String,
    exit: super::artifact::ExitRecord,
    duration_ms: u64,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
    #[serde(default)]
    usage: Option<crate::pure::usage::Usage>,
    #[serde(default)]
    said: crate::pure::said::Said,
    #[serde(default, deserialize_with = "crate::pure::usage::limited::streamed")]
    rate_limits: Vec<crate::pure::usage::limited::Limited>,
}

/// Reads `result.json` from its `entry` (of `declared` bytes): parsed whole within
/// [`RESULT_LIMIT`]. Past it — a worker that changed more paths than that holds — the
/// attempt is refused, but not what it spent: the result is what the file says of the
/// attempt ([`Oversized`], read as a stream) with the refusal, its lists and outputs empty;
/// one that records no spend is refused as an unreadable artifact. Finalize reads a
/// downloaded artifact's file the same way ([`super::artifact::read`]).
pub(crate) fn read_result(mut entry: impl Read, declared: u64) -> Result<WorkResult, String> {
    let mut head = Vec::with_capacity(declared.min(RESULT_LIMIT) as usize);
    (&mut entry)
        .take(RESULT_LIMIT + 1)
        .read_to_end(&mut head)
        .map_err(|e| format!("{RESULT_FILE}: {e}"))?;
    if head.len() as u64 <= RESULT_LIMIT {
        return serde_json::from_slice(&head)
            .map_err(|e| format!("{RESULT_FILE} is not a dagexec work result: {e}"));
    }
    let refused = too_large(RESULT_FILE, RESULT_LIMIT);
    let whole = std::io::Cursor::new(head)
        .chain(entry)
        .take(RESULT_STREAM_LIMIT);
    let o: Oversized = serde_json::from_reader(whole).map_err(|_| refused.clone())?;
    if o.usage.is_none() {
        return Err(refused);
    }
    let report = crate::pure::outcome::AttemptReport {
        exit: (&o.exit).into(),
        ..Default::default()
    };
    let took = std::time::Duration::from_millis(o.duration_ms);
    let mut result = WorkResult::new(o.task, o.attempt, o.round, &o.base, &report, took);
    (result.start, result.end, result.usage) = (o.start, o.end, o.usage);
    result.said = o.said;
    result.network.rate_limits = o.rate_limits;
    result.refused = Some(refused);
    Ok(result)
}

/// Reads the three files of a work job's artifact from its zip archive `archive` (see the
/// module documentation): `Err` says why the artifact is refused.
pub fn read<R: Read + Seek>(mut archive: R) -> Result<Collected, String> {
    let end = end_record(&mut archive)?;
    let entries = wanted_entries(&mut archive, &end)?;
    let offset = u32::try_from(end.directory_offset)
        .map_err(|_| format!("{NOT_A_ZIP} (its central directory starts past 4 GiB)"))?;
    let entry_of = |name: &str| entries.iter().find(|e| e.name == name);
    if entry_of(RESULT_FILE).is_none() {
        return Err(format!("the artifact has no {RESULT_FILE}"));
    }
    let view = Spliced {
        inner: archive,
        head: end.directory_offset,
        tail: new_directory(&entries, offset),
        pos: 0,
        inner_pos: None,
    };
    let mut zip = zip::ZipArchive::new(view).map_err(|e| format!("{NOT_A_ZIP}: {e}"))?;
    let declared = entry_of(RESULT_FILE).map_or(0, |w| w.uncompressed);
    let entry = zip
        .by_name(RESULT_FILE)
        .map_err(|e| format!("{RESULT_FILE}: {e}"))?;
    let mut result = read_result(entry, declared)?;
    // A patch its entry says is over its bound (one that lies is refused as it is read).
    if entry_of(PATCH_FILE).is_some_and(|w| w.uncompressed > w.limit) {
        result
            .refused
            .get_or_insert_with(|| too_large(PATCH_FILE, PATCH_LIMIT));
    }
    // Each entry is read to its end (the zip crate checks its CRC there) in chunks, refused
    // past its bound, and kept as it is used: changes.patch in a file, worker.log's tail.
    // A refused attempt's patch is never integrated: it is not read.
    let patch = if entry_of(PATCH_FILE).is_some() && result.refused.is_none() {
        let mut file = tempfile::tempfile()
            .map_err(|e| format!("cannot make a temporary file for {PATCH_FILE}: {e}"))?;
        let mut out = std::io::BufWriter::with_capacity(64 << 10, &mut file);
        let entry = zip
            .by_name(PATCH_FILE)
            .map_err(|e| format!("{PATCH_FILE}: {e}"))?;
        let len = each_chunk(PATCH_FILE, entry, PATCH_LIMIT, |c| out.write_all(c))?;
        out.flush()
            .map_err(|e| format!("cannot write {PATCH_FILE} to a temporary file: {e}"))?;
        drop(out);
        crate::edge::git::PatchFile::new(file, len).into()
    } else {
        crate::edge::git::Patch::default()
    };
    let log = match entry_of(LOG_FILE) {
        Some(_) => Some(
            zip.by_name(LOG_FILE)
                .map_err(|e| format!("{LOG_FILE}: {e}"))?,
        ),
        None => None,
    };
    let log = log_tail(log)?;
    Ok(Collected { result, patch, log })
}

/// Of `worker.log` (`None`: there is none), its last [`crate::edge::worker::LOG_CAP`] bytes
/// (`None` when blank); past [`LOG_LIMIT`] the artifact is refused. Finalize reads a
/// downloaded artifact's log the same way ([`super::artifact::read`]).
pub(crate) fn log_tail(log: Option<impl Read>) -> Result<Option<String>, String> {
    let Some(log) = log else {
        return Ok(None);
    };
    let mut tail = crate::edge::worker::Tail::new(crate::edge::worker::LOG_CAP);
    each_chunk(LOG_FILE, log, LOG_LIMIT, |c| {
        tail.push(c);
        Ok(())
    })?;
    let log = tail.into_string(crate::edge::worker::CUT_MARKER);
    Ok(Some(log).filter(|l| !l.trim().is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    /// [`read`] of an archive in memory.
    fn read_bytes(bytes: &[u8]) -> Result<Collected, String> {
        read(Cursor::new(bytes))
    }

    fn end_of(bytes: &[u8]) -> Result<End, String> {
        end_record(&mut Cursor::new(bytes))
    }

    fn options() -> zip::write::SimpleFileOptions {
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)
    }

    use crate::testing::{git, result_json};

    /// A zip of the three files, then `extra` empty entries.
    fn artifact(extra: usize, method: zip::CompressionMethod) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let o = options().compression_method(method);
        for (name, data) in [
            (RESULT_FILE, result_json(2, 1)),
            (PATCH_FILE, b"\x00patch".to_vec()),
            (LOG_FILE, b"log\n".repeat(1000)),
        ] {
            w.start_file(name, o).expect("start");
            w.write_all(&data).expect("write");
        }
        for i in 0..extra {
            w.start_file(format!("e{i}"), options()).expect("start");
        }
        w.finish().expect("finish").into_inner()
    }

    #[test]
    fn the_three_files_are_read_stored_or_deflated() {
        for method in [
            zip::CompressionMethod::Stored,
            zip::CompressionMethod::Deflated,
        ] {
            let c = read_bytes(&artifact(2, method)).expect("read");
            assert_eq!((c.result.task, c.result.attempt), (2, 1));
            assert_eq!(c.patch.read_to_vec(), b"\x00patch");
            assert_eq!(c.log.as_deref().map(str::len), Some(4000));
        }
        // Written as a stream (upload-artifact's way): sizes in data descriptors after the data.
        let mut w = zip::ZipWriter::new_stream(Vec::new());
        let o = zip::write::SimpleFileOptions::default();
        w.start_file(RESULT_FILE, o).expect("start");
        w.write_all(&result_json(4, 2)).expect("write");
        w.start_file(PATCH_FILE, o).expect("start");
        w.write_all(&b"diff\n".repeat(100)).expect("write");
        let bytes = w.finish().expect("finish").into_inner();
        let flags = u16_at(&bytes, 6).expect("flags");
        assert_eq!(flags & 8, 8, "a data descriptor");
        let c = read_bytes(&bytes).expect("read");
        assert_eq!((c.result.task, c.patch.len()), (4, 500));
    }

    /// Issue 20 §4: the zip crate parsed the whole central directory first (a million empty
    /// entries: 590 MB). The entry count is read from the end record and refused first.
    #[test]
    fn an_archive_of_many_entries_is_refused_before_its_directory_is_parsed() {
        let bytes = artifact(70_000, zip::CompressionMethod::Stored);
        let end = end_of(&bytes).expect("an end record");
        assert_eq!(end.entries, 70_003, "zip64: more entries than 16 bits hold");
        // The conductor's reader.
        let err = crate::action::jobs::conduct::read_zip(Cursor::new(&bytes)).unwrap_err();
        assert!(
            err.contains("has 70003 entries, more than the 16 a work job's artifact may have"),
            "{err}"
        );
        let err = read_bytes(&artifact(14, zip::CompressionMethod::Stored)).unwrap_err();
        assert!(err.contains("has 17 entries"), "{err}");
        assert!(read_bytes(&artifact(13, zip::CompressionMethod::Stored)).is_ok());
    }

    /// Counts the bytes read through it.
    struct Counted<R> {
        inner: R,
        read: u64,
    }

    impl<R: Read> Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counted<R> {
        fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(to)
        }
    }

    /// Issue 20 §4: the archive was held whole in memory to be read. It is read from its file
    /// where it lies: the end (64 KiB at most), the directory and the three entries — not the
    /// megabytes of another entry, nor a refused archive's directory.
    #[test]
    fn only_the_end_the_directory_and_the_three_entries_are_read_from_the_file() {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file("padding", options()).expect("start");
        w.write_all(&vec![b'p'; 8 << 20]).expect("write");
        for (name, data) in [
            (RESULT_FILE, result_json(5, 3)),
            (PATCH_FILE, b"diff\n".repeat(1000)),
            (LOG_FILE, b"log\n".repeat(1000)),
        ] {
            w.start_file(name, options()).expect("start");
            w.write_all(&data).expect("write");
        }
        let bytes = w.finish().expect("finish").into_inner();
        let mut file = tempfile::tempfile().expect("a file");
        file.write_all(&bytes).expect("write");
        file.rewind().expect("rewind"); // as the download leaves it
        let mut counted = Counted {
            inner: file,
            read: 0,
        };
        let c = read(&mut counted).expect("read from the file");
        assert_eq!((c.result.task, c.patch.len()), (5, 5000));
        assert!(
            counted.read < 200 << 10,
            "{} bytes read of an archive of {}",
            counted.read,
            bytes.len()
        );
        // A refused archive: its end record (and no more than 64 KiB besides) is all read.
        let many = artifact(70_000, zip::CompressionMethod::Stored);
        let mut counted = Counted {
            inner: Cursor::new(&many),
            read: 0,
        };
        assert!(read(&mut counted).unwrap_err().contains("70003 entries"));
        assert!(counted.read <= 70 << 10, "{} bytes read", counted.read);
    }

    /// Issue 20 §4: changes.patch was held in memory from the zip to `git apply` (an artifact
    /// at its bounds took 232 MiB). It goes from the archive into a file of its own, and the
    /// arrival's check of what it touches and the round's check and apply read it from there
    /// (in chunks of 64 KiB): no consumer has it as bytes.
    #[test]
    fn a_large_patch_goes_from_the_zip_to_git_apply_in_a_file() {
        let dir = tempfile::tempdir().expect("a dir");
        let root = dir.path();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("a.txt"), "a\n").expect("write");
        git(root, &["add", "a.txt"]);
        git(root, &["commit", "-q", "-m", "base"]);
        let repo = crate::edge::git::Repo::discover(root).expect("a repo");
        // A patch adding an 8 MiB file: 128 chunks.
        let line = format!("{}\n", "0123456789abcdef".repeat(4));
        let lines = (8 << 20) / line.len() + 1;
        let mut patch = format!(
            "diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n\
             +++ b/big.txt\n@@ -0,0 +1,{lines} @@\n"
        )
        .into_bytes();
        for _ in 0..lines {
            patch.push(b'+');
            patch.extend_from_slice(line.as_bytes());
        }
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in [(RESULT_FILE, result_json(1, 1)), (PATCH_FILE, patch)] {
            w.start_file(name, options()).expect("start");
            w.write_all(&data).expect("write");
        }
        let bytes = w.finish().expect("finish").into_inner();
        let mut file = tempfile::tempfile().expect("a file");
        file.write_all(&bytes).expect("write");
        file.rewind().expect("rewind");
        drop(bytes);
        let c = read(file).expect("read");
        let crate::edge::git::Patch::File(held) = &c.patch else {
            panic!("the patch is held in memory");
        };
        assert!(held.len() > 8 << 20, "{}", held.len());
        assert_eq!(
            repo.patch_paths(&c.patch).expect("the paths it touches"),
            vec!["big.txt".to_string()]
        );
        let index = repo.round_index().expect("an index");
        index.check_patch(&c.patch).expect("it applies");
        index.apply_patch(&c.patch).expect("applied");
        let (_, applied) = index.read_entry("big.txt").expect("read").expect("big.txt");
        assert_eq!(applied.len(), lines * line.len());
        assert!(applied.starts_with(line.as_bytes()));
    }

    /// worker.log is kept as a local run keeps a work log: its last
    /// [`crate::edge::worker::LOG_CAP`] bytes behind a mark (it was read whole, up to 32 MiB);
    /// result.json has a bound of its own.
    #[test]
    fn the_log_keeps_its_tail_and_result_json_its_bound() {
        let zip_of = |entries: &[(&str, &[u8])]| {
            let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            for (name, data) in entries {
                w.start_file(*name, options()).expect("start");
                w.write_all(data).expect("write");
            }
            w.finish().expect("finish").into_inner()
        };
        let mut log = b"early\n".repeat(1 << 20);
        log.extend_from_slice(b"the end\n");
        let c = read_bytes(&zip_of(&[
            (RESULT_FILE, &result_json(0, 1)),
            (LOG_FILE, &log),
        ]))
        .expect("read");
        let kept = c.log.expect("a log");
        assert!(kept.starts_with(crate::edge::worker::CUT_MARKER), "cut");
        assert_eq!(
            kept.len(),
            crate::edge::worker::CUT_MARKER.len() + crate::edge::worker::LOG_CAP
        );
        assert!(kept.ends_with("early\nthe end\n"));
        let mut big = result_json(0, 1);
        big.resize(RESULT_LIMIT as usize + 1, b' ');
        let err = read_bytes(&zip_of(&[(RESULT_FILE, &big)])).unwrap_err();
        assert!(
            err.contains("result.json is larger than 8388608 bytes"),
            "{err}"
        );
    }

    /// A worker that changed more paths than result.json's bound holds (a work job's real
    /// result, listing them) does not take its attempt's spend down with it: the attempt is
    /// refused, its patch not read, and what the gateway metered for it is kept.
    #[test]
    fn a_result_over_its_bound_is_refused_but_keeps_what_the_attempt_spent() {
        use crate::action::artifact::WorkResult;
        let report = crate::pure::outcome::AttemptReport {
            output: "COMPLETED: made them all\n".into(),
            changed: (0..200_000)
                .map(|i| format!("many/file-{i:08}.txt"))
                .collect(),
            present: (0..200_000)
                .map(|i| format!("many/file-{i:08}.txt"))
                .collect(),
            ..Default::default()
        };
        let duration = std::time::Duration::from_secs(60);
        let mut result = WorkResult::new(3, 2, 1, "abc", &report, duration);
        let measured = crate::pure::usage::Measured {
            start: "2026-11-23T05:20:13Z".parse().expect("a time"),
            end: "2026-11-23T05:21:13Z".parse().expect("a time"),
            usage: crate::pure::usage::Usage {
                cost_usd: Some(1.25),
                input_tokens: Some(4000),
                output_tokens: Some(300),
                model: Some("claude-sonnet-4-5".into()),
            },
        };
        result.set_measured(&measured);
        let dir = tempfile::tempdir().expect("a dir");
        crate::action::artifact::write(dir.path(), &result, b"\x00patch".as_slice(), Some("log"))
            .expect("written");
        let json = std::fs::read(dir.path().join(RESULT_FILE)).expect("read");
        assert!(json.len() as u64 > RESULT_LIMIT, "{}", json.len());
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for name in [RESULT_FILE, PATCH_FILE, LOG_FILE] {
            let o = zip::write::SimpleFileOptions::default();
            w.start_file(name, o).expect("start");
            w.write_all(&std::fs::read(dir.path().join(name)).expect("read"))
                .expect("write");
        }
        let c = read_bytes(&w.finish().expect("finish").into_inner()).expect("read");
        assert_eq!((c.result.task, c.result.attempt), (3, 2));
        let now = "2026-11-23T06:00:00Z".parse().expect("a time");
        assert_eq!(c.result.measured(now), measured);
        let refused = c.result.refused.expect("the attempt is refused");
        assert!(
            refused.contains("result.json is larger than 8388608 bytes"),
            "{refused}"
        );
        assert!(c.result.changed.is_empty() && c.result.output.is_empty());
        assert!(
            c.patch.is_empty(),
            "the patch of a refused attempt is not read"
        );
    }

    /// A patch over its bound (a binary change near the 100 MiB a task's change may hold grows
    /// past it in git's encoding) refuses the attempt, not the artifact: what the attempt
    /// spent is kept.
    #[test]
    fn a_patch_over_its_bound_is_refused_but_keeps_what_the_attempt_spent() {
        let report = crate::pure::outcome::AttemptReport::default();
        let took = std::time::Duration::from_secs(5);
        let mut result = crate::action::artifact::WorkResult::new(1, 1, 1, "abc", &report, took);
        result.usage = Some(crate::pure::usage::Usage {
            cost_usd: Some(0.5),
            ..Default::default()
        });
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in [
            (RESULT_FILE, serde_json::to_vec(&result).expect("json")),
            (PATCH_FILE, b"diff\n".to_vec()),
        ] {
            w.start_file(name, options()).expect("start");
            w.write_all(&data).expect("write");
        }
        let mut bytes = w.finish().expect("finish").into_inner();
        // The patch's entry says it holds one byte more than the bound.
        let dir = end_of(&bytes).expect("end").directory_offset as usize;
        let at = dir
            + bytes[dir..]
                .windows(PATCH_FILE.len())
                .position(|w| w == PATCH_FILE.as_bytes())
                .expect("the name")
            - 46;
        let over = u32::try_from(PATCH_LIMIT + 1).expect("fits");
        bytes[at + 24..at + 28].copy_from_slice(&over.to_le_bytes());
        let c = read_bytes(&bytes).expect("read");
        assert_eq!(c.result.usage.and_then(|u| u.cost_usd), Some(0.5));
        let refused = c.result.refused.expect("the attempt is refused");
        assert!(
            refused.contains("changes.patch is larger than 134217728 bytes"),
            "{refused}"
        );
        assert!(c.patch.is_empty());
    }

    /// The directory the end record points at is the one walked; an end record that lies (3
    /// entries said, a directory of thousands) is refused by its size, and one hidden earlier
    /// in the data (where a reader that retries older records would find it) is never read.
    #[test]
    fn a_lying_or_hidden_end_record_gets_nowhere() {
        let mut bytes = artifact(3000, zip::CompressionMethod::Stored);
        let at = bytes.len() - 22;
        bytes[at + 8..at + 12].copy_from_slice(&[3, 0, 3, 0]);
        let err = read_bytes(&bytes).unwrap_err();
        assert!(err.contains("a central directory of"), "{err}");
        // A whole many-entry archive inside worker.log, then a good end: only the three read.
        let inner = artifact(20_000, zip::CompressionMethod::Stored);
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file(RESULT_FILE, options()).expect("start");
        w.write_all(&result_json(0, 1)).expect("write");
        w.start_file(LOG_FILE, options()).expect("start");
        w.write_all(&inner).expect("write");
        let bytes = w.finish().expect("finish").into_inner();
        let c = read_bytes(&bytes).expect("read");
        assert_eq!(c.result.task, 0);
        assert!(c.log.is_some());
        // The same with the good directory broken: refused, never the hidden archive instead
        // (the zip crate alone falls back to it and reads its 20,003 entries and task 2's result).
        let mut broken = bytes.clone();
        let dir = end_of(&broken).expect("end").directory_offset as usize;
        broken[dir..dir + 4].copy_from_slice(b"junk");
        let err = read_bytes(&broken).unwrap_err();
        assert!(
            err.contains("a missing entry in its central directory"),
            "{err}"
        );
        let fallback = zip::ZipArchive::new(std::io::Cursor::new(&broken)).map(|z| z.len());
        assert_eq!(
            fallback.ok(),
            Some(20_003),
            "what the zip crate alone would read"
        );
    }

    #[test]
    fn hostile_entries_are_refused_with_the_reason() {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file(RESULT_FILE, options()).expect("start");
        w.write_all(&result_json(0, 1)).expect("write");
        w.start_file(RESULT_FILE.to_uppercase(), options())
            .expect("start");
        w.add_directory("dir/", options()).expect("dir");
        let ok = w.finish().expect("finish").into_inner();
        assert!(read_bytes(&ok).is_ok(), "other entries are ignored");
        let mut twice = ok.clone();
        // Rename RESULT.JSON to result.json in the central directory only.
        let dir = end_of(&twice).expect("end").directory_offset as usize;
        let pos = dir
            + twice[dir..]
                .windows(11)
                .position(|w| w == b"RESULT.JSON")
                .expect("the name");
        twice[pos..pos + 11].copy_from_slice(b"result.json");
        assert!(
            read_bytes(&twice)
                .unwrap_err()
                .contains("holds result.json twice")
        );
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file(RESULT_FILE, options()).expect("start");
        w.write_all(&result_json(0, 1)).expect("write");
        w.add_symlink(LOG_FILE, "/etc/passwd", options())
            .expect("link");
        let linked = w.finish().expect("finish").into_inner();
        assert!(
            read_bytes(&linked)
                .unwrap_err()
                .contains("worker.log is not a regular file")
        );
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file(RESULT_FILE, options()).expect("start");
        w.write_all(&result_json(0, 1)).expect("write");
        w.start_file(PATCH_FILE, options().large_file(true))
            .expect("start");
        w.write_all(b"p").expect("write");
        let bytes = w.finish().expect("finish").into_inner();
        assert_eq!(
            read_bytes(&bytes)
                .expect("zip64 fields read")
                .patch
                .read_to_vec(),
            b"p"
        );
        assert!(read_bytes(b"PK\x05\x06").unwrap_err().contains("not a zip"));
        let mut truncated = artifact(0, zip::CompressionMethod::Stored);
        truncated.truncate(truncated.len() - 1);
        assert!(
            read_bytes(&truncated)
                .unwrap_err()
                .contains("no end of central directory")
        );
    }
}
