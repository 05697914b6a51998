#!/usr/bin/env python3
"""bench/merge.py — issue 23: `--overlap merge` against `serial` on plans with hot files.

A generated plan (seeded: a random DAG, each task blocked by earlier ones with probability
--edge-p within a window of 12) whose every task modifies one of --hot shared files, the way
agents edit a router or an index:
  * every task changes its own region of its hot file (`slot-i=old` -> `slot-i=new`, regions
    apart): such changes merge cleanly;
  * a --conflict fraction also appends `+i` to the file's one `shared=` line: two of them run
    side by side change the same line (a textual conflict; a rebase appends to what landed);
  * a --breaker fraction also adds `note-i=TODO` below its region: it merges cleanly but
    breaks the check of every other task on the file (`! grep -q =TODO`) — whoever sees a
    TODO resolves it (`=DONE`), as an agent told by its prompt would.
A scripted worker sleeps a task-specific time (0.5-2.5 s; a rebase attempt as long again) and
makes those edits. Each schedule (rounds, eager) runs under serial and merge in a fresh git
repository, and the script prints, per run: makespan / lower bound (max(critical path, total
work / jobs) of the first attempts), the extra worker seconds spent on rebase attempts (from
the plan's records, `"rebase": true`), the conflicts recorded, and an oracle check that the
final tree holds every task's change exactly once (its slot, its `+i` on the shared line, its
note), and — for merge — what `dagexec simulate` predicts from that run's own records (its
bound is over those records' times, so compare the ratios). It reports, it never gates (exit 0 unless a run cannot be made).

Usage: python3 bench/merge.py [--plan hot|genplan] [--tasks 40] [--jobs 4] [--hot 3]
                              [--conflict 0.15] [--breaker 0.05] [--seed 1] [--repeat 1]
                              [--schedules rounds,eager] [--no-build]
Which tasks run side by side decides whether a same-line edit conflicts, so a run's figures
vary with timing: --repeat N prints each row's median.
This bench runs `dagexec run` locally; the Action is not measured here.
"""
import argparse, json, os, random, re, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def duration(i):
    return 0.5 + ((i * 7919) % 9) * 0.25  # 0.5 .. 2.5 s


def shape(a):
    """Each task's blockers, the files it modifies and creates, and the draw that picks its kind: bench/merge.py's own plan
    (every task on one of --hot shared files), or with --plan genplan the plan bench/makespan.py
    measures (bench/genplan_fast.py, --tasks and --seed: the plan where tasks that share a file
    keep eager at about 1.4x the bound under serial), its edges and files as generated."""
    if a.plan == "genplan":
        gen = [sys.executable, os.path.join(ROOT, "bench/genplan_fast.py"), "--tasks", str(a.tasks), "--seed", str(a.seed)]
        g = json.loads(subprocess.run(gen, capture_output=True, text=True, check=True).stdout)
        rng, fs = random.Random(a.seed), [t["metadata"]["files"] for t in g["tasks"]]
        # A file some task modifies is in the repository from the start (its regions), so a
        # task that "creates" it modifies its own region there too.
        hot = {f for x in fs for f in x["modify"]}
        return [(t["blockedBy"], sorted(set(x["modify"]) | (set(x["create"]) & hot)),
                 sorted(set(x["create"]) - hot), rng.random()) for t, x in zip(g["tasks"], fs)]
    rng, out = random.Random(a.seed), []
    for i in range(a.tasks):  # one stream: a task's blockers, then its kind's draw
        deps = [j for j in range(max(0, i - 12), i) if rng.random() < a.edge_p]
        out.append((deps, [f"src/hot{i % a.hot}.txt"], [], rng.random()))
    return out


def make_plan(a):
    kinds, tasks = [], []
    for i, (deps, modify, create, r) in enumerate(shape(a)):
        kind = "conflict" if r < a.conflict else "breaker" if r < a.conflict + a.breaker else "region"
        if not modify:
            kind = "region"
        kinds.append(kind)
        checks = [f"grep -qx slot-{i}=new {f}" for f in modify] + [f"grep -qx created-{i} {f}" for f in create]
        if kind != "breaker":
            checks += [f"! grep -q =TODO {f}" for f in modify]
        if kind == "conflict":
            checks.append(f"grep -Eq '^shared=.*[+]{i}([+]|$)' {modify[0]}")
        what = f"on {modify[0]}" if modify else "new files"
        tasks.append({
            "subject": f"task {i} ({kind}) {what}", "status": "pending", "blockedBy": deps,
            "metadata": {"files": {"create": create, "modify": modify}},
            "agent": {"role": "engineer", "acceptanceCriteria": [
                {"criterion": c, "check": c} for c in checks]},
        })
    return {"schemaVersion": 2, "goal": "hot files", "tasks": tasks}, kinds


def hot_files(plan):
    """The shared files as the repository holds them at the start: one `shared=` line, then a
    region per task that modifies the file, apart from each other."""
    regions = {}
    for i, t in enumerate(plan["tasks"]):
        for f in t["metadata"]["files"]["modify"]:
            regions.setdefault(f, []).append(i)
    files = {}
    for f, tasks in regions.items():
        lines = ["shared=base"]
        for i in tasks:
            lines += [f"# region {i}", f"slot-{i}=old", "keep", "keep", "keep"]
        files[f] = "\n".join(lines) + "\n"
    return files


WORKER = r"""#!/bin/sh
i=$DAGEXEC_TASK_INDEX
ms=$(( 500 + (i * 7919 % 9) * 250 ))
sleep "$(( ms / 1000 )).$(printf %03d $(( ms % 1000 )))"
kind=$(sed -n "s/^## Task: task $i (\([a-z]*\)) .*/\1/p" "$DAGEXEC_PROMPT_FILE")
for f in $(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' ' '); do
  [ "$f" = "(none)" ] && continue
  mkdir -p "$(dirname "$f")"; echo "created-$i" > "$f"
done
first=1
for f in $(sed -n 's/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' ' '); do
  [ "$f" = "(none)" ] && continue
  sed -i "s/^slot-$i=old$/slot-$i=new/" "$f"
  sed -i 's/=TODO$/=DONE/' "$f"
  if [ $first = 1 ] && [ "$kind" = conflict ]; then sed -i "s/^shared=\(.*\)$/shared=\1+$i/" "$f"; fi
  if [ $first = 1 ] && [ "$kind" = breaker ] && ! grep -q "^note-$i=" "$f"; then
    if grep -q '^## Rebase' "$DAGEXEC_PROMPT_FILE"; then n=DONE; else n=TODO; fi
    sed -i "s/^slot-$i=new$/slot-$i=new\nnote-$i=$n/" "$f"
  fi
  first=0
done
echo "COMPLETED: task $i"
"""


def files_shared(plan):
    n = {}
    for t in plan["tasks"]:
        for f in t["metadata"]["files"]["modify"]:
            n[f] = n.get(f, 0) + 1
    return n


def bound(plan, jobs):
    finish = []
    for i, t in enumerate(plan["tasks"]):
        finish.append(max((finish[d] for d in t["blockedBy"]), default=0.0) + duration(i))
    total = sum(duration(i) for i in range(len(plan["tasks"])))
    return max(max(finish), total / jobs)


def oracle(d, plan, kinds):
    """Every task's change exactly once in the committed tree; '' when it holds."""
    def show(f):
        return subprocess.run(["git", "show", f"HEAD:{f}"], cwd=d, capture_output=True, text=True).stdout
    text = {f: show(f) for f in hot_files(plan)}
    wrong = []
    for i, kind in enumerate(kinds):
        files = plan["tasks"][i]["metadata"]["files"]
        for f in files["create"]:
            if show(f) != f"created-{i}\n":
                wrong.append(f"task {i}: {f}")
        for k, f in enumerate(files["modify"]):
            t = text[f]
            if len(re.findall(rf"^slot-{i}=new$", t, re.M)) != 1 or re.search(rf"^slot-{i}=old$", t, re.M):
                wrong.append(f"task {i}: its slot in {f}")
            shared = re.search(r"^shared=(.*)$", t, re.M).group(1).split("+")
            if shared.count(str(i)) != (1 if kind == "conflict" and k == 0 else 0):
                wrong.append(f"task {i}: the shared line of {f} {shared}")
            if len(re.findall(rf"^note-{i}=(TODO|DONE)$", t, re.M)) != (1 if kind == "breaker" and k == 0 else 0):
                wrong.append(f"task {i}: its note in {f}")
    return "; ".join(wrong)


def run(binary, a, plan, kinds, schedule, overlap, worker):
    d = tempfile.mkdtemp(prefix=f"dagexec-merge-{schedule}-{overlap}-")
    try:
        os.makedirs(os.path.join(d, ".design"))
        with open(os.path.join(d, ".design/plan.json"), "w") as f:
            json.dump(plan, f, indent=2)
        for rel, body in hot_files(plan).items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(body)
        for args in (["init", "-q"], ["config", "user.name", "bench"], ["config", "user.email", "bench@example.com"],
                     ["add", "-A"], ["commit", "-qm", "start"]):
            subprocess.run(["git", *args], cwd=d, check=True)
        t0 = time.perf_counter()
        p = subprocess.run([binary, "run", "--worker", worker, "--jobs", str(a.jobs), "--schedule", schedule,
                            "--overlap", overlap, "--yes", "--timeout", "5m"],
                           cwd=d, env=dict(os.environ, NO_COLOR="1"), capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        done = os.path.join(d, ".design/plan.done.json")
        final = json.load(open(done if os.path.exists(done) else os.path.join(d, ".design/plan.json")))
        records = final.get("progress", {}).get("dagexecAttempts", [])
        rebase_s = sum(r.get("seconds", 0.0) for r in records if r.get("rebase"))
        work_s = sum(r.get("seconds", 0.0) for r in records)
        conflicts = sum(1 for r in records if r.get("outcome") == "conflict")
        failed = sum(1 for t in final["tasks"] if t["status"] != "completed")
        wrong = oracle(d, plan, kinds)
        # What `dagexec simulate` predicts for this schedule under merge from this run's own
        # records (task times as serial would spend them, the conflict rate learned).
        predicted = None
        if overlap == "merge" and os.path.exists(done):
            sim = subprocess.run([binary, "--plan", done, "simulate", "--json", "--jobs", str(a.jobs)],
                                 cwd=d, capture_output=True, text=True)
            if sim.returncode == 0:
                m = json.loads(sim.stdout).get("merge")
                if m:
                    row = next(x for x in m["schedules"] if x["schedule"] == schedule)
                    predicted = (row["seconds"], row["vsBound"], m["conflictRate"], m["learnedFrom"])
        return {"predicted": predicted,"elapsed": elapsed, "exit": p.returncode, "rebase_s": rebase_s, "work_s": work_s,
                "conflicts": conflicts, "rebases": sum(1 for r in records if r.get("rebase")),
                "not_completed": failed, "oracle": wrong}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--hot", type=int, default=3)
    ap.add_argument("--conflict", type=float, default=0.15)
    ap.add_argument("--breaker", type=float, default=0.05)
    ap.add_argument("--edge-p", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--schedules", default="rounds,eager")
    ap.add_argument("--plan", choices=("hot", "genplan"), default="hot",
                    help="hot: every task on one of --hot files; genplan: bench/makespan.py's plan (--tasks 60)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each row; prints their median")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    binary = os.environ.get("DAGEXEC_BIN", os.path.join(ROOT, "target/release/dagexec"))
    plan, kinds = make_plan(a)
    wdir = tempfile.mkdtemp(prefix="dagexec-merge-worker-")
    worker_path = os.path.join(wdir, "worker.sh")
    with open(worker_path, "w") as f:
        f.write(WORKER)
    worker = f"sh '{worker_path}'"
    lb = bound(plan, a.jobs)
    first = sum(duration(i) for i in range(a.tasks))
    shared = sum(1 for f, n in files_shared(plan).items() if n > 1)
    where = (f"bench/makespan.py's genplan plan ({shared} files shared by 2-{max(files_shared(plan).values())} tasks)"
             if a.plan == "genplan" else f"{a.hot} hot files")
    print(f"plan: {a.tasks} tasks on {where} (seed {a.seed}), jobs {a.jobs}; "
          f"{kinds.count('conflict')} edit the shared line, {kinds.count('breaker')} break the others' checks")
    print(f"lower bound {lb:.1f} s (first attempts' work {first:.1f} s)")
    print(f"{'schedule':8s} {'overlap':7s} {'makespan':>9s} {'x bound':>8s} {'rebase s':>9s} {'extra':>6s} "
          f"{'conflicts':>9s} {'failed':>6s}  oracle")
    summary = []
    for schedule in a.schedules.split(","):
        for overlap in ("serial", "merge"):
            ratios, extras = [], []
            for _ in range(a.repeat):
                r = run(binary, a, plan, kinds, schedule, overlap, worker)
                extra = r["rebase_s"] / first if first else 0.0
                ratios.append(r["elapsed"] / lb)
                extras.append(extra)
                print(f"{schedule:8s} {overlap:7s} {r['elapsed']:8.1f}s {r['elapsed'] / lb:7.2f}x {r['rebase_s']:8.1f}s "
                      f"{extra:5.0%} {r['conflicts']:9d} {r['not_completed']:6d}  "
                      f"{'every change exactly once' if not r['oracle'] else 'WRONG: ' + r['oracle']}"
                      f"{'' if r['exit'] == 0 else ' (exit %d)' % r['exit']}",
                      flush=True)
                if r["predicted"]:
                    sec, vs, rate, n = r["predicted"]
                    print(f"{'':17s}simulate, from this run's records: {sec:.1f} s, {vs:.2f}x its bound "
                          f"(conflict rate {rate:.0%} learned from {n} attempts)", flush=True)
            summary.append((schedule, overlap, sorted(ratios), sorted(extras)))
    if a.repeat > 1:
        print(f"median of {a.repeat} runs (min-max):")
        for schedule, overlap, ratios, extras in summary:
            mid = len(ratios) // 2
            print(f"  {schedule:8s} {overlap:7s} {ratios[mid]:.2f}x the bound ({ratios[0]:.2f}-{ratios[-1]:.2f}), "
                  f"extra worker time {extras[mid]:.0%} ({extras[0]:.0%}-{extras[-1]:.0%})")
    shutil.rmtree(wdir, ignore_errors=True)


if __name__ == "__main__":
    main()
