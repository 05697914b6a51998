//! The agent CLIs dagexec knows by name (`claude`, `codex`, `gemini`, `aider`): one table
//! giving each its command line, the version `init` pins, its install and its secret. Both
//! `dagexec run --worker NAME` (the command line) and `dagexec init --worker NAME` (the
//! workflow) read it, so a name means the same command wherever it is given.

/// How a known CLI is installed on a runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Package {
    /// `npm install --global <name>@<version>`.
    Npm(&'static str),
    /// `pipx install <name>==<version>`.
    Pip(&'static str),
}

/// One agent CLI dagexec knows by name.
#[derive(Debug, PartialEq, Eq)]
pub struct AgentCli {
    /// The name `--worker` accepts (`claude`).
    pub name: &'static str,
    /// Said in prompts, step names and messages (`Claude Code`).
    pub label: &'static str,
    /// The version `init` installs, and the one the tests run.
    pub version: &'static str,
    pub package: Package,
    /// The command line a task's worker runs (the prompt on stdin).
    pub command: &'static str,
    /// The variable (and repository secret) its API key is read from.
    pub secret: &'static str,
    /// Variables the work job sets for it besides its secret.
    pub env: &'static [(&'static str, &'static str)],
    /// A shell command run after the install (its settings), if any.
    pub setup: Option<&'static str>,
}

/// The CLI versions `init` pins (bump together with the guide), in one place: the commands
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
/// Aider: no questions, no commits of its own, the prompt read from stdin.
pub const AIDER_COMMAND: &str = "aider --yes-always --no-auto-commits --no-check-update --no-show-model-warnings --message-file /dev/stdin";

/// Every agent CLI dagexec knows by name, in the order they are offered.
pub static AGENTS: [AgentCli; 4] = [
    AgentCli {
        name: "claude",
        label: "Claude Code",
        version: CLAUDE_CODE_VERSION,
        package: Package::Npm("@anthropic-ai/claude-code"),
        command: CLAUDE_COMMAND,
        secret: "ANTHROPIC_API_KEY",
        // The CLI's own retry budget, so a dead API fails in seconds (claude retries a 500 or
        // a 401 for about three minutes by default; with 3 retries, seconds).
        env: &[("CLAUDE_CODE_MAX_RETRIES", "3")],
        setup: None,
    },
    AgentCli {
        name: "codex",
        label: "Codex CLI",
        version: CODEX_VERSION,
        package: Package::Npm("@openai/codex"),
        command: CODEX_COMMAND,
        secret: "OPENAI_API_KEY",
        env: &[],
        setup: None,
    },
    AgentCli {
        name: "gemini",
        label: "Gemini CLI",
        version: GEMINI_CLI_VERSION,
        package: Package::Npm("@google/gemini-cli"),
        command: GEMINI_COMMAND,
        secret: "GEMINI_API_KEY",
        env: &[],
        // Its retry budget in its settings: 3 attempts at the main model, not 10.
        setup: Some(
            "mkdir -p ~/.gemini && echo '{\"general\":{\"maxAttempts\":3}}' > ~/.gemini/settings.json",
        ),
    },
    AgentCli {
        name: "aider",
        label: "Aider",
        version: AIDER_VERSION,
        package: Package::Pip("aider-chat"),
        command: AIDER_COMMAND,
        secret: "ANTHROPIC_API_KEY",
        env: &[],
        setup: None,
    },
];

/// The agent `name` names (`claude`, surrounding blanks ignored), if it names one.
pub fn named(name: &str) -> Option<&'static AgentCli> {
    let name = name.trim();
    AGENTS.iter().find(|a| a.name == name)
}

/// A worker as given (`--worker`, `DAGEXEC_WORKER`, `worker:`): a known name becomes its
/// command line, anything else is the command line itself.
pub fn command_of(worker: &str) -> String {
    named(worker).map_or_else(|| worker.to_string(), |a| a.command.to_string())
}

impl AgentCli {
    /// The install command, pinned to [`AgentCli::version`], with its setup after it.
    pub fn install(&self) -> String {
        let install = match self.package {
            Package::Npm(p) => format!(
                "npm install --global --no-audit --no-fund {p}@{}",
                self.version
            ),
            Package::Pip(p) => format!("pipx install {p}=={}", self.version),
        };
        match self.setup {
            Some(s) => format!("{install} && {s}"),
            None => install,
        }
    }

    /// `Claude Code 2.1.328 (npm @anthropic-ai/claude-code)`.
    pub fn offer(&self) -> String {
        let from = match self.package {
            Package::Npm(p) => format!("npm {p}"),
            Package::Pip(p) => format!("pip {p}"),
        };
        format!("{} {} ({from})", self.label, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_its_command_and_anything_else_is_itself() {
        assert_eq!(command_of("claude"), CLAUDE_COMMAND);
        assert_eq!(command_of(" codex "), CODEX_COMMAND);
        assert_eq!(command_of("gemini"), GEMINI_COMMAND);
        assert_eq!(command_of("aider"), AIDER_COMMAND);
        assert_eq!(command_of("claude -p"), "claude -p");
        assert_eq!(command_of("./worker.sh"), "./worker.sh");
        let names: Vec<&str> = AGENTS.iter().map(|a| a.name).collect();
        assert_eq!(names, ["claude", "codex", "gemini", "aider"]);
    }

    #[test]
    fn installs_are_pinned() {
        assert_eq!(
            named("aider").unwrap().install(),
            format!("pipx install aider-chat=={AIDER_VERSION}")
        );
        assert!(
            named("gemini")
                .unwrap()
                .install()
                .starts_with("npm install --global --no-audit --no-fund @google/gemini-cli@0.61.0 && mkdir -p ~/.gemini")
        );
    }
}
