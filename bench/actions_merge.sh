#!/usr/bin/env bash
# Issue 23's Actions benchmark: `overlap: serial` against `overlap: merge` under
# `schedule: rounds`, under act (host mode, the fake GitHub API, a private repository over
# HTTP), on a small plan with hot files like bench/merge.py's (regions of two shared files,
# two same-line edits, one check breaker), every job delayed by a fixed start-up. Prints, per
# overlap: makespan ÷ lower bound, the extra worker seconds on rebase attempts, the workflow
# runs (parts) and an oracle check that the final tree holds every task's change exactly once.
# Takes several minutes. DAGEXEC_LAB_KEEP=1 keeps the labs under target/act/labs.
#   DAGEXEC_BENCH_JOB_START=5 bench/actions_merge.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source .ci/install-tools.sh >/dev/null
cargo test --locked --test it action::bench_actions_merge -- --ignored --nocapture 2>&1 |
  sed -n '/^Actions merge/,/^  merge /p'
