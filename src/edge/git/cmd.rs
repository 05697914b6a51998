//! The one place a `git` process is started: a fixed, hermetic-enough environment and the
//! settings every call needs for stable output, plus the errors a failed call turns into.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::{GitError, PatchFile, PatchRef};

/// Variables that would point git at another repository, index or object store than the
/// directory we run it in (git's own `git rev-parse --local-env-vars`, less the `-c` config it
/// passes on), or that change how pathspecs and diffs are read. A hook exports several of them,
/// so a dagexec started from a hook (or its tests run from one) must not inherit them.
const STRIPPED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_CONFIG",
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
    "GIT_DIFF_OPTS",
    "GIT_EXTERNAL_DIFF",
];

/// Settings passed with `-c` to every call: unquoted paths in output, no hooks (a
/// `post-checkout` hook would run on every worktree we add) and no file-system monitor (a
/// `core.fsmonitor` command would run on every status, diff and add: neither runs code a
/// repository's config names, nor a nested repository's, which git's `-c` reaches too), no
/// automatic gc or maintenance started behind our back between two of our commands, and no
/// signature verification printed into `git log`'s output (a user's `log.showSignature`).
const ALWAYS: &[&str] = &[
    "core.quotepath=off",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "log.showSignature=false",
];

#[cfg(test)]
thread_local! {
    /// Per-test environment changes (`None` removes the variable), applied after our fixed ones
    /// and before a call's own: lets a
    /// test give git an empty HOME without touching the process environment.
    pub(super) static TEST_ENV: std::cell::RefCell<Vec<(std::ffi::OsString, Option<std::ffi::OsString>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The git directory of each worker worktree this process made, by the worktree's path:
/// every git call in one is given it (`GIT_DIR`, `GIT_WORK_TREE`) and never reads the tree's
/// `.git` file, which the worker may have rewritten to name a git directory of its own (whose
/// config's commands, filters and `core.worktree` dagexec's git would then obey, after the
/// worker ended, outside its timeout and any sandbox it ran in).
static PINNED: std::sync::Mutex<std::collections::BTreeMap<PathBuf, PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// From now on git calls in the worktree at `tree` use the git directory `git_dir`.
pub(super) fn pin(tree: &Path, git_dir: PathBuf) {
    crate::edge::lock::held(&PINNED).insert(tree.to_path_buf(), git_dir);
}

/// The worktree at `tree` is gone (or moved): no longer pinned; the git directory it had.
pub(super) fn unpin(tree: &Path) -> Option<PathBuf> {
    crate::edge::lock::held(&PINNED).remove(tree)
}

/// Whether `key` is set in the environment git will see.
pub(super) fn env_is_set(key: &str) -> bool {
    #[cfg(test)]
    {
        let over = TEST_ENV.with(|e| {
            e.borrow()
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.is_some())
        });
        if let Some(set) = over {
            return set;
        }
    }
    std::env::var_os(key).is_some()
}

/// One git invocation being built: `git -c … <config> <args>` in `dir`.
pub(super) struct Git<'a> {
    cmd: Command,
    dir: &'a Path,
    label: &'static str,
    stdin: Option<PatchRef<'a>>,
}

/// Starts building `git …` in `dir`; `label` names the command in errors ("worktree add").
pub(super) fn git<'a>(dir: &'a Path, label: &'static str) -> Git<'a> {
    let mut cmd = bare(dir);
    for setting in ALWAYS {
        cmd.arg("-c").arg(setting);
    }
    if crate::edge::agent_user::current().is_some() {
        for setting in disarmed(dir) {
            cmd.arg("-c").arg(setting);
        }
    }
    // A process group of its own: the Ctrl-C a terminal sends to dagexec's group must not
    // kill git in the middle of a step (dagexec stops its own work cleanly, between steps).
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    Git {
        cmd,
        dir,
        label,
        stdin: None,
    }
}

/// The settings that keep the filters task code may choose from running, when task code
/// runs as another user (the Action's jobs, dagexec as root): every filter driver the
/// configuration names (`git lfs install`'s `lfs`, which a `.gitattributes` line asks for
/// and task code's `.lfsconfig` steers) made no filter, and no look into a nested
/// repository's work tree (git would run a `git status` there, under that repository's
/// config — task code's, with its filters). The diff still shows a nested repository's
/// commit.
fn disarmed(dir: &Path) -> Vec<String> {
    let named = bare(dir)
        .args(["config", "--name-only", "--get-regexp", r"^filter\."])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let drivers: std::collections::BTreeSet<&str> = named
        .lines()
        .filter_map(|key| key.strip_prefix("filter.")?.rsplit_once('.'))
        .map(|(name, _)| name)
        .collect();
    let blank = ["clean=", "smudge=", "process=", "required=false"];
    drivers
        .into_iter()
        .flat_map(|name| blank.map(|key| format!("filter.{name}.{key}")))
        .chain(["diff.ignoreSubmodules=dirty".to_string()])
        .collect()
}

/// `git` in `dir` with the fixed environment (the repository's variables removed, a pinned
/// worktree's git directory, no prompt, editor or pager, the C locale) and no argument yet.
fn bare(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir);
    for key in STRIPPED_ENV {
        cmd.env_remove(key);
    }
    if let Some(git_dir) = crate::edge::lock::held(&PINNED).get(dir) {
        cmd.env("GIT_DIR", git_dir).env("GIT_WORK_TREE", dir);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", ":")
        .env("GIT_PAGER", "cat")
        .env("LC_ALL", "C")
        .env("LANGUAGE", "C");
    #[cfg(test)]
    TEST_ENV.with(|e| {
        for (key, value) in e.borrow().iter() {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
    });
    cmd
}

/// `git status --porcelain -z` in `dir`, which sees every untracked file and into
/// submodules (not when task code runs as another user: [`disarmed`]), without taking the
/// index lock; `options` add to it (which ignored files show, the paths).
pub(super) fn status<'a>(dir: &'a Path, label: &'static str, options: &[&str]) -> Git<'a> {
    git(dir, label)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args(["status", "--porcelain", "-z", "--untracked-files=all"])
        .arg(if crate::edge::agent_user::current().is_some() {
            "--ignore-submodules=dirty"
        } else {
            "--ignore-submodules=none"
        })
        .args(options)
}

impl<'a> Git<'a> {
    /// Adds `-c key=value`: before the subcommand, so before any argument.
    pub(super) fn config(mut self, key_value: &str) -> Self {
        debug_assert!(
            self.cmd.get_args().step_by(2).all(|a| a == "-c"),
            "git -c {key_value} given after an argument ({})",
            self.label
        );
        self.cmd.arg("-c").arg(key_value);
        self
    }

    pub(super) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    pub(super) fn args<I>(mut self, args: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub(super) fn env(mut self, key: &'static str, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Aims git at the index file `index` (`GIT_INDEX_FILE`), when given, instead of the
    /// repository's own.
    pub(super) fn index(self, index: Option<&Path>) -> Self {
        match index {
            Some(index) => self.env("GIT_INDEX_FILE", index),
            None => self,
        }
    }

    /// Feeds `data` to git's standard input (closed otherwise), a patch file's in chunks.
    pub(super) fn stdin(mut self, data: impl Into<PatchRef<'a>>) -> Self {
        self.stdin = Some(data.into());
        self
    }

    /// The command as it would run (tests look at its environment and arguments).
    #[cfg(test)]
    fn command(self) -> Command {
        self.cmd
    }

    /// The error for a process that could not be started or waited for.
    fn spawn_error(&self) -> impl Fn(std::io::Error) -> GitError + '_ {
        |source| GitError::Spawn {
            command: self.label.to_owned(),
            dir: self.dir.to_path_buf(),
            source,
        }
    }

    /// Runs git to the end, whatever its exit status; `Err` only when it could not be run.
    ///
    /// Started again when it died of SIGINT or SIGTERM: git runs in a process group of its
    /// own, so only a signal sent to dagexec's group while the child was being started, before
    /// it left that group, can kill it so — before git ran at all (a terminal's Ctrl-C at
    /// that moment; dagexec stops its own work between steps).
    pub(super) fn output(&mut self) -> Result<Output, GitError> {
        use nix::sys::signal::Signal;
        use std::os::unix::process::ExitStatusExt;
        let mut out = self.output_once()?;
        for _ in 0..3 {
            let signal = out.status.signal().and_then(|n| Signal::try_from(n).ok());
            if !matches!(signal, Some(Signal::SIGINT | Signal::SIGTERM)) {
                break;
            }
            tracing::debug!(
                label = self.label,
                "git died of {signal:?} as it started; again"
            );
            out = self.output_once()?;
        }
        Ok(out)
    }

    fn output_once(&mut self) -> Result<Output, GitError> {
        tracing::debug!(dir = %self.dir.display(), args = ?self.cmd.get_args(), "git");
        let input = if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = self.cmd.stdin(input).spawn().map_err(self.spawn_error())?;
        let pipe = child.stdin.take();
        std::thread::scope(|scope| {
            if let (Some(mut pipe), Some(data)) = (pipe, self.stdin) {
                // A writer thread, so a large input cannot deadlock against git's output;
                // git may exit early (a broken pipe is then its own error to report).
                scope.spawn(move || {
                    let _ = data.write_to(&mut pipe);
                });
            }
            child.wait_with_output()
        })
        .map_err(self.spawn_error())
    }

    /// The error for a call that ended with `out`.
    pub(super) fn error(&self, out: &Output) -> GitError {
        if let Some(path) = index_lock(&out.stderr) {
            return GitError::IndexLocked {
                path: self.dir.join(path),
                dir: self.dir.to_path_buf(),
            };
        }
        GitError::Failed {
            command: self.label.to_owned(),
            dir: self.dir.to_path_buf(),
            stderr: describe_failure(out),
        }
    }

    /// Runs git, requiring success; returns its standard output.
    pub(super) fn run(&mut self) -> Result<Vec<u8>, GitError> {
        let out = self.output()?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.error(&out))
        }
    }

    /// [`Git::run`], the output as text without its trailing newlines.
    pub(super) fn run_text(&mut self) -> Result<String, GitError> {
        Ok(text(&self.run()?))
    }

    /// Runs git for a yes-or-no answer, exit 0 or 1 (git's "no", "none", "not found" or
    /// "conflict"; anything else is an error): whether it was 0, and the standard output.
    pub(super) fn answer(&mut self) -> Result<(bool, Vec<u8>), GitError> {
        let out = self.output()?;
        match out.status.code() {
            Some(code @ (0 | 1)) => Ok((code == 0, out.stdout)),
            _ => Err(self.error(&out)),
        }
    }

    /// Runs git, requiring success, with its standard output written straight into an
    /// unlinked temporary file: a patch of any size never passes through memory. No input.
    pub(super) fn run_to_file(&mut self) -> Result<PatchFile, GitError> {
        tracing::debug!(dir = %self.dir.display(), args = ?self.cmd.get_args(), "git (output to a file)");
        let file = tempfile::tempfile().map_err(self.spawn_error())?;
        let into = file.try_clone().map_err(self.spawn_error())?;
        let out = self.cmd.stdin(Stdio::null()).stdout(into).output();
        let out = out.map_err(self.spawn_error())?;
        if !out.status.success() {
            return Err(self.error(&out));
        }
        let len = file.metadata().map_err(self.spawn_error())?.len();
        Ok(PatchFile::new(file, len))
    }
}

/// The lock file a git error names when it could not take the index lock
/// (`fatal: Unable to create '<path>/index.lock': File exists.`).
fn index_lock(stderr: &[u8]) -> Option<PathBuf> {
    let stderr = String::from_utf8_lossy(stderr);
    stderr.lines().find_map(|line| {
        let rest = line.split_once("Unable to create '")?.1;
        let (path, tail) = rest.split_once("': ")?;
        (path.ends_with("index.lock") && tail.starts_with("File exists"))
            .then(|| PathBuf::from(path))
    })
}

/// Output bytes as text (lossy), trailing newlines removed.
pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches(['\n', '\r'])
        .to_owned()
}

/// Output bytes as text (lossy), one string a non-empty line.
pub(super) fn text_lines(bytes: &[u8]) -> Vec<String> {
    text(bytes)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// git's stderr, trimmed, or the exit status when it said nothing.
pub(super) fn describe_failure(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if !stderr.is_empty() {
        return stderr;
    }
    match out.status.code() {
        Some(code) => format!("exit status {code} (no message)"),
        None => match std::os::unix::process::ExitStatusExt::signal(&out.status)
            .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
        {
            Some(signal) => format!("killed by {signal} (no message)"),
            None => "killed by a signal (no message)".to_owned(),
        },
    }
}

/// A path printed by git (raw bytes, `core.quotepath=off` or `-z`), without its line end.
pub(super) fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(
        bytes.strip_suffix(b"\n").unwrap_or(bytes),
    ))
}

/// Where git keeps its file `name` for the checkout at `dir` (`git rev-parse --git-path`).
pub(super) fn git_path(dir: &Path, name: &str) -> Result<PathBuf, GitError> {
    let out = git(dir, "rev-parse --git-path")
        .args(["rev-parse", "--git-path", name])
        .run()?;
    Ok(dir.join(path_from_bytes(&out)))
}

/// Splits `-z` output into its NUL-terminated fields, as text (lossy).
pub(super) fn nul_fields(bytes: &[u8]) -> impl Iterator<Item = String> {
    bytes
        .split(|b| *b == 0)
        .filter(|field| !field.is_empty())
        .map(|field| String::from_utf8_lossy(field).into_owned())
}

/// `path` as a literal pathspec (no globbing, no magic from the name itself).
pub(super) fn literal(path: &str) -> String {
    format!(":(literal){path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_from_a_hook_are_stripped_and_prompts_disabled() {
        let cmd = git(Path::new("/"), "status").arg("status").command();
        let envs: Vec<_> = cmd.get_envs().collect();
        for key in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_COMMON_DIR",
        ] {
            assert!(envs.contains(&(OsStr::new(key), None)), "{key}");
        }
        assert!(envs.contains(&(OsStr::new("GIT_TERMINAL_PROMPT"), Some(OsStr::new("0")))));
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(&args[..2], ["-c", "core.quotepath=off"]);
        assert_eq!(args.last(), Some(&OsStr::new("status")));
    }

    /// `-c` must come before the subcommand: after it, git would take `-c key=value` for the
    /// subcommand's own option, or for a path.
    #[test]
    fn a_config_after_an_argument_is_caught() {
        let cmd = git(Path::new("/"), "log")
            .config("log.showSignature=false")
            .arg("log")
            .command();
        assert_eq!(
            cmd.get_args().filter(|a| *a == "-c").count(),
            ALWAYS.len() + 1
        );
        let late =
            std::panic::catch_unwind(|| git(Path::new("/"), "log").arg("log").config("a.b=c"));
        assert!(late.is_err(), "a -c after the subcommand passes unnoticed");
    }

    /// Issue 33 §3: a terminal's Ctrl-C goes to dagexec's whole process group; git runs in a
    /// group of its own, so the signal never kills it half-way through a step.
    #[test]
    fn git_runs_outside_dagexecs_process_group() {
        let out = git(Path::new("/"), "alias")
            .arg("-c")
            .arg("alias.pgid=!ps -o pgid= -p $$")
            .arg("pgid")
            .run()
            .expect("git runs the alias");
        let theirs: i32 = text(&out).trim().parse().expect("a process group id");
        assert_ne!(theirs, nix::unistd::getpgrp().as_raw());
    }

    /// A Ctrl-C that arrives while git is being started, before it leaves dagexec's group,
    /// still reaches it: the spawned child dies of SIGINT before git runs (found killing
    /// runs with Ctrl-C at random moments: `git rev-parse failed: killed by SIGINT`, the run
    /// ended with an error and the attempt in flight was spent). That git never ran, so it
    /// is started again. Shown with a `git` that dies of SIGINT on its first start.
    #[test]
    fn a_git_killed_by_sigint_before_it_ran_is_started_again() {
        let tmp = tempfile::tempdir().unwrap();
        let real = String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", "command -v git"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let mark = tmp.path().join("started");
        std::fs::write(
            tmp.path().join("git"),
            format!(
                "#!/bin/sh\nif [ ! -e '{m}' ]; then : > '{m}'; kill -INT $$; sleep 5; fi\nexec {real} \"$@\"\n",
                m = mark.display(),
                real = real.trim()
            ),
        )
        .unwrap();
        let mut perms = std::fs::metadata(tmp.path().join("git"))
            .unwrap()
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(tmp.path().join("git"), perms).unwrap();
        let path = format!(
            "{}:{}",
            tmp.path().display(),
            std::env::var("PATH").unwrap()
        );
        TEST_ENV.with(|e| e.borrow_mut().push(("PATH".into(), Some(path.into()))));
        let out = git(Path::new("/"), "version").arg("version").run();
        TEST_ENV.with(|e| e.borrow_mut().pop());
        assert!(mark.exists(), "the stand-in git ran");
        let out = out.expect("started again, git runs");
        assert!(text(&out).starts_with("git version"), "{}", text(&out));
    }
}
