#!/usr/bin/env bash
# bench/validate.sh — how fast is `dagexec validate` next to merely parsing the JSON?
#
# What it measures
#   For synthetic plans of 1k, 10k and 100k tasks (schema 2, seed 1, genplan's
#   default shape, pretty-printed like genplan's default output) it times
#       target/release/dagexec validate --plan FILE --json --no-checks > /dev/null
#   beside
#       jq empty FILE
#   (jq only parses the file: the floor for "read the plan"), and prints per size:
#   file MB, median wall ms of each, dagexec/jq, dagexec@N / dagexec@10k, and
#   peak RSS. The targets from the issue are printed beside the figures:
#       10k tasks:  dagexec <= 1.5x jq
#       100k tasks: dagexec <= 12x dagexec's own 10k time (i.e. ~linear)
#   with PASS/MISS words. It REPORTS, it does not gate: the exit status is 0
#   whatever the timings are (non-zero only if it cannot run: build failure,
#   plan generation failure, missing python3 or dagexec binary).
#
# How it works
#   1. cargo build --release (skipped when DAGEXEC_BIN is set, or NO_BUILD=1).
#   2. Plans come from bench/genplan_fast.py, a byte-identical but linear-time
#      re-implementation of bench/genplan.py (bench/check_genplan_fast.sh
#      proves the identity). They are cached in target/bench-plans/plan-N.json and
#      generated only when missing (or when genplan.py / genplan_fast.py changed,
#      or REGEN=1). 100k tasks: ~150 MB, ~10 s to generate.
#   3. Timing uses hyperfine when installed (--warmup 1 --runs $RUNS, JSON
#      exported to target/bench-plans/hyperfine-N.json); otherwise a python
#      time.perf_counter loop: 1 warm-up run, then the median of $RUNS runs.
#   4. Peak RSS: `/usr/bin/time -f %M` (GNU time) on one extra run; otherwise
#      python's resource.getrusage(RUSAGE_CHILDREN) over the timing runs (that
#      one has a floor of python's own RSS, ~10 MB, because of fork).
#
# Run (from anywhere):   bench/validate.sh
# Environment knobs:
#   SIZES="1000 10000 100000"  task counts to run
#   RUNS=5                     timed runs per command and size
#   DAGEXEC_BIN=path           use this binary instead of building; may be a command
#                              with words (split on whitespace)
#   DAGEXEC_ARGS='validate --plan {} --json --no-checks'
#                              arguments after DAGEXEC_BIN; {} is the plan file.
#                              e.g. smoke-test this script without dagexec:
#                              DAGEXEC_BIN=jq DAGEXEC_ARGS='empty {}' bench/validate.sh
#   NO_BUILD=1                 don't run cargo build (use target/release/dagexec as is)
#   NO_HYPERFINE=1             force the python fallback even if hyperfine exists
#   REGEN=1                    regenerate the cached plans of SIZES
#   GNU_TIME=/usr/bin/time     GNU time for peak RSS; GNU_TIME= (empty) -> python fallback
#   GENPLAN=path               genplan.py to take constants from
#                              (default bench/genplan.py from the repo root)
#   PYTHON=python3             interpreter for the generator and the fallback timer
# Needs: python3, jq (apt-get install jq); hyperfine optional (apt-get install hyperfine).
set -euo pipefail

caller_pwd="$PWD"
cd "$(dirname "$0")/.."
root="$PWD"
# Paths given in the environment are relative to where you ran the script from.
abspath() { if [[ $1 == /* ]]; then printf '%s' "$1"; else printf '%s' "$caller_pwd/$1"; fi; }

SIZES="${SIZES:-1000 10000 100000}"
RUNS="${RUNS:-5}"
SEED=1
PYTHON="${PYTHON:-python3}"
GENPLAN="$(abspath "${GENPLAN:-$root/bench/genplan.py}")"
PLAN_DIR="$root/target/bench-plans"
default_args='validate --plan {} --json --no-checks'  # {} = the plan file
DAGEXEC_ARGS="${DAGEXEC_ARGS:-$default_args}"

say() { printf '%s\n' "$*" >&2; }
die() { say "validate.sh: $*"; exit 1; }

for n in $SIZES; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "SIZES: not a task count: $n"; done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS: not a positive integer: $RUNS"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (needed to generate plans)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- 1. build
if [[ -n "${DAGEXEC_BIN:-}" ]]; then
    read -r -a dagexec_bin <<< "$DAGEXEC_BIN"
    # a relative path (not a bare command name looked up in PATH) is relative to the caller
    if [[ ${dagexec_bin[0]} == */* ]]; then dagexec_bin[0]="$(abspath "${dagexec_bin[0]}")"; fi
    say "== using DAGEXEC_BIN=$DAGEXEC_BIN (no cargo build)"
else
    dagexec_bin=("$root/target/release/dagexec")
    if [[ -z "${NO_BUILD:-}" ]]; then
        say "== cargo build --release"
        cargo build --release >&2 || die "cargo build --release failed"
    fi
fi
command -v "${dagexec_bin[0]}" >/dev/null 2>&1 || die "dagexec command not found: ${dagexec_bin[0]}"

have_jq=1
if ! command -v jq >/dev/null 2>&1; then
    have_jq=0
    say "note: jq not found on PATH — the jq column will be empty. Install it: apt-get install jq"
fi

use_hyperfine=0
if [[ -z "${NO_HYPERFINE:-}" ]] && command -v hyperfine >/dev/null 2>&1; then
    use_hyperfine=1
fi

GNU_TIME="${GNU_TIME-/usr/bin/time}"
gnu_time=0
if [[ -n "$GNU_TIME" && -x "$GNU_TIME" ]] && "$GNU_TIME" -f %M -o /dev/null true >/dev/null 2>&1; then
    gnu_time=1
fi

# ---------------------------------------------------------------- 2. plans
# shellcheck source=bench/plans.sh
source "$root/bench/plans.sh"
ensure_plans

# ---------------------------------------------------------------- 3. timing
# Python fallback timer: prints "median_seconds max_child_rss_kb".
fallback_timer() {  # fallback_timer CMD...
    "$PYTHON" - "$RUNS" "$@" <<'PY'
import resource, statistics, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.run(cmd, **quiet)                       # warm-up (page cache)
ts = []
for _ in range(runs):
    t0 = time.perf_counter()
    subprocess.run(cmd, **quiet)
    ts.append(time.perf_counter() - t0)
print(statistics.median(ts), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}

peak_rss_kb() {  # peak_rss_kb CMD...  (GNU time; prints KB)
    "$GNU_TIME" -f %M -o "$tmp/rss" "$@" >/dev/null 2>&1 || true
    tail -n 1 "$tmp/rss"
}

quote() { local out="" w; for w in "$@"; do out+="$(printf '%q' "$w") "; done; printf '%s' "${out% }"; }

declare -A size_mb dx_s jq_s dx_rss jq_rss
warnings=()
for n in $SIZES; do
    f="$PLAN_DIR/plan-$n.json"
    size_mb[$n]=$(awk -v b="$(stat -c %s "$f")" 'BEGIN{printf "%.1f", b/1e6}')
    read -r -a dx_args <<< "${DAGEXEC_ARGS//\{\}/$f}"
    dx=("${dagexec_bin[@]}" "${dx_args[@]}")
    jqc=(jq empty "$f")

    # One plain run first: is the command working at all?
    rc=0
    "${dx[@]}" > /dev/null 2> "$tmp/err" || rc=$?
    if (( rc != 0 )); then
        warnings+=("dagexec exited $rc on the $n-task plan (timed anyway): $(head -c 300 "$tmp/err" | tr '\n' ' ')")
    fi

    say "== timing $n tasks (${size_mb[$n]} MB)"
    if (( use_hyperfine )); then
        json="$PLAN_DIR/hyperfine-$n.json"
        hf=(hyperfine --warmup 1 --runs "$RUNS" --export-json "$json" --style basic)
        if (( rc != 0 )); then hf+=(--ignore-failure); fi
        cmds=(--command-name "dagexec $n" "$(quote "${dx[@]}")")
        if (( have_jq )); then cmds+=(--command-name "jq $n" "$(quote "${jqc[@]}")"); fi
        "${hf[@]}" "${cmds[@]}" >&2
        read -r "dx_s[$n]" "jq_s[$n]" < <("$PYTHON" -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(r[0]["median"], r[1]["median"] if len(r) > 1 else "")' "$json")
    else
        read -r "dx_s[$n]" "dx_rss[$n]" < <(fallback_timer "${dx[@]}")
        if (( have_jq )); then read -r "jq_s[$n]" "jq_rss[$n]" < <(fallback_timer "${jqc[@]}"); fi
    fi
    if (( gnu_time )); then
        dx_rss[$n]=$(peak_rss_kb "${dx[@]}")
        if (( have_jq )); then jq_rss[$n]=$(peak_rss_kb "${jqc[@]}"); fi
    fi
done

# ---------------------------------------------------------------- 4. report
ms()    { [[ -n "${1:-}" ]] && awk -v s="$1" 'BEGIN{printf "%.1f", s*1000}' || printf -- '-'; }
mb_kb() { [[ -n "${1:-}" ]] && awk -v k="$1" 'BEGIN{printf "%.1f MB", k/1024}' || printf -- '-'; }
ratio() { [[ -n "${1:-}" && -n "${2:-}" ]] && awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2fx", a/b; else printf "-" }' || printf -- '-'; }
verdict() {  # verdict VALUE LIMIT -> PASS|MISS
    awk -v v="$1" -v l="$2" 'BEGIN{ print (v <= l) ? "PASS" : "MISS" }'
}

base="${dx_s[10000]:-}"
echo
echo "dagexec validate --json --no-checks  vs  jq empty   (schema 2, seed $SEED; median of $RUNS runs, $( ((use_hyperfine)) && echo hyperfine || echo python perf_counter))"
echo "dagexec: ${dagexec_bin[*]} ${DAGEXEC_ARGS}"
printf '%-8s %8s %12s %10s %11s %-15s %11s %-15s %12s %10s\n' \
    tasks "file MB" "dagexec ms" "jq ms" "dagexec/jq" "(target)" "vs dx@10k" "(target)" "dagexec RSS" "jq RSS"
t1="n/a (needs size 10000 in SIZES, and jq)"; t2="n/a (needs sizes 10000 and 100000 in SIZES)"
for n in $SIZES; do
    r_jq=$(ratio "${dx_s[$n]}" "${jq_s[$n]:-}")
    tgt1=""; r_base="-"; tgt2=""
    if [[ $n == 10000 && $r_jq != - ]]; then
        tgt1="<=1.5x $(verdict "${r_jq%x}" 1.5)"; t1="dagexec ${r_jq} jq at 10k tasks, target <=1.5x: ${tgt1##* }"
    fi
    [[ -n "$base" ]] && r_base=$(ratio "${dx_s[$n]}" "$base")
    if [[ $n == 100000 && $r_base != - ]]; then
        tgt2="<=12x $(verdict "${r_base%x}" 12)"; t2="dagexec@100k = ${r_base} dagexec@10k, target <=12x: ${tgt2##* }"
    fi
    printf '%-8s %8s %12s %10s %11s %-15s %11s %-15s %12s %10s\n' \
        "$n" "${size_mb[$n]}" "$(ms "${dx_s[$n]}")" "$(ms "${jq_s[$n]:-}")" "$r_jq" "$tgt1" \
        "$r_base" "$tgt2" "$(mb_kb "${dx_rss[$n]:-}")" "$(mb_kb "${jq_rss[$n]:-}")"
done
echo
echo "target 1: $t1"
echo "target 2: $t2"
if (( ! gnu_time )); then
    echo "note: peak RSS from python getrusage (GNU /usr/bin/time not found): floor ~ python's own RSS"
fi
if (( ! have_jq )); then echo "note: jq not found on PATH — install it with: apt-get install jq"; fi
for w in ${warnings[@]+"${warnings[@]}"}; do echo "warning: $w"; done
exit 0
