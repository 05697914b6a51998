//! What a worker job leaves for the finalize job, and how finalize reads it back:
//! `result.json` (what the runner observed: output, exit, files, acceptance checks),
//! `changes.patch` (a binary git patch, new files included) and `worker.log` — and, when a
//! reviewer ran, its verdict in `result.json` and its output in `review.log`.
//!
//! `result.json` also carries the attempt's span (`start`, `end`: when the work job began the
//! attempt and when it finished it, checks and reviewer included) and what the worker reported
//! spending (`usage`, see [`crate::pure::usage`]); finalize believes them only within bounds
//! ([`WorkResult::measured`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pure::outcome::{AttemptReport, CheckRun, Exit};

pub const RESULT_FILE: &str = "result.json";
pub const PATCH_FILE: &str = "changes.patch";
pub const LOG_FILE: &str = "worker.log";
pub const REVIEW_LOG_FILE: &str = "review.log";

/// `result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkResult {
    pub version: u32,
    pub task: usize,
    pub attempt: u32,
    pub round: u32,
    pub base: String,
    /// The worker's standard output (only its last non-empty line is the status line).
    pub output: String,
    pub exit: ExitRecord,
    pub duration_ms: u64,
    pub present: BTreeSet<String>,
    pub changed: BTreeSet<String>,
    pub acceptance: Option<Vec<CheckRun>>,
    /// What the reviewer said, when one ran (a completed attempt of a reviewed task). Absent
    /// in files written before the reviewer loop ran on Actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewRecord>,
    /// When the job began the attempt and when it was done (UTC, `2026-11-23T05:20:13Z`).
    /// Absent in files of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// What the worker reported spending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::pure::usage::Usage>,
    /// What the agent CLI said about how it ended ([`crate::pure::said`]): its failure, the calls it
    /// refused, and why no retry should follow. Absent in files of older versions.
    #[serde(default, skip_serializing_if = "crate::pure::said::Said::is_empty")]
    pub said: crate::pure::said::Said,
    /// Why the job took nothing of the worker's tree (its change over the size a task's change
    /// may hold, or the disk filled while it was staged): the attempt failed with it, and the
    /// patch is empty. Absent when the change was taken, and in files of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// What the job's network guards saw: the hosts the egress proxy refused the agent (the
    /// `egress` input) and what its model gateway saw of each provider's rate limit. Absent
    /// when nothing was refused or limited, and in files of older versions.
    #[serde(flatten)]
    pub network: crate::pure::usage::Network,
}

/// The reviewer's outcome in `result.json`: its parsed verdict block
/// (`{"kind": "reviewed", "verdict": "rejected", "summary": …, "issues": […], "suggestions": […]}`)
/// or why it gave none (`{"kind": "failed", "message": …}`: it crashed, timed out or printed
/// no APPROVED / REJECTED line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReviewRecord {
    Reviewed(crate::pure::review::Review),
    Failed { message: String },
}

impl ReviewRecord {
    /// From the reviewer run's parsed outcome.
    pub fn new(parsed: &Result<crate::pure::review::Review, String>) -> ReviewRecord {
        match parsed {
            Ok(r) => ReviewRecord::Reviewed(r.clone()),
            Err(message) => ReviewRecord::Failed {
                message: message.clone(),
            },
        }
    }

    /// The parsed review, or why there is none, as [`crate::pure::review::conclude`] takes it.
    pub fn outcome(&self) -> Result<&crate::pure::review::Review, &str> {
        match self {
            ReviewRecord::Reviewed(r) => Ok(r),
            ReviewRecord::Failed { message } => Err(message),
        }
    }
}

/// How the worker ended, in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitRecord {
    Success,
    Code { code: i32 },
    Signal { signal: i32 },
    TimedOut { after_secs: u64 },
    SpawnFailed { message: String },
}

impl From<&Exit> for ExitRecord {
    fn from(e: &Exit) -> Self {
        match e {
            Exit::Success => ExitRecord::Success,
            Exit::Code(code) => ExitRecord::Code { code: *code },
            Exit::Signal(signal) => ExitRecord::Signal { signal: *signal },
            Exit::TimedOut(d) => ExitRecord::TimedOut {
                after_secs: d.as_secs(),
            },
            Exit::SpawnFailed(m) => ExitRecord::SpawnFailed { message: m.clone() },
        }
    }
}

impl From<&ExitRecord> for Exit {
    fn from(e: &ExitRecord) -> Self {
        match e {
            ExitRecord::Success => Exit::Success,
            ExitRecord::Code { code } => Exit::Code(*code),
            ExitRecord::Signal { signal } => Exit::Signal(*signal),
            ExitRecord::TimedOut { after_secs } => Exit::TimedOut(Duration::from_secs(*after_secs)),
            ExitRecord::SpawnFailed { message } => Exit::SpawnFailed(message.clone()),
        }
    }
}

impl WorkResult {
    /// The record of attempt `attempt` at `task` in round `round`, which the work job
    /// observed starting at `base`.
    pub fn new(
        task: usize,
        attempt: u32,
        round: u32,
        base: &str,
        report: &AttemptReport,
        duration: Duration,
    ) -> WorkResult {
        WorkResult {
            version: 1,
            task,
            attempt,
            round,
            base: base.to_string(),
            output: report.output.clone(),
            exit: (&report.exit).into(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            present: report.present.clone(),
            changed: report.changed.clone(),
            acceptance: report.acceptance.clone(),
            review: None,
            start: None,
            end: None,
            usage: None,
            said: crate::pure::said::Said::default(),
            refused: None,
            network: crate::pure::usage::Network::default(),
        }
    }

    /// Sets the attempt's span (to the nanosecond: the record's `seconds` come from it) and
    /// usage from `measured`.
    pub fn set_measured(&mut self, measured: &crate::pure::usage::Measured) {
        self.start = Some(measured.start.to_string());
        self.end = Some(measured.end.to_string());
        self.usage = (!measured.usage.is_empty()).then(|| measured.usage.clone());
    }

    /// The attempt's span and usage as finalize believes them (the file is the work job's, so
    /// hostile): the usage [`crate::pure::usage::Usage::checked`]; `start` and `end` when both parse,
    /// `end` is not before `start` nor after `now`, and they are at most a week apart — else the
    /// span is `duration_ms` (at most a week) ending `now`.
    pub fn measured(&self, now: jiff::Timestamp) -> crate::pure::usage::Measured {
        const WEEK: i64 = 7 * 24 * 3600;
        let usage = self.usage.clone().unwrap_or_default().checked();
        let parse = |s: &Option<String>| s.as_deref()?.parse::<jiff::Timestamp>().ok();
        if let (Some(start), Some(end)) = (parse(&self.start), parse(&self.end)) {
            let span = end.duration_since(start).as_secs();
            if start <= end && end <= now && span <= WEEK {
                return crate::pure::usage::Measured { start, end, usage };
            }
        }
        let ms = i64::try_from(self.duration_ms)
            .unwrap_or(i64::MAX)
            .min(WEEK * 1000);
        let start = now
            .checked_sub(jiff::SignedDuration::from_millis(ms))
            .unwrap_or(now);
        crate::pure::usage::Measured {
            start,
            end: now,
            usage,
        }
    }

    /// The processor's input again, with the log the artifact carried.
    pub fn report(&self, log: Option<String>) -> AttemptReport {
        AttemptReport {
            output: self.output.clone(),
            exit: (&self.exit).into(),
            log,
            present: self.present.clone(),
            changed: self.changed.clone(),
            acceptance: self.acceptance.clone(),
        }
    }
}

/// One downloaded artifact, read.
#[derive(Debug, Clone)]
pub struct Collected {
    pub result: WorkResult,
    /// `changes.patch`, read where it lies ([`crate::edge::git::PatchFile`]): the conductor's in an
    /// unlinked temporary file it was extracted into from the zip, finalize's in the
    /// downloaded directory.
    pub patch: crate::edge::git::Patch,
    pub log: Option<String>,
}

/// Writes the three files into `dir` (created if needed); of the log, only its last
/// [`crate::edge::worker::LOG_CAP`] bytes, as a local run keeps of a work log (and what the
/// conductor keeps of an artifact's).
pub fn write<'p>(
    dir: &Path,
    result: &WorkResult,
    patch: impl Into<crate::edge::git::PatchRef<'p>>,
    log: Option<&str>,
) -> std::io::Result<()> {
    let patch = patch.into();
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(result).expect("a work result serialises");
    crate::edge::fsx::write(dir, &dir.join(RESULT_FILE), json.as_bytes())?;
    crate::edge::fsx::write_with(dir, &dir.join(PATCH_FILE), |f| patch.write_to(f))?;
    let mut tail = crate::edge::worker::Tail::new(crate::edge::worker::LOG_CAP);
    tail.push(log.unwrap_or("").as_bytes());
    let log = tail.into_string(crate::edge::worker::CUT_MARKER);
    crate::edge::fsx::write(dir, &dir.join(LOG_FILE), log.as_bytes())?;
    Ok(())
}

/// Reads an artifact directory (finalize's, downloaded) as the conductor reads the same
/// artifact's zip ([`crate::action::artifact_zip`]): each file within the same bound, with
/// the same refusal; `Err` says what is missing or malformed.
pub fn read(dir: &Path) -> Result<Collected, String> {
    use crate::action::artifact_zip::{PATCH_LIMIT, log_tail, read_result, too_large};
    // A missing or irregular file is none.
    let open = |name: &str| {
        let file = crate::edge::fsx::open_regular(&dir.join(name))?;
        Ok::<_, std::io::Error>((file.metadata()?.len(), file))
    };
    let path = dir.join(RESULT_FILE);
    let (len, file) =
        open(RESULT_FILE).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut result = read_result(std::io::BufReader::new(file), len)
        .map_err(|e| format!("{}/{e}", dir.display()))?;
    // Read where it lies, as the conductor's; a refused attempt's patch is never integrated.
    let patch = match open(PATCH_FILE).ok().filter(|_| result.refused.is_none()) {
        Some((len, _)) if len > PATCH_LIMIT => {
            result.refused = Some(too_large(PATCH_FILE, PATCH_LIMIT));
            crate::edge::git::Patch::default()
        }
        Some((len, f)) => crate::edge::git::PatchFile::new(f, len).into(),
        None => crate::edge::git::Patch::default(),
    };
    let log = log_tail(open(LOG_FILE).ok().map(|(_, f)| f))?;
    Ok(Collected { result, patch, log })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_round_trips_through_its_files() {
        let report = AttemptReport {
            output: "working\nCOMPLETED: done\n".into(),
            exit: Exit::TimedOut(Duration::from_secs(30)),
            log: Some("log".into()),
            present: ["a".to_string()].into(),
            changed: ["a".to_string(), "gone".to_string()].into(),
            acceptance: Some(vec![CheckRun {
                criterion: "c".into(),
                check: "true".into(),
                passed: true,
                output: String::new(),
            }]),
        };
        let r = WorkResult::new(3, 2, 5, "abc", &report, Duration::from_millis(1500));
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &r, b"\x00binary", report.log.as_deref()).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back.result, r);
        assert_eq!(back.patch.read_to_vec(), b"\x00binary");
        assert_eq!(back.result.report(back.log.clone()), report);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(RESULT_FILE)).unwrap())
                .unwrap();
        assert_eq!(
            json["exit"],
            serde_json::json!({"kind": "timed_out", "after_secs": 30})
        );
        assert!(json.get("said").is_none(), "nothing said, nothing written");
        // What the CLI said travels to finalize.
        let mut r = r;
        r.said = crate::pure::said::Said {
            failure: Some("codex: the turn failed: unexpected status 401".into()),
            halt: Some(crate::pure::said::Halt::Run {
                secret: "OPENAI_API_KEY".into(),
            }),
            refused: vec!["Write /x".into()],
        };
        write(dir.path(), &r, b"", None).unwrap();
        let text = std::fs::read_to_string(dir.path().join(RESULT_FILE)).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json["said"],
            serde_json::json!({"failure": "codex: the turn failed: unexpected status 401",
                "halt": {"kind": "run", "secret": "OPENAI_API_KEY"}, "refused": ["Write /x"]})
        );
        assert_eq!(read(dir.path()).unwrap().result.said, r.said);
    }

    #[test]
    fn a_review_round_trips_and_old_files_read_without_one() {
        let report = AttemptReport {
            output: "COMPLETED: done\n".into(),
            exit: Exit::Success,
            log: None,
            present: Default::default(),
            changed: Default::default(),
            acceptance: None,
        };
        let mut r = WorkResult::new(0, 1, 1, "abc", &report, Duration::ZERO);
        let old = serde_json::to_value(&r).unwrap();
        assert!(old.get("review").is_none(), "{old}");
        let back: WorkResult = serde_json::from_value(old).unwrap();
        assert_eq!(back.review, None);
        r.review = Some(ReviewRecord::new(&Ok(crate::pure::review::parse(
            "REJECTED\nsummary: thin\nissues:\n- no tests\n",
        )
        .unwrap())));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["review"],
            serde_json::json!({"kind": "reviewed", "verdict": "rejected", "summary": "thin", "issues": ["no tests"], "suggestions": []})
        );
        assert_eq!(serde_json::from_value::<WorkResult>(json).unwrap(), r);
        let failed = ReviewRecord::new(&Err("no verdict".into()));
        assert_eq!(failed.outcome(), Err("no verdict"));
        let json = serde_json::to_value(&failed).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "failed", "message": "no verdict"})
        );
    }

    #[test]
    fn the_span_and_usage_are_believed_only_within_bounds() {
        let report = AttemptReport::default();
        let now: jiff::Timestamp = "2026-11-23T06:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let mut r = WorkResult::new(0, 1, 1, "abc", &report, Duration::from_secs(90));
        let measured = crate::pure::usage::Measured {
            start: at("2026-11-23T05:20:13.25Z"),
            end: at("2026-11-23T05:22:40Z"),
            usage: crate::pure::usage::Usage {
                cost_usd: Some(0.25),
                ..Default::default()
            },
        };
        r.set_measured(&measured);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["start"], "2026-11-23T05:20:13.25Z");
        assert_eq!(json["usage"], serde_json::json!({"costUsd": 0.25}));
        assert_eq!(serde_json::from_value::<WorkResult>(json).unwrap(), r);
        assert_eq!(r.measured(now), measured);
        // Forged: a span from the future, reversed, or of years; a negative or absurd cost.
        for (start, end) in [
            ("2026-11-23T05:00:00Z", "2027-01-01T00:00:00Z"),
            ("2026-11-23T05:30:00Z", "2026-11-23T05:00:00Z"),
            ("2020-01-01T00:00:00Z", "2026-11-23T05:00:00Z"),
            ("soon", "2026-11-23T05:00:00Z"),
        ] {
            r.start = Some(start.into());
            r.end = Some(end.into());
            let m = r.measured(now);
            assert_eq!(
                (m.start, m.end),
                (at("2026-11-23T05:58:30Z"), now),
                "{start}"
            );
        }
        r.duration_ms = u64::MAX;
        r.usage = Some(crate::pure::usage::Usage {
            cost_usd: Some(-3.0),
            input_tokens: Some(u64::MAX),
            output_tokens: Some(12),
            model: Some("<img src=x>".into()),
        });
        let m = r.measured(now);
        assert_eq!(m.duration(), Duration::from_secs(7 * 24 * 3600));
        assert_eq!(
            m.usage,
            crate::pure::usage::Usage {
                cost_usd: None,
                input_tokens: None,
                output_tokens: Some(12),
                model: Some("imgsrcx".into())
            }
        );
    }

    /// The artifact the work job uploads from `dir`, as the zip archive the conductor reads.
    fn zip_of(dir: &Path) -> std::io::Cursor<Vec<u8>> {
        use std::io::Write as _;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for name in [RESULT_FILE, PATCH_FILE, LOG_FILE] {
            zip.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(&std::fs::read(dir.join(name)).unwrap())
                .unwrap();
        }
        zip.finish().unwrap()
    }

    /// A worker's log over what the conductor reads of an artifact (a verbose build's, written
    /// in the tree) leaves its tail, as a local run keeps of it, and never makes the artifact
    /// one the conductor refuses.
    #[test]
    fn a_log_over_the_conductors_bound_is_kept_by_its_tail() {
        let dir = tempfile::tempdir().unwrap();
        let r = WorkResult::new(0, 1, 1, "abc", &AttemptReport::default(), Duration::ZERO);
        let limit = usize::try_from(crate::action::artifact_zip::LOG_LIMIT).unwrap();
        let log = format!("{}the end\n", "build output\n".repeat(limit / 13 + 1));
        write(dir.path(), &r, b"", Some(&log)).unwrap();
        let zipped = crate::action::artifact_zip::read(zip_of(dir.path())).unwrap();
        assert!(zipped.log.unwrap().ends_with("build output\nthe end\n"));
        let kept = read(dir.path()).unwrap().log.unwrap();
        assert!(
            kept.starts_with(crate::edge::worker::CUT_MARKER),
            "cut, and says so"
        );
        assert!(kept.len() <= crate::edge::worker::CUT_MARKER.len() + crate::edge::worker::LOG_CAP);
    }

    /// A result whose `result.json` is past the conductor's bound (more changed paths than it
    /// holds), $0.25 spent.
    fn oversized() -> WorkResult {
        let mut r = WorkResult::new(0, 1, 1, "abc", &AttemptReport::default(), Duration::ZERO);
        let limit = crate::action::artifact_zip::RESULT_LIMIT as usize;
        r.changed = (0..limit / 20).map(|i| format!("src/{i:016}")).collect();
        r.usage = Some(crate::pure::usage::Usage {
            cost_usd: Some(0.25),
            ..Default::default()
        });
        r
    }

    /// A `result.json` past the conductor's bound (a worker that changed more paths than it
    /// holds, or a hostile job's): finalize refuses the attempt as the conductor does, what it
    /// spent kept; and a `changes.patch` past its bound is refused as the conductor refuses it.
    #[test]
    fn an_oversized_result_or_patch_is_refused_by_finalize_as_by_the_conductor() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = oversized();
        write(dir.path(), &r, b"", None).unwrap();
        let zipped = crate::action::artifact_zip::read(zip_of(dir.path())).unwrap();
        let kept = read(dir.path()).unwrap();
        assert!(zipped.result.refused.is_some());
        assert_eq!(kept.result.refused, zipped.result.refused);
        assert_eq!(kept.result.usage, zipped.result.usage);
        assert!(kept.result.changed.is_empty());
        // A patch past its bound (a sparse file here).
        r.changed.clear();
        write(dir.path(), &r, b"", None).unwrap();
        let patch = std::fs::File::options()
            .write(true)
            .open(dir.path().join(PATCH_FILE))
            .unwrap();
        patch
            .set_len(crate::action::artifact_zip::PATCH_LIMIT + 1)
            .unwrap();
        let kept = read(dir.path()).unwrap().result;
        assert!(
            kept.refused
                .as_ref()
                .is_some_and(|why| why.contains(PATCH_FILE)),
            "{:?}",
            kept.refused
        );
        assert_eq!(kept.usage, r.usage);
    }

    /// A `result.json` past the conductor's bound keeps the rate-limit hold its gateway saw
    /// beside the spend (the conductor holds the provider's next work from it), read by the
    /// conductor and by finalize alike; of a list longer than a record keeps, the rest is
    /// streamed past.
    #[test]
    fn an_oversized_result_keeps_its_rate_limits() {
        use crate::pure::usage::limited::Limited;
        let dir = tempfile::tempdir().unwrap();
        let mut r = oversized();
        let held = Limited {
            provider: crate::pure::gateway::Provider::Anthropic,
            answers: 3,
            held_until: Some("2026-11-29T04:12:30Z".into()),
        };
        r.network.rate_limits = vec![held.clone(); 100_000];
        write(dir.path(), &r, b"", None).unwrap();
        let zipped = crate::action::artifact_zip::read(zip_of(dir.path())).unwrap();
        let kept = read(dir.path()).unwrap();
        assert!(zipped.result.refused.is_some());
        assert_eq!(
            zipped.result.network.rate_limits,
            kept.result.network.rate_limits
        );
        assert_eq!(kept.result.network.rate_limits, [held]);
    }

    #[test]
    fn a_missing_or_foreign_result_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap_err().contains("result.json"));
        std::fs::write(dir.path().join(RESULT_FILE), "{}").unwrap();
        assert!(
            read(dir.path())
                .unwrap_err()
                .contains("not a dagexec work result")
        );
    }
}
