//! dagexec's model gateway: an HTTP pass-through on 127.0.0.1 between the agent CLIs and
//! their providers (Anthropic Messages, `OpenAI` Responses, Gemini), inside dagexec's own
//! process. It holds the provider keys (read from dagexec's environment as before); each
//! attempt gets a [`Pass`] — a random token the gateway accepts only while that attempt runs
//! — and its worker is pointed at the gateway with the token instead of a key
//! ([`Pass::worker_env`]).
//!
//! A request passes unchanged but for its key headers (the token out, the provider's key in)
//! and hop-by-hop headers; its body and the response's stream flow through as they arrive.
//! On the way the gateway reads each response's usage ([`crate::pure::gateway::meter`]) and
//! adds it to the attempt's tab as it arrives, so an attempt killed mid-stream keeps what it
//! spent; it refuses a model request past the run's or the task's budget or the attempt's
//! request cap, in the provider's own error shape; and a provider's 429 or 529 with a
//! `retry-after` holds every worker's next request to that provider until then.
//!
//! Nothing here logs a header or a body: keys and tokens never reach a log.

mod forward;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::edge::lock::held;
use std::time::{Duration, Instant};

use crate::edge::github::Token;
use crate::edge::github::ops::encode_segment;
use crate::pure::gateway::meter::Reading;
use crate::pure::gateway::{Provider, Tokens};

/// A provider key, redacted in `Debug`.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    header: &'static str,
    value: Token,
}

impl Key {
    /// `provider`'s key `value`, read from the variable `var`, in the header it goes in.
    fn of(provider: Provider, var: &str, value: &str) -> Key {
        let (header, value) = provider.key_header(var, value.trim());
        let value = Token::new(value);
        Key { header, value }
    }
}

/// Where one provider's requests go: its base URL and key, and what a user's Codex provider
/// adds to every request (query parameters, headers: redacted in `Debug`).
#[derive(Debug, Clone)]
pub struct Upstream {
    pub base: String,
    key: Option<Key>,
    /// The variable the key is read from, for the message when it is unset.
    key_var: String,
    /// Without a key, requests go without one (a user's Codex provider that names no key of
    /// its own, as Codex sends them) instead of being refused.
    keyless: bool,
    /// `name=value` pairs, encoded and joined with `&`, added to the query (empty: none).
    query: Token,
    /// Headers added upstream (values may be credentials).
    headers: Vec<(String, Token)>,
}

/// The providers' base URLs and keys, read from dagexec's environment.
#[derive(Debug, Clone)]
pub struct Upstreams(BTreeMap<Provider, Upstream>);

impl Upstreams {
    /// From `env` (dagexec's environment): each provider's base URL variable (its default
    /// when unset) and its key variables ([`Provider::key_vars`], the first set wins).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Upstreams {
        let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        Upstreams(
            Provider::ALL
                .into_iter()
                .map(|p| {
                    let (var, default) = p.base();
                    let base = set(var).unwrap_or_else(|| default.to_string());
                    let vars = p.key_vars();
                    let upstream = Upstream {
                        base: base.trim().trim_end_matches('/').to_string(),
                        key: vars.iter().find_map(|v| set(v).map(|k| Key::of(p, v, &k))),
                        key_var: vars[0].to_string(),
                        keyless: false,
                        query: Token::new(""),
                        headers: Vec::new(),
                    };
                    (p, upstream)
                })
                .collect(),
        )
    }

    /// `OpenAI`'s upstream taken from the provider a user's Codex configuration selects
    /// (`codex`) when `OPENAI_BASE_URL` is unset in `env`: its base URL; its key as Codex
    /// picks it — its `experimental_bearer_token`, else the variable its `env_key` names,
    /// else `OPENAI_API_KEY` for a provider that `requires_openai_auth`, and none at all for
    /// any other (the user's `OpenAI` key is never a third party's); its query parameters and
    /// headers (`env_http_headers` read from `env`; one whose variable is unset is left out,
    /// as Codex does).
    pub fn with_codex(
        mut self,
        codex: Option<&crate::pure::gateway::codex::CodexProvider>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Upstreams {
        let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let (Some(codex), None) = (codex, set(Provider::OpenAi.base().0)) else {
            return self;
        };
        let Some(up) = self.0.get_mut(&Provider::OpenAi) else {
            return self;
        };
        up.base.clone_from(&codex.base_url);
        if let Some(token) = &codex.bearer_token {
            up.key = Some(Key::of(
                Provider::OpenAi,
                "experimental_bearer_token",
                token,
            ));
        } else if let Some(var) = &codex.env_key {
            up.key = set(var).map(|k| Key::of(Provider::OpenAi, var, &k));
            up.key_var.clone_from(var);
        } else if !codex.openai_auth {
            up.key = None;
            up.keyless = true;
        }
        let query = codex.query_params.iter();
        let query = query.map(|(k, v)| format!("{}={}", encode_segment(k), encode_segment(v)));
        up.query = Token::new(query.collect::<Vec<_>>().join("&"));
        let from_env = codex.env_http_headers.iter();
        let from_env = from_env.filter_map(|(k, var)| set(var).map(|v| (k.clone(), v)));
        let all = codex.http_headers.clone().into_iter().chain(from_env);
        up.headers = all.map(|(k, v)| (k, Token::new(v))).collect();
        self
    }
}

/// The run's budget as the gateway holds it: the limit and what the plan had recorded when
/// the run started (this run's spend is the gateway's own).
#[derive(Debug, Clone, Copy, Default)]
pub struct Budgets {
    /// The run's `max-cost` in USD, and the spend the plan recorded before this run.
    pub run: Option<(f64, f64)>,
    /// The per-task cap in USD.
    pub task: Option<f64>,
    /// Model requests per attempt.
    pub max_requests: Option<u32>,
}

/// What an attempt has spent, as the gateway saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spend {
    /// Tokens per model.
    pub tokens: BTreeMap<String, Tokens>,
    /// Their cost, where the price table knows the model.
    pub cost_usd: f64,
    /// Models the price table lacks (their tokens are counted, not priced).
    pub unpriced: BTreeSet<String>,
    /// Model requests started.
    pub requests: u32,
    /// A model request was refused: the run's or the task's budget was spent, or the
    /// request cap reached (the message the agent got).
    pub refused: Option<String>,
    /// Each provider's 429 and 529 answers and the latest instant a `retry-after` held it
    /// until ([`crate::pure::gateway::held`]): on the Action, the attempt's record carries
    /// them to the conductor.
    pub rate_limits: Vec<crate::pure::usage::limited::Limited>,
}

impl Spend {
    /// Every model's tokens together.
    pub fn total(&self) -> Tokens {
        self.tokens
            .values()
            .fold(Tokens::default(), |a, t| a.plus(*t))
    }

    /// As the attempt's record counts it (prompt tokens with cache reads and writes); the
    /// model that spent most output; the cost of what the price table priced — beside a
    /// model it lacks, a floor (none when nothing was priced), as `max-cost` counted it.
    pub fn usage(&self) -> crate::pure::usage::Usage {
        let t = self.total();
        let priced = self.unpriced.is_empty() || self.cost_usd > 0.0;
        crate::pure::usage::Usage {
            cost_usd: (priced && !self.tokens.is_empty()).then_some(self.cost_usd),
            input_tokens: Some(t.prompt()),
            output_tokens: Some(t.output),
            model: self
                .tokens
                .iter()
                .max_by_key(|(_, t)| t.output)
                .map(|(m, _)| m.clone()),
        }
    }
}

/// One attempt's account at the gateway: its spend, in a channel a watcher of the attempt
/// (the file that keeps it through a crash of dagexec) follows as it grows.
#[derive(Debug)]
struct Tab {
    task: usize,
    spend: tokio::sync::watch::Sender<Spend>,
}

impl Tab {
    /// Changes the attempt's spend (its watchers see the change), under the tab's lock: `f`
    /// must not read the tab. It may take the run's spend (`Shared::limits`); the lock order
    /// is a tab's, then the run's spend, never the other way.
    fn change<R>(&self, f: impl FnOnce(&mut Spend) -> R) -> R {
        let mut out = None;
        self.spend.send_modify(|s| out = Some(f(s)));
        out.expect("send_modify runs its closure")
    }
}

/// What every connection shares (no `Debug`: it holds the keys and the tokens).
struct Shared {
    config: Config,
    tabs: Mutex<HashMap<String, Arc<Tab>>>,
    /// This run's spend through the gateway: the whole run's, and per task.
    run_spend: Mutex<(f64, BTreeMap<usize, f64>)>,
    /// Until when a provider's rate limit holds every worker's next request.
    holds: Mutex<BTreeMap<Provider, Instant>>,
    /// The requests- and tokens-per-minute windows of the providers that have limits
    /// ([`Gateway::pace`]), their time counted from `origin`.
    windows: Mutex<BTreeMap<Provider, crate::pure::gateway::window::Window>>,
    origin: Instant,
    /// The tokens of every pass together, as they grow ([`Gateway::watch`]).
    total: tokio::sync::watch::Sender<Spend>,
}

impl Shared {
    /// Counts one response's reading `now` (from `provider`) in place of its reading before,
    /// `was` — a stream's usage grows, and a later event may move tokens between kinds (Gemini
    /// names a prompt's cached part late) — in `tab`, the run's and the task's spend, and in
    /// the provider's tokens-per-minute window.
    fn count(&self, tab: &Tab, provider: Provider, was: &Reading, now: &Reading) {
        if now.tokens == Tokens::default() || now == was {
            return;
        }
        let all = |t: Tokens| t.prompt().saturating_add(t.output);
        if let Some(w) = held(&self.windows).get_mut(&provider) {
            let grown = all(now.tokens).saturating_sub(all(was.tokens));
            w.spent(self.origin.elapsed(), grown);
        }
        let model = |r: &Reading| r.model.clone().unwrap_or_else(|| "unknown".to_string());
        let (was_model, now_model) = (model(was), model(now));
        let price = |m: &str, t| crate::pure::gateway::cost(&self.config.prices, m, t);
        let now_cost = price(&now_model, now.tokens);
        let cost = now_cost.unwrap_or(0.0) - price(&was_model, was.tokens).unwrap_or(0.0);
        let grow = |s: &mut Spend| {
            if was.tokens != Tokens::default() {
                let entry = s.tokens.entry(was_model.clone()).or_default();
                *entry = entry.since(was.tokens);
            }
            let entry = s.tokens.entry(now_model.clone()).or_default();
            *entry = entry.plus(now.tokens);
            s.cost_usd += cost;
            if now_cost.is_none() {
                s.unpriced.insert(now_model.clone());
            }
        };
        tab.change(grow);
        self.total.send_modify(grow);
        let mut run = held(&self.run_spend);
        run.0 += cost;
        *run.1.entry(tab.task).or_default() += cost;
    }

    /// Counts a 429 or 529 answer of `provider` to `tab`'s request (the run's too), and
    /// the instant its `retry-after` holds the provider until.
    fn rate_limited(&self, tab: &Tab, provider: Provider, until: Option<jiff::Timestamp>) {
        let saw =
            |s: &mut Spend| crate::pure::usage::limited::saw(&mut s.rate_limits, provider, until);
        tab.change(saw);
        self.total.send_modify(saw);
    }

    /// The limits for `tab`'s next request.
    fn limits(&self, tab: &Tab) -> crate::pure::gateway::Limits {
        let run = held(&self.run_spend);
        let (budgets, recorded) = (&self.config.budgets, &self.config.task_recorded);
        let task_live = run.1.get(&tab.task).copied().unwrap_or(0.0);
        let task_before = recorded.get(&tab.task).copied().unwrap_or(0.0);
        crate::pure::gateway::Limits {
            run: budgets.run.map(|(limit, before)| (limit, before + run.0)),
            task: budgets.task.map(|cap| (cap, task_before + task_live)),
            max_requests: budgets.max_requests,
        }
    }
}

/// The running gateway; dropping it stops it.
pub struct Gateway {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

/// What a gateway starts from: the providers, the budgets and prices, and what the plan
/// recorded per task before this run.
#[derive(Debug)]
pub struct Config {
    pub upstreams: Upstreams,
    pub budgets: Budgets,
    pub prices: crate::pure::prices::Prices,
    pub task_recorded: BTreeMap<usize, f64>,
}

impl Gateway {
    /// Listens on 127.0.0.1 and a free port (loopback only: nothing off this machine reaches
    /// it). Call inside a tokio runtime.
    pub async fn start(config: Config) -> std::io::Result<Gateway> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            tabs: Mutex::new(HashMap::new()),
            run_spend: Mutex::new((0.0, BTreeMap::new())),
            holds: Mutex::new(BTreeMap::new()),
            windows: Mutex::new(BTreeMap::new()),
            origin: Instant::now(),
            total: tokio::sync::watch::Sender::new(Spend::default()),
        });
        let server = tokio::spawn(forward::serve(listener, shared.clone()));
        Ok(Gateway {
            addr,
            shared,
            server,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A new pass for attempt `attempt` of task `task`: a random token the gateway accepts
    /// until the pass is dropped.
    pub fn open(&self, task: usize) -> std::io::Result<Pass> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut token = String::from("dagexec-");
        for b in bytes {
            token.push_str(&format!("{b:02x}"));
        }
        let tab = Arc::new(Tab {
            task,
            spend: tokio::sync::watch::Sender::new(Spend::default()),
        });
        held(&self.shared.tabs).insert(token.clone(), tab.clone());
        Ok(Pass {
            token,
            url: self.url(),
            tab,
            shared: self.shared.clone(),
        })
    }

    /// Holds each provider's model requests to its requests and tokens per minute (`rates`,
    /// the `rate-limits:` setting), every worker's together: a request waits at the gateway
    /// until the provider's last minute lets it start.
    pub fn pace(&self, rates: &BTreeMap<Provider, crate::pure::gateway::window::Rate>) {
        *held(&self.shared.windows) = rates
            .iter()
            .map(|(p, r)| (*p, crate::pure::gateway::window::Window::new(*r)))
            .collect();
    }

    /// Holds `provider`'s model requests until `until` (the Action's work job starts from
    /// the holds the attempt records at its base leave, [`crate::pure::gateway::held::Holds`]):
    /// at most [`crate::pure::gateway::MAX_HOLD`] from now, nothing when `until` is past.
    pub fn hold_until(&self, provider: Provider, until: jiff::Timestamp) {
        let left = jiff::Timestamp::now().duration_until(until);
        if let Ok(left) = Duration::try_from(left)
            && !left.is_zero()
        {
            hold(
                &self.shared,
                provider,
                left.min(crate::pure::gateway::MAX_HOLD),
            );
        }
    }

    /// The tokens and cost of every pass together as they grow (requests and refusals stay
    /// each pass's own): the Action's work job, whose gateway serves one attempt — its worker
    /// and its reviewer — keeps the attempt's record from it while it runs.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<Spend> {
        self.shared.total.subscribe()
    }
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gateway({})", self.addr)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One attempt's access to the gateway: its token, valid until the pass is dropped.
pub struct Pass {
    token: String,
    url: String,
    tab: Arc<Tab>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pass(task {}, <redacted>)", self.tab.task)
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        held(&self.shared.tabs).remove(&self.token);
    }
}

/// The variables that carry a provider's key or point a CLI somewhere else: none of them
/// reaches a worker the gateway serves (they are replaced by [`Pass::worker_env`]).
pub const PROVIDER_VARS: [&str; 14] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_API_KEY",
    "CODEX_ACCESS_TOKEN",
    "CODEX_HOME",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// The variables no worker the gateway serves gets: [`PROVIDER_VARS`], and those the
/// user's Codex provider reads its key and headers from (`env_key`, `env_http_headers`).
pub fn withheld_vars() -> Vec<String> {
    let mut vars: Vec<String> = PROVIDER_VARS.iter().map(|v| (*v).to_string()).collect();
    if let Some(Ok(Some(p))) = user_codex_file()
        .and_then(|(_, text)| text.ok().map(|t| crate::pure::gateway::codex::selected(&t)))
    {
        vars.extend(p.env_key);
        vars.extend(p.env_http_headers.into_values());
    }
    vars
}

impl Pass {
    /// What the attempt has spent so far.
    pub fn spend(&self) -> Spend {
        self.tab.spend.borrow().clone()
    }

    /// The attempt's spend as it grows: the receiver sees every change (coalesced: a
    /// watcher that is behind sees the latest), and its `changed()` ends once the pass and
    /// every response still streaming for it are gone.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<Spend> {
        self.tab.spend.subscribe()
    }

    /// The worker's variables: each CLI's base URL pointed at the gateway with the token as
    /// its key — Claude Code's `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`, Gemini CLI's
    /// `GOOGLE_GEMINI_BASE_URL` and `GEMINI_API_KEY`, `OPENAI_BASE_URL` and `OPENAI_API_KEY`
    /// for `OpenAI` clients, and for Codex (which takes its provider from its configuration)
    /// `CODEX_HOME`, a folder `codex_home` whose `config.toml` is the user's own
    /// ([`user_codex_file`]) with a provider `dagexec` at the gateway made the one in use;
    /// and [`URL_VAR`], the gateway itself. The worker's spawner removes every other variable
    /// of [`PROVIDER_VARS`] when it sees [`URL_VAR`].
    pub fn worker_env(
        &self,
        codex_home: &std::path::Path,
    ) -> std::io::Result<Vec<(String, String)>> {
        let url = &self.url;
        std::fs::create_dir_all(codex_home)?;
        let user = user_codex_file()
            .and_then(|(_, text)| text.ok())
            .unwrap_or_default();
        let config = codex_config(&user, url);
        // A scratch file of this attempt alone: written once, never through a link (one left
        // there is replaced), without the sync a durable write pays (it cost the Action's
        // work job tens of milliseconds).
        let path = codex_home.join("config.toml");
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::io::Write::write_all(
            &mut std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new().write(true).create_new(true),
                0o644,
            )
            .open(&path)?,
            config.as_bytes(),
        )?;
        Ok([
            (URL_VAR, url.clone()),
            ("ANTHROPIC_BASE_URL", format!("{url}/anthropic")),
            ("ANTHROPIC_API_KEY", self.token.clone()),
            ("OPENAI_BASE_URL", format!("{url}/openai")),
            ("OPENAI_API_KEY", self.token.clone()),
            ("GOOGLE_GEMINI_BASE_URL", format!("{url}/gemini")),
            ("GEMINI_API_KEY", self.token.clone()),
            ("CODEX_HOME", codex_home.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect())
    }
}

/// A pass at the model gateway for a run of task `task`'s worker or reviewer, and that run's
/// variables (the gateway's URL, and each CLI pointed at it with the pass's token, Codex's
/// configuration in `codex_home`: [`Pass::worker_env`], that folder
/// handed to the agent's user when task code runs as one); nothing when the gateway is off.
/// A pass that cannot be made fails closed: the run still gets no provider key.
pub fn pass_for(
    gateway: Option<&Gateway>,
    task: usize,
    codex_home: &std::path::Path,
) -> (Option<Pass>, Vec<(String, String)>) {
    let Some(gateway) = gateway else {
        return (None, Vec::new());
    };
    let closed = vec![(URL_VAR.to_string(), gateway.url())];
    let pass = match gateway.open(task) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("task {task}: no pass at the model gateway: {e}");
            return (None, closed);
        }
    };
    let env = pass
        .worker_env(codex_home)
        .and_then(|env| crate::edge::agent_user::hand_over(codex_home).map(|()| env))
        .unwrap_or_else(|e| {
            tracing::warn!("task {task}: cannot prepare the gateway settings: {e}");
            closed
        });
    (Some(pass), env)
}

/// The variable that tells a worker (and its spawner) the gateway serves it: its URL.
pub const URL_VAR: &str = "DAGEXEC_GATEWAY";

/// The user's own Codex configuration, to build an attempt's on, and where it was read:
/// `$CODEX_HOME/config.toml`, else `~/.codex/config.toml` (at most 1 MiB); `Err`: why a file
/// that is there cannot be read (Codex could not read it either).
pub fn user_codex_file() -> Option<(std::path::PathBuf, Result<String, String>)> {
    let home = std::env::var_os("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".codex")))?;
    let path = home.join("config.toml");
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => Err(e.to_string()),
        Ok(m) if !m.is_file() => Err("not a file".into()),
        Ok(m) if m.len() > 1 << 20 => Err("larger than 1 MiB".into()),
        Ok(_) => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
    };
    Some((path, text))
}

/// Codex's `config.toml` for an attempt: the user's own (`user`), every `model_provider`
/// choice taken out (the top level's and each profile's), with `model_provider = "dagexec"`
/// and the provider `dagexec` (the gateway's `/openai`, the Responses API, the key from
/// `OPENAI_API_KEY`: the token), keeping the retry and timeout settings of the provider the
/// user had chosen (at the top level or in the selected profile) and leaving out every
/// provider's headers, query parameters and bearer token. The file is read as TOML and
/// written again, so however it writes a key (a table, a dotted key, an inline table, within
/// a multi-line string) it is judged as Codex reads it; a file that is not TOML gives only
/// the gateway's provider (Codex would refuse the file itself; the run refuses it first when
/// it reads the file, [`crate::pure::gateway::codex::selected`]).
fn codex_config(user: &str, url: &str) -> String {
    use toml::{Table, Value};
    const CARRIED: [&str; 3] = [
        "request_max_retries",
        "stream_max_retries",
        "stream_idle_timeout_ms",
    ];
    const SECRET: [&str; 3] = ["http_headers", "query_params", "experimental_bearer_token"];
    let mut doc: Table = toml::from_str(user).unwrap_or_default();
    // The provider Codex would use: the top level's choice, or the selected profile's.
    let chosen = crate::pure::gateway::codex::chosen(&doc).ok().flatten();
    // Nothing may choose another provider: not the top level, not a profile.
    doc.remove("model_provider");
    if let Some(Value::Table(profiles)) = doc.get_mut("profiles") {
        for profile in profiles.iter_mut().filter_map(|(_, p)| p.as_table_mut()) {
            profile.remove("model_provider");
        }
    }
    let mut ours = Table::new();
    for (k, v) in [
        ("name", "dagexec gateway".to_string()),
        ("base_url", format!("{url}/openai")),
        ("env_key", "OPENAI_API_KEY".to_string()),
        ("wire_api", "responses".to_string()),
    ] {
        ours.insert(k.to_string(), Value::String(v));
    }
    let providers = doc
        .entry("model_providers")
        .or_insert_with(|| Value::Table(Table::new()));
    if !providers.is_table() {
        *providers = Value::Table(Table::new());
    }
    let providers = providers.as_table_mut().expect("made a table above");
    if let Some((id, _)) = chosen
        && let Some(theirs) = providers.get(&id).and_then(Value::as_table)
    {
        ours.extend(
            CARRIED
                .iter()
                .filter_map(|k| Some(((*k).to_string(), theirs.get(*k)?.clone()))),
        );
    }
    // A provider's headers, query parameters and token may be credentials: the gateway
    // adds them upstream, the agent's user never reads them.
    for provider in providers.iter_mut().filter_map(|(_, p)| p.as_table_mut()) {
        for k in SECRET {
            provider.remove(k);
        }
    }
    providers.insert("dagexec".to_string(), Value::Table(ours));
    doc.insert(
        "model_provider".to_string(),
        Value::String("dagexec".into()),
    );
    toml::to_string(&doc).unwrap_or_default()
}

/// A hold on `provider` until `until` (a later hold wins).
fn hold(shared: &Shared, provider: Provider, for_: Duration) {
    let until = Instant::now() + for_;
    let mut holds = held(&shared.holds);
    let slot = holds.entry(provider).or_insert(until);
    *slot = (*slot).max(until);
}

#[cfg(test)]
mod tests;
