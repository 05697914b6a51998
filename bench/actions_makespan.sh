#!/usr/bin/env bash
# Issue 13's Actions benchmark: the makespan of `schedule: eager` against `rounds` and the
# lower bound with job start-ups counted, under act (host mode, the fake GitHub API, a
# private repository over HTTP), on a random plan whose tasks sleep 2–20 s, every job
# delayed by a fixed start-up; then `dagexec simulate`'s prediction of both beside the
# measured makespans, fed with what a user has after such a run: the plans' recorded attempts
# (durations), a task run's time besides its attempt (--job-start, the median), the
# `dagexec finalize` step's time (--integrate, the median) and the conductor's inputs.
# Prints the figures. Takes 10–15 minutes. DAGEXEC_LAB_KEEP=1 keeps the labs (act logs,
# timeline.json: each run's start and end) under target/act/labs.
#   DAGEXEC_BENCH_TASKS=30 DAGEXEC_BENCH_JOB_START=5 DAGEXEC_BENCH_POLLS_PER_HOUR=4800 bench/actions_makespan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source .ci/install-tools.sh >/dev/null
cargo test --locked --test it action::bench_actions_makespan -- --ignored --nocapture 2>&1 |
  sed -n '/^Actions makespan/,/^  eager  *predicted/p'
