#!/usr/bin/env python3
"""bench/speckit_phase.py — issue 20 §1: a Spec Kit phase of N tasks without `[P]`.

A phase whose tasks carry no `[P]` is ordered (each task after every task written before it).
Deriving that order as all pairs gave N(N-1)/2 edges (6,000 tasks: 18M edges, 14 s and 784 MB
to validate); dagexec derives it in O(N) edges (each task waits for the previous one without
`[P]` and the `[P]` tasks since). This script writes `specs/bench/tasks.md` with one phase of
N such tasks, each naming its own file, in a fresh git repository, and runs the release binary
under GNU `/usr/bin/time -v`:

  validate   `--plan specs/bench/tasks.md validate --no-checks` (parse, derive, the generated
             plan in a temporary directory, plan validation, the overlap matrix)
  dry-run    `--plan specs/bench/tasks.md run --dry-run` (the same, then every round)

It prints the wall time and peak RSS of each beside the target (validate: under 2 s and
200 MB at 6,000 tasks) and the number of edges of the generated plan. It REPORTS, it never
gates: the exit status is 0 whatever the figures (non-zero only if it cannot run at all).

Usage: bench/speckit_phase.py [--bin PATH] [--no-build] [--n 6000] [--parallel-every K]
                              [--timeout 120] [--mem-limit-gb 4]
--parallel-every K marks every K-th task `[P]` (0: none). --bin measures another build (an
older commit's, to compare); it is not rebuilt. Needs python3, git and GNU time.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import measure  # noqa: E402  (one GNU-time measurement for every bench)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GNU_TIME = "/usr/bin/time"
TASKS = "specs/bench/tasks.md"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def tasks_md(n, parallel_every):
    lines = ["# Tasks: Bench", "", "## Phase 1: Setup", ""]
    for i in range(1, n + 1):
        p = "[P] " if parallel_every and i % parallel_every == 0 else ""
        lines.append(f"- [ ] T{i:05d} {p}Create `src/m{i // 100}/f{i}.txt`")
    return "\n".join(lines) + "\n"


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@example.com",
                    "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=None)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--n", type=int, default=6000)
    ap.add_argument("--parallel-every", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--mem-limit-gb", type=int, default=4)
    a = ap.parse_args()
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit("speckit_phase.py: GNU time not found at /usr/bin/time (apt-get install time)")
    target_dir = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = a.bin or os.path.join(target_dir, "release", "dagexec")
    if a.bin is None and not a.no_build:
        say("== cargo build --release")
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True,
                       stdout=sys.stderr)
    binary = os.path.abspath(binary)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "GIT_", "DAGEXEC_", "CI"))}
    env["NO_COLOR"] = "1"
    with tempfile.TemporaryDirectory(prefix="dagexec-speckit-bench-") as tmp:
        os.makedirs(os.path.join(tmp, "specs", "bench"))
        with open(os.path.join(tmp, TASKS), "w") as f:
            f.write(tasks_md(a.n, a.parallel_every))
        git(tmp, "init", "-q")
        git(tmp, "add", "-A")
        git(tmp, "commit", "-qm", "bench")
        print(f"Spec Kit phase of {a.n} tasks (every {a.parallel_every or 'no'} task [P]), {binary}")
        print(f"{'case':<10} {'wall s':>8} {'peak MB':>8}  target")
        cases = [
            ("validate", ["validate", "--no-checks"], "< 2 s, < 200 MB"),
            ("dry-run", ["run", "--dry-run"], "(no target)"),
        ]
        for name, args, target in cases:
            wall, peak, code = measure([binary, "--plan", TASKS, *args], tmp, env,
                                          a.timeout, a.mem_limit_gb)
            shown = lambda v, f: "fail" if v is None or code != 0 else f.format(v)
            print(f"{name:<10} {shown(wall, '{:.2f}'):>8} {shown(peak, '{:.0f}'):>8}  {target}")
        # The edges of the generated plan (`validate --json` would print the overlap matrix
        # too; the plan's own blockedBy lists are what the rule derives).
        p = subprocess.run([binary, "--plan", TASKS, "graph", "--format", "dot"], cwd=tmp,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           timeout=a.timeout)
        edges = p.stdout.decode(errors="replace").count("->")
        print(f"edges in the derived DAG: {edges}" if p.returncode == 0
              else "edges: (graph failed)")


if __name__ == "__main__":
    main()
