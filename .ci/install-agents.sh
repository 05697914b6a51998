#!/usr/bin/env bash
# Installs the agent CLIs at the versions `dagexec init` pins (src/action/init/worker.rs; a test checks
# the two agree) into .ci/tools/agents, for tests/it/real_agents.rs, which runs them against a
# scripted model server; and Taskmaster's CLI (task-master-ai, pinned here), for
# tests/it/taskmaster_cli.rs, which reads what dagexec writes back with it. From the npm registry
# only; idempotent (a stamp of the versions).
#   bash .ci/install-agents.sh          # DAGEXEC_TOOLS_DIR overrides .ci/tools
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${DAGEXEC_TOOLS_DIR:-$here/tools}/agents"
# Pinned versions: the same as src/action/init/worker.rs (CLAUDE_CODE_VERSION, CODEX_VERSION, GEMINI_CLI_VERSION).
want="@anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0 @google/gemini-cli@0.61.0 task-master-ai@0.43.1"
stamp="$dir/.stamp"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/node_modules/.bin/claude" && -x "$dir/node_modules/.bin/codex" && -x "$dir/node_modules/.bin/gemini" && -x "$dir/node_modules/.bin/task-master" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed to install the agent CLIs ($want)" >&2
  exit 1
fi
echo "== installing the agent CLIs into $dir ($want)"
rm -rf "$dir"
mkdir -p "$dir"
# shellcheck disable=SC2086 # $want is a list of packages
npm install --silent --no-audit --no-fund --prefix "$dir" $want
for cli in claude codex gemini task-master; do
  "$dir/node_modules/.bin/$cli" --version
done
printf '%s' "$want" > "$stamp"
