//! The GitHub Actions runtime as a step sees it: the `GITHUB_*` variables, step outputs
//! (`$GITHUB_OUTPUT`), the job summary (`$GITHUB_STEP_SUMMARY`), and workflow commands
//! (`::add-mask::`, `::error::`).
//!
//! And the trust boundary around the code dagexec runs (workers, reviewers, acceptance and
//! pre-flight checks): [`scrub_child_env`](crate::edge::child_env::scrub_child_env) takes the runner's file commands (`GITHUB_OUTPUT`,
//! `GITHUB_ENV`, …), its `ACTIONS_*` service tokens and every token variable out of a child's
//! environment, and [`FileGuard`] puts the runner's files back as they were before that code
//! ran, so the step's outputs are dagexec's alone even if task code found the files anyway.
//!
//! And the async runtime a job runs on ([`crate::action::runtime()`]): every job is an `async`
//! function, driven by the one place `dagexec action` blocks on a future (`cli::action`). Blocking work
//! inside a job — git, files, the checks' and the worker's processes waited on — stays in the
//! job's future deliberately: blocking on it, the runtime polls that future on the command's own
//! thread, not on one of the runtime's two worker threads, so a blocking step holds up only
//! the job, which does one thing after another anyway, while what the job spawns (the HTTP
//! client's connections, a worker's output readers, timers) keeps the worker threads to
//! itself. Two pieces go to a blocking thread instead ([`crate::action::blocking`],
//! `spawn_blocking`): the plan job, all of which is blocking work, and reading a plan from
//! GitHub issues, which runs on a runtime of its own (a plan source is read by synchronous
//! code as well) and so may not run inside this one. A job never blocks on a future itself:
//! the conductor's waits between polls are `tokio::time::sleep`, and the engine's
//! [`Executor`](crate::flow::exec::Executor) is `async` where it starts, waits and commits.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::edge::child_env::FILE_COMMANDS;
use crate::edge::github::{RepoName, Token};

/// The parts of the runner's environment dagexec reads.
#[derive(Debug, Clone, Default)]
pub struct Runner {
    pub repository: Option<RepoName>,
    pub api_url: String,
    pub server_url: String,
    pub run_id: String,
    pub run_attempt: String,
    /// The ref the run was started on, short form (`main`, `dagexec/x`).
    pub ref_name: String,
    /// The repository's default branch (`DAGEXEC_DEFAULT_BRANCH`, which action.yml sets from
    /// the event's `repository.default_branch`; empty when unknown).
    pub default_branch: String,
    pub event_name: String,
    pub event_path: Option<PathBuf>,
    pub output: Option<PathBuf>,
    pub step_summary: Option<PathBuf>,
    pub runner_temp: Option<PathBuf>,
}

fn var(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

impl Runner {
    /// Reads the environment (missing values are empty; the commands say what they need).
    pub fn from_env() -> Runner {
        Runner {
            repository: var("GITHUB_REPOSITORY")
                .as_deref()
                .and_then(RepoName::parse),
            api_url: var("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into()),
            server_url: var("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into()),
            run_id: var("GITHUB_RUN_ID").unwrap_or_else(|| "0".into()),
            run_attempt: var("GITHUB_RUN_ATTEMPT").unwrap_or_else(|| "1".into()),
            ref_name: var("GITHUB_REF_NAME").unwrap_or_default(),
            default_branch: var("DAGEXEC_DEFAULT_BRANCH").unwrap_or_default(),
            event_name: var("GITHUB_EVENT_NAME").unwrap_or_default(),
            event_path: var("GITHUB_EVENT_PATH").map(PathBuf::from),
            output: var("GITHUB_OUTPUT").map(PathBuf::from),
            step_summary: var("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            runner_temp: var("RUNNER_TEMP").map(PathBuf::from),
        }
    }

    /// `https://github.com/o/r/actions/runs/123`, when the repository is known.
    pub fn run_url(&self) -> Option<String> {
        let repo = self.repository.as_ref()?;
        Some(format!(
            "{}/{repo}/actions/runs/{}",
            self.server_url.trim_end_matches('/'),
            self.run_id
        ))
    }

    /// The web address of an artifact of this run.
    pub fn artifact_url(&self, artifact_id: u64) -> Option<String> {
        Some(format!("{}/artifacts/{artifact_id}", self.run_url()?))
    }

    /// Sets step outputs (`name<<delimiter` form, so any value is safe). Without
    /// `$GITHUB_OUTPUT` (a local try-out) they are printed instead.
    pub fn set_outputs(&self, pairs: &[(&str, String)]) -> Result<(), super::ActionError> {
        let mut text = String::new();
        for (k, v) in pairs {
            let mut delim = format!("dagexec_{}", fastrand::u64(..));
            while v.contains(&delim) {
                delim = format!("dagexec_{}", fastrand::u64(..));
            }
            text.push_str(&format!("{k}<<{delim}\n{v}\n{delim}\n"));
        }
        if let Some(path) = &self.output {
            append(path, &text)
        } else {
            for (k, v) in pairs {
                println!("output {k}={v}");
            }
            Ok(())
        }
    }

    /// Appends Markdown to the job summary (printed when there is none).
    pub fn summary(&self, markdown: &str) -> Result<(), super::ActionError> {
        if let Some(path) = &self.step_summary {
            append(path, &format!("{markdown}\n"))
        } else {
            println!("{markdown}");
            Ok(())
        }
    }
}

/// Appends `text` to one of the runner's files; an error names the file.
fn append(path: &std::path::Path, text: &str) -> Result<(), super::ActionError> {
    // The runner's own file: only its last component is checked not to be a link.
    let dir = path.parent().unwrap_or(std::path::Path::new(""));
    crate::edge::fsx::append(dir, path, text.as_bytes()).map_err(super::ActionError::write(path))
}

/// Asks the runner to mask `token` in every later log line. Only when running in Actions:
/// elsewhere the command line would print the token.
pub fn mask(token: &Token) {
    if !token.is_empty() && std::env::var_os("GITHUB_ACTIONS").is_some() {
        println!("::add-mask::{}", token.expose());
    }
}

/// An annotation of `kind` (`error`, `warning`; shown on the run's page) in Actions: the
/// workflow command `::KIND title=…::…`, its title and message escaped as the runner reads
/// them. A plain line elsewhere.
pub fn annotation(kind: &str, title: &str, message: &str) {
    if std::env::var_os("GITHUB_ACTIONS").is_some() {
        let esc = |s: &str| {
            s.replace('%', "%25")
                .replace('\r', "%0D")
                .replace('\n', "%0A")
        };
        println!(
            "::{kind} title={}::{}",
            esc(title).replace(',', "%2C").replace(':', "%3A"),
            esc(message)
        );
    } else {
        eprintln!("{kind}: {title}: {message}");
    }
}

/// The runner's file commands as they were before task code ran, to be put back after it.
/// The variables are taken out of task code's environment, but the files lie in a
/// predictable directory, so a worker could still find and append to them; restoring them
/// before dagexec writes its own outputs leaves the step's outputs dagexec's alone.
#[derive(Debug, Default)]
pub struct FileGuard {
    files: Vec<(PathBuf, Vec<u8>)>,
}

impl FileGuard {
    /// Remembers the current content of each file command's file in this environment.
    pub fn from_env() -> FileGuard {
        FileGuard::of(
            FILE_COMMANDS
                .iter()
                .filter_map(|v| var(v).map(PathBuf::from)),
        )
    }

    /// Remembers the current content of `paths` (a missing file as empty).
    pub fn of(paths: impl IntoIterator<Item = PathBuf>) -> FileGuard {
        FileGuard {
            files: paths
                .into_iter()
                .map(|p| {
                    let content = std::fs::read(&p).unwrap_or_default();
                    (p, content)
                })
                .collect(),
        }
    }

    /// Puts back every file whose content changed (never following a link the task code
    /// may have put in its place); one line per file put back, for the log.
    pub fn restore(&self) -> Result<Vec<String>, super::ActionError> {
        let mut said = Vec::new();
        for (path, before) in &self.files {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file());
            if !link && std::fs::read(path).unwrap_or_default() == *before {
                continue;
            }
            replace(path, before).map_err(super::ActionError::write(path))?;
            said.push(format!(
                "{} was changed while task code ran; put back as it was (task code may not set the step's outputs, environment or summary)",
                path.display()
            ));
        }
        Ok(said)
    }
}

/// Replaces the file at `path` (whatever is there now, a link included) by a new file
/// holding `content`: removed, then created exclusively, so no link is ever followed.
fn replace(path: &Path, content: &[u8]) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::child_env::hidden_from_children;

    #[test]
    fn task_code_never_sees_file_commands_or_tokens() {
        for hidden in [
            "GITHUB_OUTPUT",
            "GITHUB_ENV",
            "GITHUB_PATH",
            "GITHUB_STATE",
            "GITHUB_STEP_SUMMARY",
            "ACTIONS_RUNTIME_TOKEN",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            "ACTIONS_CACHE_URL",
            "ACTIONS_RESULTS_URL",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "INPUT_TOKEN",
            "input_token",
            "DAGEXEC_TOKEN",
            "DAGEXEC_APP_PRIVATE_KEY",
        ] {
            assert!(hidden_from_children(hidden), "{hidden}");
        }
        for kept in [
            "PATH",
            "HOME",
            "RUNNER_TEMP",
            "GITHUB_WORKSPACE",
            "GITHUB_SHA",
            "ANTHROPIC_API_KEY",
            "DAGEXEC_TASK_INDEX",
        ] {
            assert!(!hidden_from_children(kept), "{kept}");
        }
    }

    #[test]
    fn the_guard_puts_back_changed_files_and_replaced_links() {
        let dir = tempfile::tempdir().unwrap();
        let (out, env, same) = (
            dir.path().join("out"),
            dir.path().join("env"),
            dir.path().join("same"),
        );
        std::fs::write(&out, "").unwrap();
        std::fs::write(&env, "A=1\n").unwrap();
        std::fs::write(&same, "x").unwrap();
        let guard = FileGuard::of([out.clone(), env.clone(), same.clone()]);
        std::fs::write(&out, "artifact-name=forged\n").unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "keep").unwrap();
        std::fs::remove_file(&env).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &env).unwrap();
        let said = guard.restore().unwrap();
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
        assert_eq!(std::fs::read_to_string(&env).unwrap(), "A=1\n");
        assert!(std::fs::symlink_metadata(&env).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&same).unwrap(), "x");
    }

    #[test]
    fn outputs_use_delimiters_so_any_value_is_safe() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Runner {
            output: Some(dir.path().join("out")),
            ..Default::default()
        };
        ctx.set_outputs(&[
            ("matrix", "{\"include\":[]}".into()),
            ("multi", "a\nb".into()),
        ])
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join("out")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("matrix<<dagexec_"));
        assert_eq!(lines[1], "{\"include\":[]}");
        assert_eq!(lines[2], &lines[0]["matrix<<".len()..]);
        assert_eq!(&lines[4..6], &["a", "b"]);
    }

    #[test]
    fn run_and_artifact_urls() {
        let ctx = Runner {
            repository: RepoName::parse("o/r"),
            server_url: "https://github.com/".into(),
            run_id: "42".into(),
            ..Default::default()
        };
        assert_eq!(
            ctx.run_url().unwrap(),
            "https://github.com/o/r/actions/runs/42"
        );
        assert_eq!(
            ctx.artifact_url(7).unwrap(),
            "https://github.com/o/r/actions/runs/42/artifacts/7"
        );
    }
}
