//! The GitHub Actions runtime as a step sees it: the `GITHUB_*` variables, step outputs
//! (`$GITHUB_OUTPUT`), the job summary (`$GITHUB_STEP_SUMMARY`), and workflow commands
//! (`::add-mask::`, `::error::`).

use std::path::PathBuf;

use crate::github::{RepoName, Token};

/// The parts of the runner's environment dagexec reads.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub repository: Option<RepoName>,
    pub api_url: String,
    pub server_url: String,
    pub run_id: String,
    pub run_attempt: String,
    /// The ref the run was started on, short form (`main`, `dagexec/x`).
    pub ref_name: String,
    pub sha: String,
    pub event_name: String,
    pub event_path: Option<PathBuf>,
    pub output: Option<PathBuf>,
    pub step_summary: Option<PathBuf>,
    pub runner_temp: Option<PathBuf>,
}

fn var(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

impl Context {
    /// Reads the environment (missing values are empty; the commands say what they need).
    pub fn from_env() -> Context {
        Context {
            repository: var("GITHUB_REPOSITORY")
                .as_deref()
                .and_then(RepoName::parse),
            api_url: var("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into()),
            server_url: var("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into()),
            run_id: var("GITHUB_RUN_ID").unwrap_or_else(|| "0".into()),
            run_attempt: var("GITHUB_RUN_ATTEMPT").unwrap_or_else(|| "1".into()),
            ref_name: var("GITHUB_REF_NAME").unwrap_or_default(),
            sha: var("GITHUB_SHA").unwrap_or_default(),
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
        match &self.output {
            Some(path) => append(path, &text),
            None => {
                for (k, v) in pairs {
                    println!("output {k}={v}");
                }
                Ok(())
            }
        }
    }

    /// Appends Markdown to the job summary (printed when there is none).
    pub fn summary(&self, markdown: &str) -> Result<(), super::ActionError> {
        match &self.step_summary {
            Some(path) => append(path, &format!("{markdown}\n")),
            None => {
                println!("{markdown}");
                Ok(())
            }
        }
    }
}

/// Appends `text` to one of the runner's files; an error names the file.
fn append(path: &std::path::Path, text: &str) -> Result<(), super::ActionError> {
    // The runner's own file: only its last component is checked not to be a link.
    let dir = path.parent().unwrap_or(std::path::Path::new(""));
    crate::fsx::append(dir, path, text.as_bytes()).map_err(|e| super::ActionError::Write {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// Asks the runner to mask `token` in every later log line. Only when running in Actions:
/// elsewhere the command line would print the token.
pub fn mask(token: &Token) {
    if !token.is_empty() && std::env::var_os("GITHUB_ACTIONS").is_some() {
        println!("::add-mask::{}", token.expose());
    }
}

/// An error annotation (shown on the run's page) in Actions, a plain line elsewhere.
pub fn error_annotation(title: &str, message: &str) {
    if std::env::var_os("GITHUB_ACTIONS").is_some() {
        let esc = |s: &str| {
            s.replace('%', "%25")
                .replace('\r', "%0D")
                .replace('\n', "%0A")
        };
        println!(
            "::error title={}::{}",
            esc(title).replace(',', "%2C").replace(':', "%3A"),
            esc(message)
        );
    } else {
        eprintln!("error: {title}: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_use_delimiters_so_any_value_is_safe() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context {
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
        let ctx = Context {
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
