#!/usr/bin/env python3
"""Fast, byte-identical drop-in for bench/genplan.py (benchmark plan generator).

genplan.py is quadratic: `rnd.choices(pool, weights)` rebuilds the cumulative
weights (O(files)) on every draw, and the create/modify split scans every earlier
task. 100k tasks takes close to an hour. This script re-implements `make_plan`
with the *same* sequence of calls on the same `random.Random(seed)`:

  * cumulative weights are computed once with itertools.accumulate over the very
    same float list, and passed as `cum_weights=` -> identical floats, identical
    bisect, identical picks, one `random()` per draw exactly as before;
  * "created by the first task that touches it" is tracked with a `seen` set.

so the JSON it prints is byte-identical to genplan.py's for the same arguments
(bench/check_genplan_fast.sh verifies that). ROLES, VERBS and NOUNS are imported
from genplan.py itself, so the two cannot drift apart silently.

Schema 3 is implemented too: `fileOverlaps` is computed per shared file (pairs of
tasks touching the same file) with ancestor sets kept as int bitsets, instead of
genplan's all-pairs loop over Python sets (v3 at 10k tasks: ~1 s; at 100k: ~70 s
and ~4 GB RSS, since the ancestor bitsets are n^2/2 bits in total).
`--reference-v3` calls genplan.make_plan itself for schema 3 (slow, exact by
construction) if you ever suspect the fast path.

Usage (same CLI as genplan.py):
  bench/genplan_fast.py --tasks N [--schema 2|3] [--seed S] [--edge-p P]
      [--files F] [--files-per-task K] [--window W] [--compact]
      [--genplan PATH/TO/genplan.py] > plan.json
--genplan defaults to <this dir>/genplan.py
(a copy of the specification's generator, shared/tools/genplan.py).
"""
import argparse
import importlib.util
import itertools
import json
import os
import random
import sys

DEFAULT_GENPLAN = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "genplan.py"))


def load_genplan(path):
    if not os.path.isfile(path):
        sys.exit(f"genplan_fast.py: genplan.py not found at {path} (pass --genplan PATH)")
    spec = importlib.util.spec_from_file_location("genplan", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _overlaps_fast(tasks):
    """Same result as genplan._overlaps: planIndex -> sorted indices that share a
    file and are not ordered by blockedBy either way. Only tasks with a result get a key."""
    anc = []  # anc[i]: int bitset of all (transitive) predecessors of i
    for t in tasks:
        s = 0
        for d in t["blockedBy"]:
            s |= (1 << d) | anc[d]
        anc.append(s)
    by_file = {}
    for i, t in enumerate(tasks):
        fs = t["metadata"]["files"]
        for f in set(fs["create"]) | set(fs["modify"]):
            by_file.setdefault(f, []).append(i)
    out = {}
    for idx in by_file.values():  # idx ascending, no duplicates
        for x, a in enumerate(idx):
            anc_a = anc[a]
            for b in idx[x + 1:]:
                if not (anc[b] >> a) & 1 and not (anc_a >> b) & 1:
                    out.setdefault(a, set()).add(b)
                    out.setdefault(b, set()).add(a)
    return {k: sorted(v) for k, v in out.items()}


def make_plan(g, n, schema=2, seed=0, edge_p=0.15, nfiles=None, files_per_task=2, layers=None,
              window=12):
    """Mirror of genplan.make_plan; every rnd call is in the same order with the same args."""
    ROLES, VERBS, NOUNS = g.ROLES, g.VERBS, g.NOUNS
    rnd = random.Random(seed)
    nfiles = nfiles or max(4, n * 2)
    pool = [f"src/mod{i // 20}/file{i}.txt" for i in range(nfiles)]
    weights = [1.0 / (i + 1) ** 0.8 for i in range(nfiles)]
    cum = list(itertools.accumulate(weights))  # exactly what random.choices does internally
    choices, rrandom, randint, choice = rnd.choices, rnd.random, rnd.randint, rnd.choice
    seen = set()
    tasks = []
    for i in range(n):
        lo = max(0, i - window)
        deps = sorted({j for j in range(lo, i) if rrandom() < edge_p})
        k = randint(1, files_per_task)
        chosen = set()
        while len(chosen) < k:
            chosen.add(choices(pool, cum_weights=cum)[0])
        chosen = sorted(chosen)
        # A file is "created" by the first task that touches it, "modified" afterwards.
        create = [f for f in chosen if f not in seen]
        modify = [f for f in chosen if f in seen]
        seen.update(chosen)
        role, expertise = choice(ROLES)
        subject = f"{choice(VERBS)} {choice(NOUNS)} ({i})"
        checks = [{"criterion": f"{f} carries task {i}'s marker",
                   "check": f"grep -q 'dagexec-task-{i}' '{f}'"} for f in chosen]
        task = {
            "subject": subject,
            "description": f"{subject}: implement the change described for step {i}.",
            "activeForm": subject.replace("Add", "Adding"),
            "status": "pending",
            "blockedBy": deps,
            "metadata": {"type": "implementation", "files": {"create": create, "modify": modify},
                         "reads": []},
            "agent": {
                "role": role, "expertise": expertise,
                "model": choice(["opus", "sonnet"]),
                "approach": "Make the smallest change that satisfies the acceptance criteria.",
                "fallback": "Write the marker line only.",
                "contextFiles": [],
                "assumptions": [{"claim": "git is installed", "verify": "git --version",
                                 "severity": "blocking"}],
                "acceptanceCriteria": checks,
                "rollbackTriggers": ["a file outside the declared set must change"],
                "constraints": ["Touch only the declared files"],
            },
        }
        tasks.append(task)
    plan = {
        "schemaVersion": schema,
        "goal": f"Synthetic plan of {n} tasks (seed {seed})",
        "context": {"stack": "plain text files", "conventions": "one marker line per task",
                    "testCommand": "true"},
        "progress": {"completedTasks": [], "surprises": [], "decisions": []},
        "tasks": tasks,
    }
    if schema == 3:
        for i, t in enumerate(tasks):
            t["prompt"] = (f"You are a {t['agent']['role']}.\n## Task: {t['subject']}\n"
                           f"{t['description']}\n")
        m = _overlaps_fast(tasks)
        for i, t in enumerate(tasks):
            t["fileOverlaps"] = m.get(i, [])
    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, required=True)
    ap.add_argument("--schema", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--edge-p", type=float, default=0.15)
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--files-per-task", type=int, default=2)
    ap.add_argument("--window", type=int, default=12)
    ap.add_argument("--compact", action="store_true")
    ap.add_argument("--genplan", default=DEFAULT_GENPLAN,
                    help="path to genplan.py (default: %(default)s)")
    ap.add_argument("--reference-v3", action="store_true",
                    help="for --schema 3 call genplan.make_plan itself (slow, quadratic)")
    a = ap.parse_args()
    g = load_genplan(a.genplan)
    if a.schema == 3 and a.reference_v3:
        p = g.make_plan(a.tasks, a.schema, a.seed, a.edge_p, a.files, a.files_per_task, window=a.window)
    else:
        p = make_plan(g, a.tasks, a.schema, a.seed, a.edge_p, a.files, a.files_per_task, window=a.window)
    print(json.dumps(p, indent=None if a.compact else 2))


if __name__ == "__main__":
    main()
