//! The workers `init` knows: their pinned CLI versions, command lines, installs, secrets and
//! environment.

use super::InitError;

/// A worker `--worker` can name, or any command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worker {
    Claude,
    Codex,
    Gemini,
    Aider,
    Command(String),
}

/// The CLI versions `init` pins (bump together with the README), in one place: the commands
/// below are read from each version's `--help` and run against scripted model servers.
pub const CLAUDE_CODE_VERSION: &str = "2.1.328";
pub const CODEX_VERSION: &str = "0.169.0";
pub const GEMINI_CLI_VERSION: &str = "0.61.0";
pub const AIDER_VERSION: &str = "0.86.2";

/// Claude Code: machine output (the result object: cost, tokens, status line), edits in the
/// task's tree without asking (`acceptEdits`: Bash runs only read-only and file-system
/// commands; anything else, tests included, is refused unless allowed with
/// `--allowedTools 'Bash(npm test:*)'`), the task's model when the plan names one.
pub const CLAUDE_COMMAND: &str = r#"claude -p --output-format json --permission-mode acceptEdits ${DAGEXEC_MODEL:+--model "$DAGEXEC_MODEL"}"#;
/// Codex: JSONL events (tokens, the last message), its `workspace-write` sandbox (edits and
/// commands inside the tree, no network), a model the price table knows (codex's output
/// names none; plans name Claude models, so `DAGEXEC_MODEL` is not passed).
pub const CODEX_COMMAND: &str = "codex exec --json --sandbox workspace-write --model gpt-5.5 -";
/// Gemini CLI: its JSON result (response, token stats), `auto_edit` (edit tools approved,
/// no shell tool), the task's tree trusted (`--skip-trust`: it refuses to run headless in an
/// untrusted folder), the prompt on stdin (`--prompt=` appends nothing to it).
pub const GEMINI_COMMAND: &str =
    "gemini --output-format json --approval-mode auto_edit --skip-trust --prompt=";

impl Worker {
    /// The known names (`claude`, `codex`, `aider`), else the text as a command line.
    pub fn parse(s: &str) -> Result<Worker, InitError> {
        let t = s.trim();
        if t.is_empty() || t.contains(['\n', '\r']) {
            return Err(InitError::BadWorker);
        }
        Ok(match t {
            "claude" => Worker::Claude,
            "codex" => Worker::Codex,
            "gemini" => Worker::Gemini,
            "aider" => Worker::Aider,
            _ => Worker::Command(t.to_string()),
        })
    }

    /// Said in prompts and step names.
    pub fn label(&self) -> &str {
        match self {
            Worker::Claude => "Claude Code",
            Worker::Codex => "Codex CLI",
            Worker::Gemini => "Gemini CLI",
            Worker::Aider => "Aider",
            Worker::Command(c) => c,
        }
    }

    /// The command line the work job runs (prompt on stdin).
    pub fn command(&self) -> String {
        match self {
            Worker::Claude => CLAUDE_COMMAND.into(),
            Worker::Codex => CODEX_COMMAND.into(),
            Worker::Gemini => GEMINI_COMMAND.into(),
            Worker::Aider => "aider --yes-always --no-auto-commits --no-check-update --no-show-model-warnings --message-file /dev/stdin".into(),
            Worker::Command(c) => c.clone(),
        }
    }

    /// The secret the worker reads its API key from, by default.
    pub fn default_secret(&self) -> Option<&'static str> {
        match self {
            Worker::Claude | Worker::Aider => Some("ANTHROPIC_API_KEY"),
            Worker::Codex => Some("OPENAI_API_KEY"),
            Worker::Gemini => Some("GEMINI_API_KEY"),
            Worker::Command(_) => None,
        }
    }

    /// Variables the work job sets for the worker besides its secret: the CLI's own retry
    /// budget, so a dead API fails in seconds (claude retries a 500 or a 401 for about three
    /// minutes by default; with 3 retries, seconds).
    pub(super) fn env(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            Worker::Claude => &[("CLAUDE_CODE_MAX_RETRIES", "3")],
            _ => &[],
        }
    }

    /// The install step's name and command, for a known CLI.
    pub(super) fn install(&self) -> Option<(String, String)> {
        match self {
            Worker::Claude => Some((
                format!("Install the worker (Claude Code {CLAUDE_CODE_VERSION})"),
                format!(
                    "npm install --global --no-audit --no-fund @anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
                ),
            )),
            Worker::Codex => Some((
                format!("Install the worker (Codex CLI {CODEX_VERSION})"),
                format!("npm install --global --no-audit --no-fund @openai/codex@{CODEX_VERSION}"),
            )),
            // Its retry budget in its settings: 3 attempts at the main model, not 10.
            Worker::Gemini => Some((
                format!("Install the worker (Gemini CLI {GEMINI_CLI_VERSION})"),
                format!(
                    "npm install --global --no-audit --no-fund @google/gemini-cli@{GEMINI_CLI_VERSION} && mkdir -p ~/.gemini && echo '{{\"general\":{{\"maxAttempts\":3}}}}' > ~/.gemini/settings.json"
                ),
            )),
            Worker::Aider => Some((
                format!("Install the worker (Aider {AIDER_VERSION})"),
                format!("pipx install aider-chat=={AIDER_VERSION}"),
            )),
            Worker::Command(_) => None,
        }
    }
}
