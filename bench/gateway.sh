#!/usr/bin/env bash
# bench/gateway.sh — what dagexec's model gateway adds to a model request, and 64 streams.
#
# What it measures (bench/gateway.py does the measuring)
#   A scripted Messages API (gateway.py server: a server-sent-event stream per request) on
#   127.0.0.1, reached two ways by one client process: directly, and through the gateway of
#   a real `dagexec run` — the client is that run's worker, so it holds the attempt's token
#   and ANTHROPIC_BASE_URL points at the gateway, which has the key and forwards to the
#   server. For each path:
#     - latency per request: REQUESTS (default 300) sequential short streams, each on a new
#       connection, first request byte to last response byte: p50 and p99;
#     - 64 concurrent streams (20 events 50 ms apart, about 1 s each): time to first body
#       byte per stream, p50 / p99 / max, and the wall time of all 64;
#   and, the two paths alternating (PAIRS, default 200, pairs of one stream each, its first
#   byte 20 ms before the rest): time to first byte on each path and the per-pair difference,
#   p50 and p99 — a paired figure, so load that changes during the run hits both alike.
#   The difference between the two lines of each pair is the gateway's cost. It REPORTS, it
#   does not gate. Run it on a quiet machine for figures worth comparing; it says the load
#   average before it starts.
#
# Usage: bench/gateway.sh            (builds dagexec in debug unless DAGEXEC_BIN is set)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
bin="${DAGEXEC_BIN:-}"
if [[ -z "$bin" ]]; then
  (cd "$root" && cargo build --quiet --locked)
  bin="$root/target/debug/dagexec"
fi
work="$(mktemp -d)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

python3 "$here/gateway.py" server "$work/port" &
server_pid=$!
for _ in $(seq 100); do [[ -f "$work/port" ]] && break; sleep 0.1; done
port="$(cat "$work/port")"

repo="$work/repo"
mkdir -p "$repo/.design"
cat > "$repo/.design/plan.json" <<'JSON'
{"schemaVersion": 2, "goal": "gateway benchmark", "tasks": [{
  "subject": "measure", "description": "Measure the gateway.", "status": "pending",
  "blockedBy": [], "metadata": {"files": {"create": [], "modify": []}}}]}
JSON
git -C "$repo" init -q
git -C "$repo" -c user.email=b@b -c user.name=bench add -A
git -C "$repo" -c user.email=b@b -c user.name=bench commit -qm plan

echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) core(s); dagexec: $bin"
(cd "$repo" && \
  ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY=sk-bench \
  BENCH_DIRECT="http://127.0.0.1:$port" REQUESTS="${REQUESTS:-300}" PAIRS="${PAIRS:-200}" \
  GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=b@b \
  "$bin" run --yes --timeout 10m --worker "python3 '$here/gateway.py' client '$work/figures'" \
  >"$work/run.log" 2>&1) || { cat "$work/run.log"; exit 1; }
cat "$work/figures"
