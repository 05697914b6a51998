//! `dagexec init`: writes the workflow a repository needs to run its plan on GitHub Actions,
//! from the template in `templates/dagexec.yml` (the same file the end-to-end tests run).
//!
//! What it fills in: the action reference (pinned by commit, `org/dagexec@<40-hex> # v1.2.3`,
//! so security scanners and reviewers see exactly what runs; `--action OWNER/REPO@REF` names
//! another, and a warning says when it is still the Cargo metadata's placeholder), the plan
//! (the one `run` would read here: `--plan`, else `.design/plan.json`, else the one task list
//! in its usual place), the worker (a known CLI installed at a pinned version, or any command;
//! a path of this machine in it is warned about), the secret the worker needs (checked before
//! anything runs, with the fix in the error), and, when the action is built from the repository
//! itself (`--action ./`), a checkout of the action's source from the default branch for the
//! jobs that hold a write token. It writes only into a git repository.

mod render;
mod worker;

pub use render::render;
pub use worker::Worker;

use std::path::{Path, PathBuf};

/// The workflow template, as shipped.
pub const TEMPLATE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/templates/dagexec.yml"
));

/// Where the workflow goes, relative to the repository root.
pub const WORKFLOW_REL: &str = ".github/workflows/dagexec.yml";

/// The reference the template is written with, replaced by [`render()`].
const TEMPLATE_ACTION: &str = "org/dagexec@v1";

/// The repository Cargo.toml's metadata names until the project is published: an action
/// there does not exist, so `init` warns while the workflow would use it.
pub const PLACEHOLDER_REPOSITORY: &str = "org/dagexec";

/// The plan the template is written with, replaced by [`render()`].
pub const DEFAULT_PLAN: &str = ".design/plan.json";

/// Where the jobs holding a write token check out the action's own source (`--action ./`).
pub const TRUSTED_ACTION_DIR: &str = ".dagexec-action";

/// `actions/checkout`, as the template pins it.
const CHECKOUT: &str = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2";

/// How this binary was built: the commit and tag `build.rs` baked in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// `owner/name` of the action's repository (from Cargo.toml's `repository`).
    pub repository: String,
    /// The commit the binary was built from (40 hex), when known.
    pub commit: Option<String>,
    /// The release tag (`v1.2.3`) for a release build, else what `git describe` said.
    pub describe: Option<String>,
    /// A release build (the release workflow set `DAGEXEC_RELEASE_TAG`).
    pub release: bool,
}

impl Build {
    /// This binary's build facts.
    pub fn current() -> Build {
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
        Build {
            repository: repository_slug(env!("CARGO_PKG_REPOSITORY")),
            commit: non_empty(env!("DAGEXEC_BUILD_COMMIT"))
                .filter(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit())),
            describe: non_empty(env!("DAGEXEC_BUILD_DESCRIBE")),
            release: env!("DAGEXEC_BUILD_KIND") == "release",
        }
    }

    /// The pinned `uses:` value for this build, or why there is none.
    pub fn pinned_action(&self) -> Result<ActionRef, InitError> {
        let Some(commit) = &self.commit else {
            return Err(InitError::CannotPin);
        };
        let comment = match (&self.describe, self.release) {
            (Some(tag), true) => tag.clone(),
            (Some(d), false) => format!("{d}, the commit this dagexec was built from"),
            (None, _) => "the commit this dagexec was built from".to_string(),
        };
        Ok(ActionRef {
            uses: format!("{}@{commit}", self.repository),
            comment: Some(comment),
        })
    }
}

/// `https://github.com/org/dagexec` → `org/dagexec`.
fn repository_slug(url: &str) -> String {
    let t = url.trim_end_matches('/').trim_end_matches(".git");
    let mut parts = t.rsplit('/');
    match (parts.next(), parts.next()) {
        (Some(name), Some(owner)) if !name.is_empty() && !owner.is_empty() => {
            format!("{owner}/{name}")
        }
        _ => "org/dagexec".to_string(),
    }
}

/// The action as the workflow's `uses:` names it, with the comment that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRef {
    pub uses: String,
    pub comment: Option<String>,
}

impl ActionRef {
    /// `--action REF`: `./` (this repository's own source), or `OWNER/REPO@REF` (a path
    /// inside the repository may follow `OWNER/REPO`).
    pub fn parse(s: &str) -> Result<ActionRef, InitError> {
        let s = s.trim();
        let remote = s.split_once('@').is_some_and(|(repo, r#ref)| {
            let mut parts = repo.split('/');
            let (owner, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            !owner.is_empty() && !name.is_empty() && !r#ref.is_empty() && !r#ref.contains('@')
        });
        let ok = !s.is_empty()
            && !s.contains(char::is_whitespace)
            && !s.contains('#')
            && (s.starts_with("./") || remote);
        if !ok {
            return Err(InitError::BadAction(s.to_string()));
        }
        Ok(ActionRef {
            uses: s.to_string(),
            comment: None,
        })
    }

    /// Built from this repository's own source (`./`).
    pub fn is_local(&self) -> bool {
        self.uses.starts_with("./")
    }

    /// Still the placeholder repository of dagexec's Cargo metadata (`org/dagexec@…`).
    pub fn is_placeholder(&self) -> bool {
        self.uses
            .strip_prefix(PLACEHOLDER_REPOSITORY)
            .is_some_and(|rest| rest.starts_with('@') || rest.starts_with('/'))
    }

    fn line(&self, uses: &str) -> String {
        match &self.comment {
            Some(c) => format!("uses: {uses} # {c}"),
            None => format!("uses: {uses}"),
        }
    }
}

/// What `init` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitOptions {
    pub action: ActionRef,
    pub worker: Worker,
    /// The repository secret the worker needs (`None`: none).
    pub secret: Option<String>,
    /// A GitHub environment for the work job, holding the secret (`None`: a repository secret).
    pub environment: Option<String>,
    /// `schedule: eager` (a conductor and a run per task) instead of rounds.
    pub eager: bool,
    /// The plan, relative to the repository root (the workflow's `plan` input's default).
    pub plan: String,
}

/// Why `init` cannot write the workflow.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InitError {
    #[error(
        "--action {0:?}: expected OWNER/REPO@REF (the repository dagexec's action is published in, at a commit or tag) or ./ (built from this repository)"
    )]
    BadAction(String),
    #[error("--worker: expected claude, codex, gemini, aider or one command line")]
    BadWorker,
    #[error(
        "--secret {0:?}: expected the name of a repository secret (letters, digits and _, not starting with a digit or GITHUB_)"
    )]
    BadSecret(String),
    #[error("--environment {0:?}: expected a name of letters, digits, -, _ and .")]
    BadEnvironment(String),
    #[error(
        "this dagexec was built without knowing its commit (not from a git checkout, nor by the release workflow), so it cannot pin the action; pass --action OWNER/REPO@<40-hex commit> (the commit of a release tag)"
    )]
    CannotPin,
    #[error(
        "{} is not in a git repository; the workflow belongs in one (run `git init`, or `cd` into your repository, then `dagexec init` again; --stdout prints it without writing)",
        .0.display()
    )]
    NotARepository(PathBuf),
    #[error(
        "{} is inside the git repository {top}, not its root: GitHub runs only the workflows in the root's .github/workflows, and the Action runs the plan from the root; run `dagexec init` in {top}, with the plan there",
        .0.display(), top = .1.display()
    )]
    NotTheRoot(PathBuf, PathBuf),
}

/// `root` is a git repository's root, where GitHub finds the workflow.
fn in_repository_root(root: &Path) -> Result<(), InitError> {
    let repo = crate::edge::git::Repo::discover(root)
        .map_err(|_| InitError::NotARepository(root.to_path_buf()))?;
    let top = repo
        .root()
        .canonicalize()
        .unwrap_or(repo.root().to_path_buf());
    if root.canonicalize().is_ok_and(|r| r != top) {
        return Err(InitError::NotTheRoot(root.to_path_buf(), top));
    }
    Ok(())
}

/// An environment's name, as `init` accepts it: letters, digits, `-`, `_` and `.`.
pub fn check_environment(name: &str) -> Result<String, InitError> {
    let n = name.trim();
    if !n.is_empty()
        && n.len() <= 255
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        Ok(n.to_string())
    } else {
        Err(InitError::BadEnvironment(name.to_string()))
    }
}

/// Checks a secret's name the way GitHub does.
pub fn check_secret(name: &str) -> Result<String, InitError> {
    let n = name.trim();
    let ok = !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !n.as_bytes()[0].is_ascii_digit()
        && !n.to_ascii_uppercase().starts_with("GITHUB_");
    if ok {
        Ok(n.to_string())
    } else {
        Err(InitError::BadSecret(name.to_string()))
    }
}

/// Writes the workflow under `root`; refuses to overwrite unless `force`.
pub fn write(root: &Path, text: &str, force: bool) -> Result<PathBuf, String> {
    let path = root.join(WORKFLOW_REL);
    if path.exists() && !force {
        return Err(format!(
            "{} exists; pass --force to replace it",
            path.display()
        ));
    }
    crate::edge::fsx::write(root, &path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// The arguments of `dagexec init` (its flags; the doc comments are `--help` text, printed
/// as written).
#[allow(clippy::doc_markdown)]
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The worker: claude, codex, gemini or aider (installed at a pinned version), or any
    /// command line that reads the prompt on stdin.
    #[arg(long, value_name = "claude|codex|gemini|aider|CMD")]
    pub worker: Option<String>,
    /// The repository secret the worker needs, passed to it as an environment variable of
    /// the same name and checked before it runs (default: the worker's own, e.g.
    /// ANTHROPIC_API_KEY; none for a command).
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,
    /// Keep the secret in this GitHub environment (the work job runs in it, so no other
    /// job can read the secret) instead of the repository's secrets.
    #[arg(long, value_name = "NAME")]
    pub environment: Option<String>,
    /// The action the workflow uses: the repository that holds dagexec's action.yml, at a
    /// commit or tag [default: this dagexec's own repository (Cargo.toml's `repository`) at
    /// the commit it was built from]; `./` builds it from the repository's own source.
    #[arg(long, value_name = "OWNER/REPO@REF")]
    pub action: Option<String>,
    /// `rounds`: one workflow run per round (a job matrix; the seeds' rounds). `eager`: a
    /// conductor job starts each task as its own run as soon as its blockers are
    /// committed and a slot is free, and commits each result as it arrives.
    #[arg(long, value_name = "rounds|eager", default_value = "rounds", value_parser = ["rounds", "eager"])]
    pub schedule: String,
    /// Replace an existing workflow file.
    #[arg(long)]
    pub force: bool,
    /// Print the workflow instead of writing it.
    #[arg(long)]
    pub stdout: bool,
}

/// `dagexec init`: decides the options (asking on a terminal when `--worker` is not given),
/// writes or prints the workflow for the plan at `plan` (relative to `root`: the one `run`
/// would read there), and says what to do next. Errors are usage errors.
pub fn run(
    root: &Path,
    plan: String,
    args: &Args,
    out: &mut impl std::io::Write,
) -> Result<(), String> {
    use std::io::IsTerminal;
    if !args.stdout {
        in_repository_root(root).map_err(|e| e.to_string())?;
    }
    let action = match &args.action {
        Some(a) => ActionRef::parse(a),
        None => Build::current().pinned_action(),
    }
    .map_err(|e| e.to_string())?;
    let interactive = args.worker.is_none()
        && !args.stdout
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal();
    let worker = match &args.worker {
        Some(w) => Worker::parse(w).map_err(|e| e.to_string())?,
        None if interactive => ask_worker()?,
        None => {
            eprintln!(
                "Not a terminal, so not asking: the worker is Claude Code (pass --worker claude|codex|gemini|aider|CMD to choose)."
            );
            Worker::claude()
        }
    };
    let secret = match &args.secret {
        Some(s) => Some(check_secret(s).map_err(|e| e.to_string())?),
        None if interactive => ask_secret(&worker)?,
        None => worker.default_secret().map(str::to_string),
    };
    let environment = args.environment.as_deref().map(check_environment);
    let environment = environment.transpose().map_err(|e| e.to_string())?;
    let opts = InitOptions {
        action,
        worker,
        secret,
        environment,
        eager: args.schedule == "eager",
        plan,
    };
    for w in warnings(&opts) {
        eprintln!("warning: {w}");
    }
    let text = render(&opts);
    if args.stdout {
        out.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let path = write(root, &text, args.force)?;
    let pin = match &opts.action.comment {
        Some(c) => format!("{} ({c})", opts.action.uses),
        None => opts.action.uses.clone(),
    };
    writeln!(
        out,
        "Wrote {}: plan {}, worker {}, action {pin}.\n{}",
        path.display(),
        opts.plan,
        opts.worker.label(),
        next_steps(&opts)
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// What the workflow would get wrong as written: a path of this machine in the worker's
/// command, an action in the placeholder repository.
pub fn warnings(opts: &InitOptions) -> Vec<String> {
    let mut out = Vec::new();
    let paths = opts.worker.local_paths();
    if !paths.is_empty() {
        out.push(format!(
            "--worker names {}, a path on this machine; the workflow runs on GitHub's runner, where it does not exist. Commit the script to the repository and name it relative to the root (e.g. --worker ./scripts/worker.sh), or name a command the runner has.",
            paths.join(", ")
        ));
    }
    if opts.action.is_placeholder() {
        out.push(format!(
            "the action is {}, the placeholder repository of dagexec's Cargo metadata, not a published action; pass --action OWNER/REPO@REF naming the repository that holds dagexec's action.yml (your fork, at a commit), or --action ./ to build it from this repository.",
            opts.action.uses
        ));
    }
    out
}

/// Asks which worker (dialoguer, on the terminal).
fn ask_worker() -> Result<Worker, String> {
    use dialoguer::{Input, Select};
    let cannot_ask = |e: dialoguer::Error| format!("cannot ask on the terminal: {e}");
    let mut items: Vec<String> = crate::pure::agents::AGENTS
        .iter()
        .map(crate::pure::agents::AgentCli::offer)
        .collect();
    items.push("Another command (installed by your own step)".to_string());
    let pick = Select::new()
        .with_prompt("Which worker runs the tasks?")
        .items(&items)
        .default(0)
        .interact()
        .map_err(cannot_ask)?;
    if let Some(agent) = crate::pure::agents::AGENTS.get(pick) {
        return Ok(Worker::Named(agent));
    }
    let cmd: String = Input::new()
        .with_prompt("The command (reads the prompt on stdin)")
        .validate_with(|c: &String| Worker::parse(c).map(drop).map_err(|e| e.to_string()))
        .interact_text()
        .map_err(cannot_ask)?;
    Worker::parse(&cmd).map_err(|e| e.to_string())
}

/// Asks which repository secret holds `worker`'s API key (dialoguer, on the terminal).
fn ask_secret(worker: &Worker) -> Result<Option<String>, String> {
    let cannot_ask = |e: dialoguer::Error| format!("cannot ask on the terminal: {e}");
    let default = worker.default_secret().unwrap_or("").to_string();
    let name: String = dialoguer::Input::new()
        .with_prompt("The repository secret holding its API key (empty: none)")
        .default(default)
        .allow_empty(true)
        .validate_with(|s: &String| {
            if s.trim().is_empty() {
                Ok(())
            } else {
                check_secret(s).map(drop).map_err(|e| e.to_string())
            }
        })
        .interact_text()
        .map_err(cannot_ask)?;
    Ok(Some(name.trim().to_string()).filter(|s| !s.is_empty()))
}

/// The three commands to run after `init`, numbered.
pub fn next_steps(opts: &InitOptions) -> String {
    let env = opts.environment.as_ref().map(|e| format!(" --env {e}"));
    let secret = match &opts.secret {
        Some(s) => format!(
            "gh secret set {s}{}    # the worker's API key; paste it when asked",
            env.unwrap_or_default()
        ),
        None => "# no secret: the worker needs none (else rerun with --secret NAME)".to_string(),
    };
    format!(
        "Next:\n  1. {secret}\n  2. git add {WORKFLOW_REL} && git commit -m \"Run the plan with dagexec\" && git push\n  3. gh workflow run dagexec.yml    # or Actions → dagexec → Run workflow\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned() -> ActionRef {
        Build {
            repository: "org/dagexec".into(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            describe: Some("v1.2.3".into()),
            release: true,
        }
        .pinned_action()
        .unwrap()
    }

    fn opts(worker: &str) -> InitOptions {
        let worker = Worker::parse(worker).unwrap();
        InitOptions {
            action: pinned(),
            secret: worker.default_secret().map(str::to_string),
            worker,
            environment: None,
            eager: false,
            plan: DEFAULT_PLAN.into(),
        }
    }

    #[test]
    fn the_template_names_the_action_and_a_worker() {
        let t = render(&InitOptions {
            action: ActionRef::parse("./").unwrap(),
            worker: Worker::parse("sh -c 'it''s'").unwrap(),
            secret: None,
            environment: None,
            eager: false,
            plan: DEFAULT_PLAN.into(),
        });
        assert_eq!(
            t.matches("uses: ./\n").count(),
            4,
            "comment, steer (both on the default branch), work and task"
        );
        assert_eq!(
            t.matches(&format!("uses: ./{TRUSTED_ACTION_DIR}\n"))
                .count(),
            3,
            "plan, conduct and finalize run the action from the default branch:\n{t}"
        );
        assert!(!t.contains("org/dagexec@v1"));
        assert!(!t.contains("@worker"), "{t}");
        assert!(!t.contains("@trusted-action@"), "{t}");
        assert!(t.contains("worker: 'sh -c ''it''''s'''\n"), "{t}");
        assert!(ActionRef::parse("a b").is_err());
        assert!(ActionRef::parse("v1").is_err());
        let v: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
        assert_eq!(v["jobs"]["work"]["permissions"]["contents"], "read");
    }

    /// The `build` pin reaches every job that runs dagexec only through what task code cannot
    /// write: the dispatch input (set by dagexec's trusted jobs) and the outputs of the `plan`
    /// and `comment` jobs; and no expression reaches a `run:` text.
    #[test]
    fn the_build_pin_travels_only_through_trusted_channels() {
        let t = render(&opts("claude"));
        let v: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
        let declared = &v["on"]["workflow_dispatch"]["inputs"];
        assert_eq!(declared["build"]["type"], "string");
        // GitHub's limit on workflow_dispatch inputs (10 before 2025's 25).
        assert!(declared.as_mapping().unwrap().len() <= 10);
        let expected = [
            ("comment", ""),
            ("steer", "${{ needs.comment.outputs.build }}"),
            ("plan", "${{ inputs.build }}"),
            ("work", "${{ needs.plan.outputs.build }}"),
            ("task", "${{ inputs.build }}"),
            ("conduct", "${{ needs.plan.outputs.build }}"),
            ("finalize", "${{ needs.plan.outputs.build }}"),
        ];
        for (job, pin) in expected {
            let steps = v["jobs"][job]["steps"].as_sequence().unwrap();
            let step = steps
                .iter()
                .find(|s| s["with"]["command"].as_str().is_some())
                .unwrap_or_else(|| panic!("job {job} runs no dagexec step"));
            assert_eq!(
                step["with"]["build"].as_str().unwrap_or(""),
                pin,
                "job {job}'s build pin"
            );
            for s in steps {
                if let Some(run) = s["run"].as_str() {
                    assert!(
                        !run.contains("${{"),
                        "job {job}: an expression in run: {run}"
                    );
                }
            }
        }
        assert_eq!(
            v["jobs"]["plan"]["outputs"]["build"],
            "${{ steps.plan.outputs.build }}"
        );
        assert_eq!(
            v["jobs"]["comment"]["outputs"]["build"],
            "${{ steps.comment.outputs.build }}"
        );
    }

    #[test]
    fn every_job_that_fetches_gets_a_read_token_and_the_work_job_no_write() {
        let t = render(&opts("claude"));
        let v: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
        let jobs = v["jobs"].as_mapping().unwrap();
        for (name, job) in jobs {
            let contents = job["permissions"]["contents"].as_str();
            assert!(
                matches!(contents, Some("read" | "write")),
                "job {name:?} fetches and needs contents: read at least"
            );
        }
        let work = &v["jobs"]["work"];
        for (k, level) in work["permissions"].as_mapping().unwrap() {
            assert_eq!(level, "read", "work job permission {k:?}");
        }
        let plan_step = v["jobs"]["plan"]["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "plan")
            .unwrap();
        assert_eq!(plan_step["with"]["token"], "${{ secrets.GITHUB_TOKEN }}");
        let work_step = work["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "work")
            .unwrap();
        assert!(
            work_step["with"]["token"].is_null(),
            "the work job's action gets no token"
        );
    }

    #[test]
    fn init_pins_the_action_by_commit_with_the_tag_as_comment() {
        let t = render(&opts("claude"));
        assert_eq!(
            t.matches("uses: org/dagexec@0123456789abcdef0123456789abcdef01234567 # v1.2.3\n")
                .count(),
            7,
            "comment, steer, plan, work, task, conduct, finalize:\n{t}"
        );
        let source = Build {
            repository: "org/dagexec".into(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            describe: Some("v1.2.3-4-g0123456".into()),
            release: false,
        };
        assert_eq!(
            source.pinned_action().unwrap().comment.as_deref(),
            Some("v1.2.3-4-g0123456, the commit this dagexec was built from")
        );
        let unknown = Build {
            commit: None,
            ..source
        };
        assert_eq!(unknown.pinned_action(), Err(InitError::CannotPin));
        assert_eq!(repository_slug("https://github.com/acme/x.git"), "acme/x");
    }

    #[test]
    fn known_workers_are_installed_pinned_and_their_secret_checked_first() {
        for (w, install, secret) in [
            (
                "claude",
                "npm install --global --no-audit --no-fund @anthropic-ai/claude-code@",
                "ANTHROPIC_API_KEY",
            ),
            (
                "codex",
                "npm install --global --no-audit --no-fund @openai/codex@",
                "OPENAI_API_KEY",
            ),
            (
                "gemini",
                "npm install --global --no-audit --no-fund @google/gemini-cli@",
                "GEMINI_API_KEY",
            ),
            ("aider", "pipx install aider-chat==", "ANTHROPIC_API_KEY"),
        ] {
            let t = render(&opts(w));
            let check = t
                .find(&format!("- name: Check the {secret} secret"))
                .unwrap();
            let inst = t.find(install).unwrap_or_else(|| panic!("{w}: {t}"));
            let work = t.find("      - id: work\n").unwrap();
            assert!(check < inst && inst < work, "{w}: check, install, work");
            assert!(t.contains(&format!(
                "        env:\n          {secret}: ${{{{ secrets.{secret} }}}}\n"
            )));
            // Machine output on, so spend is recorded and max-cost counts.
            assert!(
                ["--output-format json", "--json", "--message-file"]
                    .iter()
                    .any(|f| t.contains(f)),
                "{w}"
            );
            assert!(
                !t.contains("--full-auto"),
                "{w}: codex has no --full-auto at 0.169.0"
            );
        }
        assert_eq!(check_secret("MY_KEY").unwrap(), "MY_KEY");
        for bad in ["", "1X", "GITHUB_TOKEN", "A-B", "a b"] {
            assert!(check_secret(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generated_workflows() {
        for w in ["claude", "codex", "gemini", "aider"] {
            insta::assert_snapshot!(format!("init_{w}"), render(&opts(w)));
        }
        let custom = InitOptions {
            action: ActionRef::parse("./").unwrap(),
            worker: Worker::parse("my-agent --yes").unwrap(),
            secret: Some("MY_AGENT_KEY".into()),
            environment: Some("agents".into()),
            eager: true,
            plan: ".taskmaster/tasks/tasks.json".into(),
        };
        insta::assert_snapshot!("init_local_custom", render(&custom));
        insta::assert_snapshot!("init_next_steps", next_steps(&opts("claude")));
    }

    /// `--schedule eager`: the plan job conducts, with the conductor's permissions; the
    /// rounds workflow's plan job stays read-only and hands nothing over.
    #[test]
    fn the_eager_workflows_plan_job_conducts_with_the_conductors_permissions() {
        let plan_job = |eager: bool| {
            let t = render(&InitOptions {
                eager,
                ..opts("claude")
            });
            let v: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
            v["jobs"]["plan"].clone()
        };
        let step = |job: &serde_yaml::Value| {
            job["steps"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|s| s["id"] == "plan")
                .unwrap()["with"]
                .clone()
        };
        let eager = plan_job(true);
        assert_eq!(step(&eager)["schedule"], "eager");
        assert_eq!(step(&eager)["conduct"], true);
        let t = render(&InitOptions {
            eager: true,
            ..opts("claude")
        });
        let v: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
        assert_eq!(eager["permissions"], v["jobs"]["conduct"]["permissions"]);
        let rounds = plan_job(false);
        assert_eq!(step(&rounds)["schedule"], "rounds");
        assert!(step(&rounds)["conduct"].is_null());
        let perms = rounds["permissions"].as_mapping().unwrap();
        assert_eq!(perms.len(), 1);
        assert_eq!(rounds["permissions"]["contents"], "read");
    }

    #[test]
    fn init_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "x", false).unwrap();
        assert!(
            write(dir.path(), "y", false)
                .unwrap_err()
                .contains("--force")
        );
        write(dir.path(), "y", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(WORKFLOW_REL)).unwrap(),
            "y"
        );
    }
}
