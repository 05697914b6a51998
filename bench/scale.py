#!/usr/bin/env python3
"""bench/scale.py — issue 13 §5: does dagexec scale without quadratic blow-ups?

Runs the release binary on large synthetic plans and prints, per case, the wall time and
peak RSS (from GNU `/usr/bin/time -v`) beside the target. It REPORTS, it never gates: the exit
status is 0 whatever the figures (non-zero only if it cannot run at all).

Cases (N tasks; plans cached in target/bench-plans/scale-*.json):
  dry-run  hot    `run --dry-run` (rounds), every task modifying one file, genplan's random DAG
  dry-run  chain  `run --dry-run`, a chain 0 <- 1 <- ... <- N-1, each task its own file
  dry-run  chain-hot   the same chain, every task on one file (no conflicts, all pairs ordered)
  eager    hot / chain   `run --dry-run --schedule eager` (conflict-free batches: one task per
                  batch on the hot plan, so 100k batches)
  waves    hot    `run --dry-run --schedule waves` on the hot plan
  plan-job hot / chain / chain-hot   `action plan` (the Action's plan job, round 1) in a git
                  repository with a bare origin, the plan committed
  validate hot    `validate --json --no-checks > /dev/null`, every task on one file (the
                  overlap matrix is ~N^2 entries: 0.4 GB of JSON at 10k tasks, 1.6 GB at 20k)
Targets (issue 13 §5): dry-run and plan job at 100k tasks under 5 s and 1 GB; validate at 20k
tasks under 1 GB (no time target; its output alone is quadratic).

Usage: bench/scale.py [--bin PATH] [--no-build] [--cases dry-run,eager,waves,plan-job,validate]
                      [--n 100000] [--validate-n 10000,20000] [--timeout 300] [--mem-limit-gb 8]
--bin compares another build (e.g. one of an older commit); it is not rebuilt. Each run is
capped (prlimit --as, timeout) so a blow-up reports "fail" (its exit status was not 0: out of
memory under the cap, or killed at the timeout) instead of taking the machine down. Needs python3, git and GNU time (apt-get install time).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN_DIR = os.path.join(ROOT, "target", "bench-plans")
GNU_TIME = "/usr/bin/time"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def genplan_hot(n, path):
    """genplan's random DAG (edge-p 0.15, window 12), every task on one file."""
    with open(path, "w") as out:
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "genplan_fast.py"), "--tasks", str(n),
             "--seed", "1", "--files", "1", "--files-per-task", "1", "--compact"],
            stdout=out, check=True)


def chain_plan(n, hot):
    """A chain: task i blocked by i - 1; one file for all (hot) or one file each."""
    tasks = []
    for i in range(n):
        f = "src/hot.rs" if hot else f"src/m{i // 100}/f{i}.rs"
        tasks.append({
            "subject": f"Step {i}",
            "description": f"Step {i} of the chain.",
            "activeForm": f"Doing step {i}",
            "status": "pending",
            "blockedBy": [i - 1] if i else [],
            "metadata": {
                "files": {"create": [] if hot and i else [f], "modify": [f] if hot and i else []},
                "acceptanceCriteria": [{"criterion": "marker", "verify": f"grep -q t{i} {f}"}],
            },
        })
    return {"schemaVersion": 2, "goal": "Scale bench", "context": {},
            "progress": {"completedTasks": []}, "tasks": tasks}


def plan_file(kind, n):
    os.makedirs(PLAN_DIR, exist_ok=True)
    path = os.path.join(PLAN_DIR, f"scale-{kind}-{n}.json")
    if not os.path.exists(path):
        say(f"== generating {path}")
        if kind == "hot":
            genplan_hot(n, path + ".tmp")
        else:
            with open(path + ".tmp", "w") as f:
                json.dump(chain_plan(n, kind == "chain-hot"), f, separators=(",", ":"))
        os.replace(path + ".tmp", path)
    return path


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def repo_with(plan, tmp):
    """A repository with the plan committed and pushed to a bare origin."""
    origin = os.path.join(tmp, "origin.git")
    repo = os.path.join(tmp, "repo")
    os.makedirs(origin)
    os.makedirs(os.path.join(repo, ".design"))
    git(origin, "init", "-q", "--bare", "-b", "main")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "bench")
    git(repo, "remote", "add", "origin", origin)
    shutil.copy(plan, os.path.join(repo, ".design", "plan.json"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "plan")
    git(repo, "push", "-q", "origin", "main")
    return repo


def measure(cmd, cwd, env, timeout, mem_gb):
    """(wall seconds, peak MB, exit code) of one run, output discarded."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        full = ["prlimit", f"--as={mem_gb << 30}", "--", "timeout", str(timeout),
                GNU_TIME, "-v", "-o", t.name, *cmd]
        p = subprocess.run(full, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        text = t.read()
    wall = peak = None
    m = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", text)
    if m:
        wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        peak = int(m.group(1)) / 1024
    code = p.returncode
    if code != 0:
        tail = p.stderr.decode(errors="replace").strip().splitlines()[-1:]
        say(f"   exit {code}: {' '.join(tail)[:200]}")
    return wall, peak, code


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "dagexec"))
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--cases", default="dry-run,eager,waves,plan-job,validate")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--validate-n", default="10000,20000")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--mem-limit-gb", type=int, default=8)
    a = ap.parse_args()
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit("scale.py: GNU time not found at /usr/bin/time (apt-get install time)")
    if not a.no_build and a.bin == ap.get_default("bin"):
        say("== cargo build --release")
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True,
                       stdout=sys.stderr)
    binary = os.path.abspath(a.bin)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "GIT_", "DAGEXEC_", "CI"))}
    cases = a.cases.split(",")
    rows = []
    tmp = tempfile.mkdtemp(prefix="dagexec-scale-")
    try:
        repos = {}

        def run(case, kind, n, args, target_s, target_mb):
            # Every case runs in a repository holding the plan at .design/plan.json.
            if (kind, n) not in repos:
                repos[(kind, n)] = repo_with(plan_file(kind, n), tempfile.mkdtemp(dir=tmp))
            repo = repos[(kind, n)]
            cmd = [binary, *args]
            e = dict(env)
            e["GITHUB_OUTPUT"] = os.path.join(tmp, f"out-{kind}-{n}")
            e["DAGEXEC_BRANCH"] = "dagexec/bench"
            say(f"== {case} {kind} {n}")
            wall, peak, code = measure(cmd, repo, e, a.timeout, a.mem_limit_gb)
            over = code != 0 or wall is None or peak is None \
                or (target_s and wall > target_s) or peak > target_mb
            verdict = "fail" if code != 0 else ("over" if over else "ok")
            target = (f"<{target_s} s, " if target_s else "") + f"<{target_mb // 1024} GB"
            rows.append((f"{case} {kind}", n, wall, peak, target, verdict))

        for kind in ["hot", "chain", "chain-hot"]:
            if "dry-run" in cases:
                run("dry-run", kind, a.n, ["run", "--dry-run", "--plan", ".design/plan.json"], 5, 1024)
        if "eager" in cases:
            for kind in ["hot", "chain"]:
                run("eager dry-run", kind, a.n,
                    ["run", "--dry-run", "--schedule", "eager", "--plan", ".design/plan.json"], 5, 1024)
        if "waves" in cases:
            run("waves dry-run", "hot", a.n,
                ["run", "--dry-run", "--schedule", "waves", "--plan", ".design/plan.json"], 5, 1024)
        if "plan-job" in cases:
            for kind in ["hot", "chain", "chain-hot"]:
                run("plan-job", kind, a.n, ["action", "plan"], 5, 1024)
        if "validate" in cases:
            for n in [int(x) for x in a.validate_n.split(",") if x]:
                run("validate --json", "hot", n,
                    ["validate", "--json", "--no-checks", "--plan", ".design/plan.json"], None, 1024)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{'case':<28} {'tasks':>7} {'wall s':>8} {'peak MB':>8}  {'target':<14} result")
    for case, n, wall, peak, target, verdict in rows:
        w = f"{wall:.2f}" if wall is not None else "-"
        p = f"{peak:.0f}" if peak is not None else "-"
        print(f"{case:<28} {n:>7} {w:>8} {p:>8}  {target:<14} {verdict}")


if __name__ == "__main__":
    main()
