//! The run's settings: flags first, then `DAGEXEC_*` environment variables, then
//! `.design/dagexec.yml`, then defaults. Converted here into plain values for the runner.
//! One exception, on the Action: the model gateway's settings, which the branch's file may
//! only tighten ([`tighten`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::pure::engine::Schedule;
use crate::pure::gateway::Provider;
use crate::pure::overlap::Policy;
use crate::pure::usage::Budget;

mod tighten;
pub use tighten::{Loosening, gateway_on_action, prices_on_action};

/// Default per-task timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// `.design/dagexec.yml`: defaults for `dagexec run` in this repository.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The worker command line.
    pub worker: Option<String>,
    /// Workers at once.
    pub jobs: Option<usize>,
    /// Per-task timeout, e.g. `30m`.
    pub timeout: Option<String>,
    /// `rounds`, `waves` or `eager`.
    pub schedule: Option<String>,
    /// `serial` or `merge`: may tasks sharing files run at the same time.
    pub overlap: Option<String>,
    /// The reviewer command line (the conductor seed's reviewer), none by default.
    pub reviewer: Option<String>,
    /// The budget in USD (`5`, `12.50`): no attempt starts once the plan's recorded spend
    /// reaches it. None by default.
    #[serde(rename = "max-cost")]
    pub max_cost: Option<String>,
    /// List prices in USD per million tokens for the CLIs that report tokens but no cost
    /// (codex, gemini), each entry replacing the default of its name ([`crate::pure::prices`]).
    pub prices: Option<serde_yaml::Value>,
    /// The folder that holds the worker worktrees (a folder per repository in it), instead of
    /// the user's cache; relative to the repository's top; never inside its work tree.
    pub worktrees: Option<String>,
    /// `on` (the default) or `off`: dagexec's model gateway between the workers and their
    /// providers (the workers hold no key, spend is counted as it streams).
    pub gateway: Option<String>,
    /// A budget per task in USD, enforced by the gateway request by request.
    #[serde(rename = "max-task-cost")]
    pub max_task_cost: Option<String>,
    /// At most this many model requests per attempt (the gateway refuses the next).
    #[serde(rename = "max-requests")]
    pub max_requests: Option<u32>,
    /// Requests and tokens per minute per provider, held by the gateway for every worker
    /// together: `{anthropic: {requests-per-minute: 50, tokens-per-minute: 400000}}`.
    #[serde(rename = "rate-limits")]
    pub rate_limits: Option<serde_yaml::Value>,
}

/// The model gateway's settings (`gateway`, `max-task-cost`, `max-requests`,
/// `rate-limits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// Whether workers reach their providers through the gateway.
    pub on: bool,
    pub max_task_cost: Option<crate::pure::usage::Budget>,
    pub max_requests: Option<u32>,
    /// Requests and tokens per minute, per provider that has limits.
    pub rates: BTreeMap<Provider, crate::pure::gateway::window::Rate>,
}

/// The gateway's settings: `DAGEXEC_GATEWAY`, `DAGEXEC_MAX_TASK_COST`, `DAGEXEC_MAX_REQUESTS`,
/// then the file; on by default, no task cap, no request cap.
pub fn gateway(
    env: &dyn Fn(&str) -> Option<String>,
    file: &FileConfig,
) -> Result<GatewaySettings, ConfigError> {
    let on = file.layered(env, None, "gateway", on_off)?.unwrap_or(true);
    let max_task_cost = file.layered(env, None, "max-task-cost", Budget::parse)?;
    let max_requests = file.layered(env, None, "max-requests", number)?;
    if max_requests == Some(0) {
        return Err(value("max-requests", "must be at least 1".into()));
    }
    let rates = match &file.rate_limits {
        Some(v) => crate::pure::gateway::window::rates(v).map_err(|(field, message)| {
            value(&field, format!("{message} (in .design/dagexec.yml)"))
        })?,
        None => BTreeMap::new(),
    };
    Ok(GatewaySettings {
        on,
        max_task_cost,
        max_requests,
        rates,
    })
}

/// What the model gateway starts from for a run of `plan` by `worker` (locally, or one
/// attempt's job on the Action): the providers' keys and base URLs from `env` (dagexec's
/// environment), the run's `max_cost` against what the plan recorded before, the per-task
/// cap and the request cap of `settings`, and the price table in use. With it, a warning
/// to say: a user's Codex configuration the gateway cannot follow stops only a worker that
/// runs Codex; any other is told and goes on.
pub fn gateway_config(
    env: &dyn Fn(&str) -> Option<String>,
    plan: &crate::pure::plan::model::Plan,
    max_cost: Option<crate::pure::usage::Budget>,
    settings: &GatewaySettings,
    worker: &str,
) -> Result<(crate::edge::gateway::Config, Option<String>), ConfigError> {
    use crate::edge::gateway::{Budgets, Config, Upstreams};
    // OpenAI's upstream: the provider the user's own Codex configuration selects, unless
    // OPENAI_BASE_URL says otherwise (then the file is not read, nor can it stop the run).
    let user_codex = env("OPENAI_BASE_URL")
        .filter(|v| !v.trim().is_empty())
        .map_or_else(crate::edge::gateway::user_codex_file, |_| None);
    let mut warning = None;
    let codex = match user_codex {
        Some((path, text)) => match text
            .map_err(|why| crate::pure::gateway::codex::CodexConfigError {
                field: String::new(),
                message: format!("cannot be read: {why}"),
            })
            .and_then(|t| crate::pure::gateway::codex::selected(&t))
        {
            Ok(codex) => codex,
            Err(source) => {
                let e = ConfigError::Codex {
                    path: path.display().to_string(),
                    source,
                };
                let codex_runs =
                    crate::pure::gateway::held::provider_of(worker, None) == Some(Provider::OpenAi);
                if codex_runs {
                    return Err(e);
                }
                warning = Some(format!(
                    "{e}. The worker does not run Codex, so the model gateway sends any OpenAI request to OpenAI's own API; fix the file before a Codex worker runs through dagexec, or set OPENAI_BASE_URL."
                ));
                None
            }
        },
        None => None,
    };
    let task_recorded = crate::pure::usage::per_task(plan)
        .into_iter()
        .filter_map(|(task, t)| t.cost_usd.map(|c| (task, c)))
        .collect();
    let config = Config {
        upstreams: Upstreams::from_env(env).with_codex(codex.as_ref(), env),
        budgets: Budgets {
            run: max_cost.map(|b| (b.usd(), crate::pure::usage::spent(plan))),
            task: settings.max_task_cost.map(Budget::usd),
            max_requests: settings.max_requests,
        },
        prices: crate::pure::prices::current().clone(),
        task_recorded,
    };
    Ok((config, warning))
}

/// A whole number, as `DAGEXEC_JOBS` and `DAGEXEC_MAX_REQUESTS` give one.
fn number<T: std::str::FromStr>(n: &str) -> Result<T, String> {
    n.trim()
        .parse()
        .map_err(|_| format!("{n:?} is not a number"))
}

/// A [`ConfigError::Value`] for `field`.
fn value(field: &str, message: String) -> ConfigError {
    ConfigError::Value {
        field: field.into(),
        message,
    }
}

/// A [`ConfigError::File`] of `.design/dagexec.yml`.
fn file_error(message: String) -> ConfigError {
    ConfigError::File {
        path: ".design/dagexec.yml".into(),
        message,
    }
}

fn on_off(v: &str) -> Result<bool, String> {
    match v.trim() {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        other => Err(format!("{other:?} is neither on nor off")),
    }
}

impl FileConfig {
    /// Setting `key` by its precedence: the flag, else `DAGEXEC_<KEY>` in the environment
    /// (`max-cost`: `DAGEXEC_MAX_COST`), else the file (`None`: none gives it); a value from
    /// the environment or the file is parsed by `parse`, an error named by where it came from.
    fn layered<T>(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        flag: Option<T>,
        key: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        if flag.is_some() {
            return Ok(flag);
        }
        let var = format!("DAGEXEC_{}", key.to_uppercase().replace('-', "_"));
        let (from, text) = match (env(&var), self.text(key)) {
            (Some(v), _) => (var, v),
            (None, Some(v)) => (key.to_string(), v),
            (None, None) => return Ok(None),
        };
        parse(&text).map(Some).map_err(|m| value(&from, m))
    }

    /// The file's value of setting `key` ([`FileConfig::layered`]), as text.
    fn text(&self, key: &str) -> Option<String> {
        match key {
            "jobs" => self.jobs.map(|n| n.to_string()),
            "max-requests" => self.max_requests.map(|n| n.to_string()),
            "timeout" => self.timeout.clone(),
            "schedule" => self.schedule.clone(),
            "overlap" => self.overlap.clone(),
            "max-cost" => self.max_cost.clone(),
            "gateway" => self.gateway.clone(),
            "max-task-cost" => self.max_task_cost.clone(),
            other => unreachable!("no layered setting {other}"),
        }
    }

    /// The price table: the defaults with the file's `prices:` over them.
    pub fn prices(&self) -> Result<crate::pure::prices::Prices, ConfigError> {
        crate::pure::prices::Prices::with(self.prices.as_ref()).map_err(file_error)
    }
}

/// Why the settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error(
        "no worker command: pass --worker, set DAGEXEC_WORKER, or add `worker:` to .design/dagexec.yml"
    )]
    NoWorker,
    #[error("{field}: {message}")]
    Value { field: String, message: String },
    /// The user's own Codex configuration, whose provider the gateway would send to.
    #[error("{path}: {source}")]
    Codex {
        path: String,
        source: crate::pure::gateway::codex::CodexConfigError,
    },
}

impl ConfigError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            ConfigError::NoWorker => worker_examples(),
            ConfigError::File { .. } => {
                "Keys are worker, jobs, timeout, schedule, overlap, reviewer, max-cost, prices, worktrees, gateway, max-task-cost, max-requests and rate-limits; see docs/src/settings.md.".into()
            }
            ConfigError::Value { .. } => "See `dagexec run --help` for the accepted values.".into(),
            ConfigError::Codex { .. } => "dagexec's model gateway sends Codex's requests to the provider your Codex configuration selects; fix that field, set OPENAI_BASE_URL in dagexec's environment, or turn the gateway off (gateway: off)".into(),
        }
    }
}

/// Shown when no worker is configured: the agent CLIs dagexec knows by name (the one table,
/// [`crate::pure::agents`]) and the command line each name stands for. The prompt arrives on
/// stdin and in `$DAGEXEC_PROMPT_FILE`; the last stdout line is the status.
pub fn worker_examples() -> String {
    let mut s = String::from(
        "a worker is any command that reads the task's prompt (stdin, or the file $DAGEXEC_PROMPT_FILE),
  does the work in the current directory, and prints a last line COMPLETED: …, FAILED: … or BLOCKED: …
  an agent CLI by name (each name stands for the command line after it):\n",
    );
    for a in &crate::pure::agents::AGENTS {
        s.push_str(&format!(
            "  dagexec run --worker {:<7} {}\n",
            a.name, a.command
        ));
    }
    s.push_str("  or once for the repository, in .design/dagexec.yml:   worker: claude");
    s
}

/// Reads `.design/dagexec.yml` under `root`, if present.
pub fn read_file_config(root: &Path) -> Result<FileConfig, ConfigError> {
    let path = root.join(".design/dagexec.yml");
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().is_empty() => Ok(FileConfig::default()),
        Ok(text) => serde_yaml::from_str(&text).map_err(|e| file_error(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
        Err(e) => Err(file_error(e.to_string())),
    }
}

/// Parses `30s`, `5m`, `1h30m` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.trim().parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (examples: 30s, 5m, 1h30m)"))
}

/// `rounds`, `waves` or `eager`.
pub fn parse_schedule(s: &str) -> Result<Schedule, String> {
    match s.trim() {
        "rounds" => Ok(Schedule::Rounds),
        "waves" => Ok(Schedule::Waves),
        "eager" => Ok(Schedule::Eager),
        other => Err(format!(
            "unknown schedule {other:?} (rounds, waves or eager)"
        )),
    }
}

/// Settings given on the command line (None = not given).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub worker: Option<String>,
    pub jobs: Option<usize>,
    pub timeout: Option<Duration>,
    pub schedule: Option<Schedule>,
    pub overlap: Option<crate::pure::overlap::Policy>,
    pub reviewer: Option<String>,
    pub max_cost: Option<crate::pure::usage::Budget>,
}

/// The run's resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub worker: String,
    pub jobs: usize,
    pub timeout: Duration,
    pub schedule: Schedule,
    /// Whether tasks sharing files run at the same time (`merge`) or apart (`serial`).
    pub overlap: crate::pure::overlap::Policy,
    /// Reviews every completed attempt when set (see `review`).
    pub reviewer: Option<String>,
    /// The budget: no attempt starts once the plan's recorded spend reaches it.
    pub max_cost: Option<crate::pure::usage::Budget>,
    /// Where the worker worktrees go instead of the user's cache, and which setting said so.
    pub worktrees: Option<WorktreesHome>,
}

/// A folder for the worker worktrees named by a setting (see [`crate::edge::git::Repo::with_worktrees_home`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreesHome {
    pub dir: std::path::PathBuf,
    /// `DAGEXEC_WORKTREES` or `worktrees (.design/dagexec.yml)`, for messages.
    pub from: &'static str,
}

/// Flags, then the environment (`DAGEXEC_WORKER`, `DAGEXEC_JOBS`, `DAGEXEC_TIMEOUT`,
/// `DAGEXEC_SCHEDULE`, `DAGEXEC_OVERLAP`, `DAGEXEC_REVIEWER`, `DAGEXEC_MAX_COST`, `DAGEXEC_WORKTREES`), then the
/// file, then defaults (jobs: the number of cores; no budget; worktrees in the user's cache).
pub fn resolve(
    flags: &Flags,
    env: &dyn Fn(&str) -> Option<String>,
    file: &FileConfig,
) -> Result<Settings, ConfigError> {
    // An empty value (`DAGEXEC_WORKER=`) gives none, and the next place is asked.
    let given = |w: &String| !w.trim().is_empty();
    let worker = (flags.worker.clone().filter(given))
        .or_else(|| env("DAGEXEC_WORKER").filter(given))
        .or_else(|| file.worker.clone().filter(given))
        .map(|w| crate::pure::agents::command_of(&w))
        .ok_or(ConfigError::NoWorker)?;
    let jobs = file.layered(env, flags.jobs, "jobs", number)?;
    let jobs = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
    if jobs == 0 {
        return Err(value("jobs", "must be at least 1".into()));
    }
    let timeout = file.layered(env, flags.timeout, "timeout", parse_duration)?;
    if timeout == Some(Duration::ZERO) {
        return Err(value(
            "timeout",
            "must be more than 0 (each worker's time)".into(),
        ));
    }
    let schedule = file.layered(env, flags.schedule, "schedule", parse_schedule)?;
    let overlap = file.layered(env, flags.overlap, "overlap", Policy::parse)?;
    let reviewer = flags
        .reviewer
        .clone()
        .or_else(|| env("DAGEXEC_REVIEWER"))
        .or_else(|| file.reviewer.clone())
        .filter(|r| !r.trim().is_empty());
    let max_cost = file.layered(env, flags.max_cost, "max-cost", Budget::parse)?;
    let worktrees = match (env("DAGEXEC_WORKTREES"), &file.worktrees) {
        (Some(d), _) if !d.trim().is_empty() => Some(WorktreesHome {
            dir: d.into(),
            from: "DAGEXEC_WORKTREES",
        }),
        (_, Some(d)) if !d.trim().is_empty() => Some(WorktreesHome {
            dir: d.into(),
            from: "worktrees (.design/dagexec.yml)",
        }),
        _ => None,
    };
    Ok(Settings {
        worker,
        jobs,
        timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
        schedule: schedule.unwrap_or(Schedule::Rounds),
        overlap: overlap.unwrap_or(Policy::Serial),
        reviewer,
        max_cost,
        worktrees,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_on_unless_turned_off() {
        let none = |_: &str| None;
        let on = gateway(&none, &FileConfig::default()).unwrap();
        assert_eq!(
            (on.on, on.max_task_cost, on.max_requests),
            (true, None, None)
        );
        let file = FileConfig {
            gateway: Some("off".into()),
            max_task_cost: Some("$0.50".into()),
            max_requests: Some(40),
            ..FileConfig::default()
        };
        let g = gateway(&none, &file).unwrap();
        assert!(!g.on);
        assert_eq!(
            g.max_task_cost.map(crate::pure::usage::Budget::usd),
            Some(0.5)
        );
        assert_eq!(g.max_requests, Some(40));
        let env = |k: &str| (k == "DAGEXEC_GATEWAY").then(|| "on".to_string());
        assert!(gateway(&env, &file).unwrap().on);
        let bad = |k: &str| (k == "DAGEXEC_GATEWAY").then(|| "maybe".to_string());
        let e = gateway(&bad, &file).unwrap_err().to_string();
        assert_eq!(e, "DAGEXEC_GATEWAY: \"maybe\" is neither on nor off");
        let parsed: FileConfig =
            serde_yaml::from_str("gateway: off\nmax-task-cost: 2\nmax-requests: 5\n").unwrap();
        assert_eq!(parsed.gateway.as_deref(), Some("off"));
    }

    #[test]
    fn precedence_flag_env_file_default() {
        let file = FileConfig {
            worker: Some("from-file".into()),
            jobs: Some(3),
            timeout: Some("5m".into()),
            schedule: Some("waves".into()),
            overlap: Some("merge".into()),
            reviewer: Some("from-file-reviewer".into()),
            max_cost: Some("$2.50".into()),
            prices: None,
            worktrees: Some("../wt".into()),
            ..FileConfig::default()
        };
        let none = |_: &str| None;
        let s = resolve(&Flags::default(), &none, &file).unwrap();
        assert_eq!(s.overlap, crate::pure::overlap::Policy::Merge);
        let serial = |k: &str| (k == "DAGEXEC_OVERLAP").then(|| "serial".to_string());
        let from_env = resolve(&Flags::default(), &serial, &file).unwrap();
        assert_eq!(from_env.overlap, crate::pure::overlap::Policy::Serial);
        let bad = |k: &str| (k == "DAGEXEC_OVERLAP").then(|| "locks".to_string());
        assert_eq!(
            resolve(&Flags::default(), &bad, &file)
                .unwrap_err()
                .to_string(),
            "DAGEXEC_OVERLAP: unknown overlap policy \"locks\" (serial or merge)"
        );
        assert_eq!(
            resolve(&Flags::default(), &none, &FileConfig::default())
                .map(|s| s.overlap)
                .ok(),
            None,
            "no worker"
        );
        assert_eq!(
            (s.worker.as_str(), s.jobs, s.timeout, s.schedule),
            ("from-file", 3, Duration::from_secs(300), Schedule::Waves)
        );
        let env = |k: &str| match k {
            "DAGEXEC_WORKER" => Some("from-env".to_string()),
            "DAGEXEC_JOBS" => Some("7".to_string()),
            _ => None,
        };
        let s = resolve(&Flags::default(), &env, &file).unwrap();
        assert_eq!((s.worker.as_str(), s.jobs), ("from-env", 7));
        assert_eq!(s.reviewer.as_deref(), Some("from-file-reviewer"));
        assert_eq!(s.max_cost.map(crate::pure::usage::Budget::usd), Some(2.5));
        assert_eq!(
            s.worktrees.as_ref().map(|w| (w.dir.as_path(), w.from)),
            Some((
                std::path::Path::new("../wt"),
                "worktrees (.design/dagexec.yml)"
            ))
        );
        let env_wt = |k: &str| (k == "DAGEXEC_WORKTREES").then(|| "/elsewhere".to_string());
        let s = resolve(&Flags::default(), &env_wt, &file).unwrap();
        assert_eq!(
            s.worktrees,
            Some(WorktreesHome {
                dir: "/elsewhere".into(),
                from: "DAGEXEC_WORKTREES"
            })
        );
        let env_budget = |k: &str| (k == "DAGEXEC_MAX_COST").then(|| "0".to_string());
        let e = resolve(&Flags::default(), &env_budget, &file).unwrap_err();
        assert!(e.to_string().starts_with("DAGEXEC_MAX_COST: \"0\""), "{e}");
        let flags = Flags {
            worker: Some("from-flag".into()),
            jobs: Some(1),
            ..Default::default()
        };
        let s = resolve(&flags, &env, &file).unwrap();
        assert_eq!((s.worker.as_str(), s.jobs), ("from-flag", 1));
        let s = resolve(&flags, &none, &FileConfig::default()).unwrap();
        assert_eq!((s.timeout, s.schedule), (DEFAULT_TIMEOUT, Schedule::Rounds));
    }

    /// `--worker claude` (or `DAGEXEC_WORKER`, `worker:`) is the command line `init --worker
    /// claude` writes, not a bare `claude` that waits for a terminal.
    #[test]
    fn a_known_name_is_the_command_init_writes() {
        let none = |_: &str| None;
        for (name, command) in [
            ("claude", crate::pure::agents::CLAUDE_COMMAND),
            ("codex", crate::pure::agents::CODEX_COMMAND),
            ("gemini", crate::pure::agents::GEMINI_COMMAND),
            ("aider", crate::pure::agents::AIDER_COMMAND),
        ] {
            let flags = Flags {
                worker: Some(name.into()),
                ..Default::default()
            };
            let s = resolve(&flags, &none, &FileConfig::default()).unwrap();
            assert_eq!(s.worker, command, "{name}");
            let file = FileConfig {
                worker: Some(name.into()),
                ..Default::default()
            };
            let s = resolve(&Flags::default(), &none, &file).unwrap();
            assert_eq!(s.worker, command, "{name} in the settings file");
        }
        let flags = Flags {
            worker: Some("claude -p".into()),
            ..Default::default()
        };
        let s = resolve(&flags, &none, &FileConfig::default()).unwrap();
        assert_eq!(s.worker, "claude -p");
    }

    /// `DAGEXEC_WORKER=` (set, empty) gives no worker, as an empty `DAGEXEC_WORKTREES` gives
    /// no folder: the file's `worker:` is used, not refused with "no worker command".
    #[test]
    fn an_empty_worker_variable_leaves_the_files_worker() {
        let empty = |k: &str| (k == "DAGEXEC_WORKER").then(String::new);
        let file = FileConfig {
            worker: Some("./w.sh".into()),
            ..Default::default()
        };
        let s = resolve(&Flags::default(), &empty, &file).unwrap();
        assert_eq!(s.worker, "./w.sh");
        let e = resolve(&Flags::default(), &empty, &FileConfig::default()).unwrap_err();
        assert!(matches!(e, ConfigError::NoWorker));
    }

    /// `--timeout 0` (often "no limit" elsewhere) would kill every worker as it starts and
    /// spend each task's attempts on nothing: refused, wherever it comes from.
    #[test]
    fn a_zero_timeout_is_refused() {
        let flags = Flags {
            worker: Some("w".into()),
            timeout: Some(Duration::ZERO),
            ..Default::default()
        };
        let none = |_: &str| None;
        let e = resolve(&flags, &none, &FileConfig::default()).unwrap_err();
        assert!(e.to_string().starts_with("timeout: "), "{e}");
        let env = |k: &str| (k == "DAGEXEC_TIMEOUT").then(|| "0s".to_string());
        let flags = Flags {
            timeout: None,
            ..flags
        };
        assert!(resolve(&flags, &env, &FileConfig::default()).is_err());
    }

    #[test]
    fn durations_are_humantime_or_plain_seconds() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 1h30m "), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "soon", "5x", "-1"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("examples: 30s, 5m, 1h30m"), "{bad:?}: {e}");
        }
        let flags = Flags {
            worker: Some("w".into()),
            ..Default::default()
        };
        let env = |k: &str| (k == "DAGEXEC_TIMEOUT").then(|| "soon".to_string());
        let e = resolve(&flags, &env, &FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("DAGEXEC_TIMEOUT: "), "{e}");
        assert!(e.contains("examples: 30s"), "{e}");
    }

    #[test]
    fn errors_say_what_to_do() {
        let none = |_: &str| None;
        let e = resolve(&Flags::default(), &none, &FileConfig::default()).unwrap_err();
        assert!(matches!(e, ConfigError::NoWorker));
        assert!(e.hint().contains("claude -p"));
        assert!(
            e.hint()
                .contains("codex exec --json --sandbox workspace-write")
        );
        assert!(e.hint().contains("gemini --output-format json"));
        assert!(!e.hint().contains("--full-auto"));
        // The same commands `dagexec init` writes, each by the name that stands for it.
        for a in &crate::pure::agents::AGENTS {
            assert!(
                e.hint()
                    .contains(&format!("--worker {:<7} {}\n", a.name, a.command)),
                "{}",
                a.command
            );
        }
        assert!(e.hint().contains("aider"));
        let flags = Flags {
            worker: Some("w".into()),
            jobs: Some(0),
            ..Default::default()
        };
        assert_eq!(
            resolve(&flags, &none, &FileConfig::default())
                .unwrap_err()
                .to_string(),
            "jobs: must be at least 1"
        );
        let file = FileConfig {
            schedule: Some("fast".into()),
            ..Default::default()
        };
        let flags = Flags {
            worker: Some("w".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve(&flags, &none, &file).unwrap_err().to_string(),
            "schedule: unknown schedule \"fast\" (rounds, waves or eager)"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".design")).unwrap();
        std::fs::write(dir.path().join(".design/dagexec.yml"), "wroker: x\n").unwrap();
        let e = read_file_config(dir.path()).unwrap_err().to_string();
        assert!(
            e.starts_with(".design/dagexec.yml: unknown field `wroker`"),
            "{e}"
        );
        std::fs::write(
            dir.path().join(".design/dagexec.yml"),
            "worker: ./w.sh\njobs: 2\n",
        )
        .unwrap();
        assert_eq!(read_file_config(dir.path()).unwrap().jobs, Some(2));
        std::fs::write(
            dir.path().join(".design/dagexec.yml"),
            "prices:\n  gpt-5.5: {input: 1, output: 8}\n  my-model: {input: x, output: 1}\n",
        )
        .unwrap();
        let e = read_file_config(dir.path())
            .unwrap()
            .prices()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(".design/dagexec.yml: prices: "), "{e}");
        std::fs::write(
            dir.path().join(".design/dagexec.yml"),
            "prices:\n  gpt-5.5: {input: 1, cached-input: 0.1, output: 8}\n",
        )
        .unwrap();
        let p = read_file_config(dir.path()).unwrap().prices().unwrap();
        assert_eq!(p.find("gpt-5.5").unwrap().1.output, 8.0);
    }
}
