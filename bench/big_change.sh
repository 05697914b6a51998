#!/usr/bin/env bash
# bench/big_change.sh — dagexec's peak memory and time with one task whose change is large
# (issue 31 §5: "one 200 MB file costs 880 MB of memory and 69 s").
#
# What it measures
#   A fresh repository with a two-task plan; task 0's worker writes SIZE_MIB (default 90: under
#   the 100 MiB a task's change may hold, so it is integrated) of random bytes into big.bin,
#   task 1 writes a line. `dagexec run --yes` runs it, and the script prints dagexec's own peak
#   RSS (VmHWM of the dagexec process, sampled every 20 ms from /proc — git's processes are not
#   counted, they are separate) and the wall-clock seconds, per binary. With OLD=<path of
#   another dagexec binary> it runs that one too on an identical repository, alternating,
#   RUNS times each (default 3), and prints both medians. It REPORTS, it does not gate.
#   Needs python3 and git. DAGEXEC_BIN picks the binary (default: target/debug/dagexec, built
#   with `cargo build` when missing).
#
# Run:   bench/big_change.sh                         (about a minute)
#        OLD=/path/to/old/dagexec SIZE_MIB=90 bench/big_change.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-90}
RUNS=${RUNS:-3}
BIN=${DAGEXEC_BIN:-target/debug/dagexec}
[[ -x "$BIN" ]] || cargo build --quiet --bin dagexec
BIN=$(realpath "$BIN")
OLD=${OLD:+$(realpath "$OLD")}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c $((SIZE_MIB * 1024 * 1024)) /dev/urandom >"$tmp/big.src"

python3 - "$tmp" "$RUNS" "$SIZE_MIB" "$BIN" ${OLD:+"$OLD"} <<'PY'
import json, os, statistics, subprocess, sys, time

tmp, runs, size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bins = sys.argv[4:]

def repo(n):
    d = os.path.join(tmp, f"repo-{n}")
    os.makedirs(os.path.join(d, ".design"))
    plan = {
        "schemaVersion": 2,
        "goal": "one large change",
        "tasks": [
            {"subject": "Big", "description": "write big.bin", "status": "pending",
             "blockedBy": [], "files": {"create": ["big.bin"], "modify": []}},
            {"subject": "Small", "description": "write b.txt", "status": "pending",
             "blockedBy": [], "files": {"create": ["b.txt"], "modify": []}},
        ],
    }
    with open(os.path.join(d, ".design/plan.json"), "w") as f:
        json.dump(plan, f, indent=2)
    with open(os.path.join(d, "worker.sh"), "w") as f:
        f.write('cat > /dev/null\ncase "$DAGEXEC_TASK_INDEX" in\n'
                f'  0) cp "{tmp}/big.src" big.bin ;;\n  1) echo b > b.txt ;;\nesac\n'
                'echo "COMPLETED: wrote it"\n')
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@x")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "plan"]):
        subprocess.run(["git", *args], cwd=d, check=True, env=env)
    return d, env

def hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None

def one(binary, n):
    d, env = repo(n)
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "run", "--worker", "sh ./worker.sh", "--yes"], cwd=d, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = 0
    while p.poll() is None:
        k = hwm(p.pid)
        if k:
            peak = max(peak, k)
        time.sleep(0.02)
    out = p.stdout.read().decode(errors="replace")
    secs = time.monotonic() - t0
    if p.returncode != 0 or "All 2 tasks completed" not in out:
        sys.exit(f"{binary}: the run did not complete (exit {p.returncode}):\n{out[-3000:]}")
    subprocess.run(["rm", "-rf", d])
    return peak / 1024, secs

res = {b: [] for b in bins}
n = 0
for _ in range(runs):
    for b in bins:
        n += 1
        res[b].append(one(b, n))
print(f"one task writing {size} MiB of random bytes, {runs} runs each (peak RSS of dagexec itself)")
for label, b in zip(["new", "old"], bins):
    mem = statistics.median(r[0] for r in res[b])
    secs = statistics.median(r[1] for r in res[b])
    print(f"  {label}: {b}\n       peak RSS median {mem:7.1f} MiB   wall median {secs:6.2f} s   "
          f"(runs: {', '.join(f'{m:.0f} MiB/{s:.1f} s' for m, s in res[b])})")
PY
