use std::collections::BTreeSet;

use super::*;
use crate::sources::{Format, Prepared, Tick, completed_ids, generated_dir_of};

// Spec Kit is read as every task-list format is (`sources::prepare`, `sources::write_back`);
// these name what the tests below exercise through the shared paths.

fn describe(errors: &[SpecKitError]) -> (String, String) {
    crate::sources::describe(&errors.iter().map(Problem::from).collect::<Vec<_>>())
}

fn prepare(root: &Path, md: &Path, write: bool) -> Result<Prepared, Vec<Problem>> {
    crate::sources::prepare(Format::SpecKit, root, md, write)
}

fn tick_index(
    index: &crate::edge::git::RoundIndex,
    plan: &Plan,
) -> Result<Tick, crate::edge::git::GitError> {
    crate::sources::write_back(index, plan)
}

fn carry_over(fresh: &mut Plan, old: &Plan) {
    crate::sources::generated::carry_over(fresh, old, FIELD);
}

const ALBUMS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/speckit/001-photo-albums/tasks.md"
));
const INVENTORY: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/speckit/002-inventory/tasks.md"
));

fn read(text: &str) -> Parsed {
    parse("specs/x/tasks.md", text).unwrap_or_else(|e| panic!("{}", describe(&e).0))
}

/// The tasks node `i` waits for, looking through joins (ascending).
fn real_deps(p: &Parsed, i: usize) -> Vec<usize> {
    let mut out = BTreeSet::new();
    let mut stack = p.deps[i].clone();
    while let Some(d) = stack.pop() {
        if d < p.tasks.len() {
            out.insert(d);
        } else {
            stack.extend(p.deps[d].iter().copied());
        }
    }
    out.into_iter().collect()
}

/// Each task's dependencies as IDs (through joins).
fn deps_of(p: &Parsed, id: &str) -> Vec<String> {
    let i = p.tasks.iter().position(|t| t.id == id).unwrap();
    real_deps(p, i)
        .iter()
        .map(|&d| p.tasks[d].id.clone())
        .collect()
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(std::string::ToString::to_string).collect()
}

/// The errors parsing `text` (as `t.md`) gives, as said.
fn refused(text: &str) -> Vec<String> {
    let e = parse("t.md", text).unwrap_err();
    e.iter().map(ToString::to_string).collect()
}

/// The warnings of lines that order tasks in words dagexec does not read.
fn unread(p: &Parsed) -> Vec<&String> {
    let said = p.warnings.iter();
    said.filter(|w| w.contains("does not read")).collect()
}

fn task<'a>(p: &'a Parsed, id: &str) -> &'a TaskLine {
    p.tasks.iter().find(|t| t.id == id).unwrap()
}

#[test]
fn template_rules_give_the_edges() {
    let p = read(ALBUMS);
    assert_eq!(p.tasks.len(), 21, "the fenced T999 is not a task");
    assert_eq!(p.feature.as_deref(), Some("Photo Albums"));
    assert_eq!(p.phases.len(), 6);
    let stories: Vec<bool> = p.phases.iter().map(|ph| ph.story).collect();
    assert_eq!(stories, [false, false, true, true, true, false]);
    // Setup: T002 (no [P]) after T001; T003 [P] waits for nothing.
    assert_eq!(deps_of(&p, "T001"), ids(&[]));
    assert_eq!(deps_of(&p, "T002"), ids(&["T001"]));
    assert_eq!(deps_of(&p, "T003"), ids(&[]));
    // Foundational waits for what Setup ends with.
    assert_eq!(deps_of(&p, "T004"), ids(&["T002", "T003"]));
    assert_eq!(deps_of(&p, "T005"), ids(&["T002", "T003"]));
    assert_eq!(deps_of(&p, "T007"), ids(&["T004", "T005", "T006"]));
    // Stories wait for Foundational, not for each other.
    for first in ["T008", "T009", "T010", "T011", "T015", "T018"] {
        assert_eq!(deps_of(&p, first), ids(&["T007"]), "{first}");
    }
    assert_eq!(deps_of(&p, "T012"), ids(&["T008", "T009", "T010", "T011"]));
    assert_eq!(deps_of(&p, "T016"), ids(&["T015"]));
    assert_eq!(deps_of(&p, "T019"), ids(&["T018"]));
    // Polish waits for every story's last task.
    assert_eq!(deps_of(&p, "T020"), ids(&["T014", "T017", "T019"]));
    assert_eq!(deps_of(&p, "T021"), ids(&["T020"]));
    // Markers and checkboxes.
    let t = task(&p, "T012");
    assert!(!t.parallel && t.stories == ["US1"]);
    assert_eq!(t.depends_on, ids(&["T010", "T011"]));
    assert!(task(&p, "T001").done && !task(&p, "T002").done);
    assert_eq!(
        p.phases[2].goal.as_deref(),
        Some("A user creates an album and sees it listed")
    );
    assert_eq!(
        p.phases[2].independent_test.as_deref(),
        Some("POST /albums then GET /albums lists the new album")
    );
}

#[test]
fn files_come_from_the_task_text() {
    let p = read(ALBUMS);
    let files = |id: &str| {
        let t = task(&p, id);
        (t.create.clone(), t.modify.clone())
    };
    let none: Vec<String> = Vec::new();
    assert_eq!(files("T002"), (ids(&["pyproject.toml"]), none.clone()));
    assert_eq!(
        files("T003"),
        (none.clone(), ids(&["ruff.toml"])),
        "Configure modifies"
    );
    assert_eq!(
        files("T005"),
        (ids(&["src/middleware/auth.py"]), none.clone())
    );
    assert_eq!(
        files("T008"),
        (ids(&["tests/contract/test_albums_post.py"]), none.clone()),
        "a test task creates its test file; /albums is no file"
    );
    assert_eq!(
        files("T012"),
        (ids(&["src/services/album_service.py"]), none.clone())
    );
    assert_eq!(files("T013"), (ids(&["src/api/albums.py"]), none.clone()));
    assert_eq!(
        files("T017"),
        (none.clone(), ids(&["src/api/albums.py"])),
        "a file created earlier is modified later"
    );
    assert_eq!(
        files("T019"),
        (ids(&["src/services/share_service.py"]), none.clone())
    );
    assert_eq!(
        files("T020"),
        (none.clone(), none.clone()),
        "docs/ is a directory"
    );
    assert_eq!(
        files("T021"),
        (none.clone(), none.clone()),
        "running quickstart.md changes nothing"
    );
    let flagged: Vec<&str> = p
        .warnings
        .iter()
        .map(|w| {
            w.split(": task ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(flagged, ["T001", "T014", "T020", "T021"]);
    assert!(p.warnings[0].starts_with("specs/x/tasks.md:23: task T001 names no file"));
}

#[test]
fn the_plan_has_context_prompts_and_state() {
    let p = read(ALBUMS);
    let context = ids(&[
        "specs/x/spec.md",
        "specs/x/plan.md",
        "specs/x/contracts/albums.yaml",
    ]);
    let plan = build(&p, "specs/x/tasks.md", &context);
    let dag = crate::pure::validate::check(&plan, Some("specs/x/.dagexec/plan.json"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    // 21 tasks, and the joins after them (`two_parallel_phases_of_three_meet_at_one_join`).
    assert_eq!(plan.total(), 21);
    assert_eq!(dag.len(), plan.tasks.len());
    assert_eq!(plan.goal, "Photo Albums (specs/x/tasks.md)");
    assert_eq!(plan.tasks[0].status, Status::Completed);
    assert_eq!(plan.progress.completed_tasks.len(), 1);
    let t = &plan.tasks[11];
    assert_eq!(
        t.subject,
        "T012 Implement AlbumService in src/services/album_service.py (depends on T010, T011)"
    );
    let paths: Vec<&str> = t.context_files().iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "specs/x/spec.md",
            "specs/x/plan.md",
            "specs/x/contracts/albums.yaml"
        ]
    );
    let prompt = crate::pure::prompt::original_prompt(&plan, 11, crate::pure::prompt::Unit::Batch);
    for want in [
        "Spec Kit task T012 of specs/x/tasks.md (line 59)",
        "Goal: A user creates an album and sees it listed",
        "Independent Test: POST /albums then GET /albums lists the new album",
        "(user story US1)",
        "specs/x/contracts/albums.yaml",
        "Do not edit specs/x/tasks.md",
    ] {
        assert!(prompt.contains(want), "{want:?} not in\n{prompt}");
    }
    assert_eq!(completed_ids(&plan), BTreeSet::from(["T001".to_string()]));
    assert_eq!(crate::sources::source_of(&plan), Some("specs/x/tasks.md"));
    assert_eq!(generated_dir_of(&plan).as_deref(), Some("specs/x/.dagexec"));
    assert_eq!(
        crate::sources::generated::plan_rel_of("specs/x/tasks.md"),
        "specs/x/.dagexec/plan.json"
    );
    assert_eq!(
        crate::sources::generated::plan_rel_of("tasks.md"),
        ".dagexec/plan.json"
    );
}

#[test]
fn five_stories_sixty_tasks() {
    let p = read(INVENTORY);
    assert_eq!(p.tasks.len(), 62);
    let story_phases: Vec<usize> = (0..p.phases.len()).filter(|&k| p.phases[k].story).collect();
    assert_eq!(story_phases, [2, 3, 4, 5, 6]);
    let foundational_end = ids(&["T010", "T011", "T012"]);
    for (i, t) in p.tasks.iter().enumerate() {
        let ph = &p.phases[t.phase];
        if ph.story {
            // Only its own phase or Foundational (phase 1): stories never wait for each other.
            for &d in &real_deps(&p, i) {
                let dp = p.tasks[d].phase;
                assert!(
                    dp == t.phase || dp == 1,
                    "{} waits for {}",
                    t.id,
                    p.tasks[d].id
                );
            }
            if real_deps(&p, i)
                .iter()
                .all(|&d| p.tasks[d].phase != t.phase)
            {
                assert_eq!(deps_of(&p, &t.id), foundational_end, "{}", t.id);
            }
        }
    }
    // The explicit edges, inside a story.
    assert_eq!(deps_of(&p, "T017"), ids(&["T013", "T014", "T015", "T016"]));
    assert!(task(&p, "T018").depends_on == ids(&["T015", "T017"]));
    // Polish waits for the last task of each story.
    assert_eq!(
        deps_of(&p, "T058"),
        ids(&["T021", "T030", "T039", "T048", "T057"])
    );
    assert_eq!(deps_of(&p, "T059"), deps_of(&p, "T058"));
    assert_eq!(deps_of(&p, "T060"), ids(&["T058", "T059"]));
    assert_eq!(task(&p, "T061").modify, ids(&["src/db/pool.rs"]));
    assert_eq!(task(&p, "T059").modify, ids(&["README.md"]));
    assert_eq!(p.warnings.len(), 8, "{:#?}", p.warnings);
    let plan = build(&p, "specs/002-inventory/tasks.md", &[]);
    let dag = crate::pure::validate::check(&plan, None).unwrap_or_else(|e| panic!("{e:?}"));
    // Setup, Foundational, the stories side by side, Polish: the depth is that of one story.
    assert_eq!(dag.max_depth(), dag.depth(61));
    let deepest_story = (12..57).map(|t| dag.depth(t)).max().unwrap();
    assert!(dag.depth(57) == deepest_story + 1);
}

#[test]
fn errors_name_the_line_with_a_hint() {
    let err = |name: &str| {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/speckit/bad/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let e = parse("t.md", &text).unwrap_err();
        assert!(e.iter().all(|e| !e.hint().is_empty()), "{e:?}");
        e.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    assert_eq!(
        err("unknown-dep.md"),
        ["t.md:6: task T002 depends on T042, which is not a task in this file"]
    );
    assert_eq!(
        err("duplicate.md"),
        ["t.md:7: task ID T002 is used twice (first on line 6)"]
    );
    assert_eq!(
        err("cycle.md"),
        ["t.md:5: the tasks wait for each other in a cycle: T001 → T003 → T002 → T001"]
    );
    assert_eq!(
        err("malformed.md"),
        [
            "t.md:6: the checkbox line \"[US1] Create User model in src/models/user.py\" has no task ID",
            "t.md:7: task T003 has no checkbox",
            "t.md:8: task T004 has no description",
            "t.md:9: task T005 names the file \"../outside.md\", which must not contain `..`",
        ]
    );
    let e = parse("t.md", "# Tasks: none\n\nJust prose.\n").unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "t.md: no task lines (`- [ ] T001 Description`)"
    );
    let e = parse("t.md", "- [ ] T001 Do it (depends on T001)\n").unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "t.md:1: the tasks wait for each other in a cycle: T001 → T001"
    );
}

#[test]
fn a_file_without_phases_is_one_phase() {
    let p = read(
        "- [ ] T1 [P] Write a.txt in `a.txt`\n- [ ] T2 [P] Write b.txt in `b.txt`\n- [ ] T3 Join them into c.txt\n",
    );
    assert_eq!(p.phases.len(), 1);
    assert_eq!(p.deps, [vec![], vec![], vec![0, 1]]);
    assert_eq!(p.tasks[2].modify, ids(&["c.txt"]));
}

#[test]
fn ticking_changes_only_the_completed_lines() {
    let done = BTreeSet::from(["T002".to_string(), "T012".to_string(), "T999".to_string()]);
    let tick = |text: &str, done: &BTreeSet<String>| parse::tick("t.md", text, done).unwrap();
    let ticked = tick(ALBUMS, &done);
    let changed: Vec<(&str, &str)> = ALBUMS
        .lines()
        .zip(ticked.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert!(changed[0].1.starts_with("- [x] T002 Initialize"));
    assert!(
        changed[1]
            .1
            .starts_with("- [x] T012 [US1] Implement AlbumService")
    );
    assert_eq!(ticked.len(), ALBUMS.len());
    let again = read(&ticked);
    assert!(task(&again, "T012").done);
    assert_eq!(
        tick(&ticked, &done),
        ticked,
        "ticking twice changes nothing"
    );
    // CRLF files keep their line ends.
    let crlf = "- [ ] T001 Write `a.txt`\r\n- [ ] T002 Write `b.txt`\r\n";
    assert_eq!(
        tick(crlf, &BTreeSet::from(["T002".to_string()])),
        "- [ ] T001 Write `a.txt`\r\n- [x] T002 Write `b.txt`\r\n"
    );
}

#[test]
fn state_carries_over_for_unchanged_tasks() {
    let p = read(ALBUMS);
    let mut old = build(&p, "specs/x/tasks.md", &[]);
    old.tasks[3].status = Status::Completed; // T004
    old.tasks[3].result = Some("schema done".into());
    crate::pure::update::trim(&mut old.tasks[3]);
    old.progress.completed_tasks.push(CompletedTask {
        index: 3,
        summary: "schema done".into(),
        wave: None,
        extra: Default::default(),
    });
    old.tasks[4].status = Status::Failed; // T005
    old.tasks[4].attempts = Some(3);
    old.tasks[4]
        .extra
        .insert("question".into(), json!({"kind": "action"}));
    old.tasks[5].status = Status::Failed; // T006, edited below
    old.progress.extra.insert("round".into(), 4.into());
    // A new task in Foundational, and T006's text edited; T004 ticked by the round commit that
    // completed it.
    let edited = ALBUMS
        .replace("- [ ] T004", "- [x] T004")
        .replace(
            "- [ ] T007 Create base model",
            "- [ ] T022 [P] Add rate limiting in src/middleware/limit.py\n- [ ] T007 Create base model",
        )
        .replace("Setup API routing and middleware", "Setup API routing");
    let mut fresh = build(&read(&edited), "specs/x/tasks.md", &[]);
    carry_over(&mut fresh, &old);
    assert_eq!(fresh.total(), 22);
    let at = |id: &str| {
        fresh
            .tasks
            .iter()
            .position(|t| t.subject.starts_with(&format!("{id} ")))
            .unwrap()
    };
    assert_eq!(fresh.tasks[at("T004")].status, Status::Completed);
    let t005 = &fresh.tasks[at("T005")];
    assert_eq!((t005.status, t005.attempts), (Status::Failed, Some(3)));
    assert!(t005.extra.contains_key("question"));
    assert_eq!(t005.extra[FIELD]["id"], "T005", "the fresh line is kept");
    assert_eq!(
        fresh.tasks[at("T006")].status,
        Status::Pending,
        "its text changed"
    );
    assert_eq!(fresh.tasks[at("T022")].status, Status::Pending);
    let done: Vec<(usize, &str)> = fresh
        .progress
        .completed_tasks
        .iter()
        .map(|c| (c.index, c.summary.as_str()))
        .collect();
    assert_eq!(
        done,
        [(0, "ticked in specs/x/tasks.md"), (3, "schema done")]
    );
    assert_eq!(fresh.progress.extra["round"], 4);
    assert!(crate::pure::validate::check(&fresh, None).is_ok());
}

/// The Spec Kit fixture `001-photo-albums` copied under `root`; its folder.
fn photo_albums(root: &std::path::Path) -> std::path::PathBuf {
    let dir = root.join("specs/001-photo-albums");
    std::fs::create_dir_all(dir.join("contracts")).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/speckit/001-photo-albums");
    for f in [
        "tasks.md",
        "spec.md",
        "plan.md",
        "data-model.md",
        "contracts/albums.yaml",
        "contracts/photos.yaml",
    ] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    dir
}

/// `git init` in `root` and a first commit of everything in it.
fn commit_all(root: &std::path::Path) {
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args([
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "start"]);
}

/// What [`tick_index`] skips, saying why: a tasks.md path that is not one (or outside), a
/// tasks.md the commit holds as something unreadable, or not at all.
fn skipped_ticks(
    repo: &crate::edge::git::Repo,
    index: crate::edge::git::RoundIndex,
    plan: &Plan,
    rel: &str,
) {
    for bad in ["src/main.rs", ".git/hooks/x.md", "../x/tasks.md"] {
        let mut tampered = plan.clone();
        tampered.extra[FIELD]["tasksMd"] = bad.into();
        assert!(
            matches!(tick_index(&index, &tampered).unwrap(), Tick::Skipped { .. }),
            "{bad}"
        );
    }
    // A tasks.md the commit holds as something unreadable, or not at all: skipped, saying so.
    drop(index);
    let fresh = repo.round_index().unwrap();
    fresh
        .write_entry(rel, "100644", b"- [ ] T002 \xff\n")
        .unwrap();
    assert_eq!(
        tick_index(&fresh, plan).unwrap(),
        Tick::Skipped {
            path: rel.into(),
            why: "it is not UTF-8 text".into()
        }
    );
    drop(fresh);
    let fresh = repo.round_index().unwrap();
    fresh.remove(&[rel.to_string()]).unwrap();
    assert!(matches!(
        tick_index(&fresh, plan).unwrap(),
        Tick::Skipped { why, .. } if why.contains("holds no such file")
    ));
    drop(fresh);
}

#[test]
fn prepare_writes_the_generated_plan_next_to_tasks_md() {
    let root = tempfile::tempdir().unwrap();
    let dir = photo_albums(root.path());
    let md = std::path::Path::new("specs/001-photo-albums/tasks.md");
    let dry = prepare(root.path(), md, false).unwrap();
    assert!(dry.scratch.is_some() && dry.plan.is_file());
    assert!(
        !dir.join(GENERATED_DIR).exists(),
        "a dry preparation writes nothing there"
    );
    let prepared = prepare(root.path(), md, true).unwrap();
    assert_eq!(
        prepared.plan_rel,
        "specs/001-photo-albums/.dagexec/plan.json"
    );
    assert_eq!(prepared.warnings.len(), 4);
    let plan = crate::edge::plan_file::load(&prepared.plan).unwrap();
    let context: Vec<&str> = plan.tasks[1]
        .context_files()
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(
        context,
        [
            "specs/001-photo-albums/spec.md",
            "specs/001-photo-albums/plan.md",
            "specs/001-photo-albums/data-model.md",
            "specs/001-photo-albums/contracts/albums.yaml",
            "specs/001-photo-albums/contracts/photos.yaml",
        ]
    );
    // The state survives a second reading; ticking writes tasks.md.
    let mut plan = plan;
    plan.tasks[1].status = Status::Failed;
    plan.tasks[1].attempts = Some(2);
    crate::edge::plan_file::save(&plan, &prepared.plan).unwrap();
    let again = prepare(root.path(), md, true).unwrap();
    let mut plan = crate::edge::plan_file::load(&again.plan).unwrap();
    assert_eq!(
        (plan.tasks[1].status, plan.tasks[1].attempts),
        (Status::Failed, Some(2))
    );
    // A task completed but not ticked (the round commit ticks it) and unticked by the team:
    // the file wins.
    plan.tasks[1].status = Status::Completed;
    crate::edge::plan_file::save(&plan, &again.plan).unwrap();
    let reopened = prepare(root.path(), md, true).unwrap();
    let reread = crate::edge::plan_file::load(&reopened.plan).unwrap();
    assert_eq!(reread.tasks[1].status, Status::Pending);
    // Ticking happens in the round's index (the version the commit holds), never in the work
    // tree.
    commit_all(root.path());
    let repo = crate::edge::git::Repo::discover(root.path()).unwrap();
    let index = repo.round_index().unwrap();
    let rel = "specs/001-photo-albums/tasks.md";
    assert_eq!(tick_index(&index, &plan).unwrap(), Tick::Ticked(rel.into()));
    let (mode, bytes) = index.read_entry(rel).unwrap().unwrap();
    assert_eq!(mode, "100644");
    assert!(
        String::from_utf8(bytes)
            .unwrap()
            .contains("- [x] T002 Initialize")
    );
    let text = std::fs::read_to_string(dir.join("tasks.md")).unwrap();
    assert!(
        text.contains("- [ ] T002 Initialize"),
        "the work tree is untouched"
    );
    assert_eq!(
        tick_index(&index, &plan).unwrap(),
        Tick::Nothing,
        "nothing left to tick"
    );
    skipped_ticks(&repo, index, &plan, rel);
    let outside = prepare(root.path(), std::path::Path::new("/etc/tasks.md"), false).unwrap_err();
    assert!(outside[0].message.contains("is outside the repository"));
    std::fs::create_dir_all(root.path().join(".git")).unwrap();
    std::fs::write(root.path().join(".git/tasks.md"), "- [ ] T1 x\n").unwrap();
    let inside_git = prepare(root.path(), std::path::Path::new(".git/tasks.md"), true).unwrap_err();
    assert!(inside_git[0].message.contains("is outside the repository"));
    assert!(!root.path().join(".git/.dagexec").exists());
}

#[test]
fn deeper_phase_headings_and_bold_colons() {
    let p = read(
        "## Tasks\n\n### Phase 3.1: Setup\n**Purpose:** get going\n- [ ] T001 Write `a.txt`\n- [ ] T002 Write `b.txt`\n\n### Phase 3.2: Core\n### Tests first\n- [ ] T003 [P] Write `c.txt`\n- [ ] T004 [P] Write `d.txt`\n",
    );
    let titles: Vec<&str> = p.phases.iter().map(|ph| ph.title.as_str()).collect();
    assert_eq!(titles, ["Phase 3.1: Setup", "Phase 3.2: Core"]);
    assert_eq!(p.phases[0].goal.as_deref(), Some("get going"));
    assert_eq!(p.deps, [vec![], vec![0], vec![1], vec![1]]);
}

fn done(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(std::string::ToString::to_string).collect()
}

#[test]
fn a_fence_inside_a_comment_before_the_tasks_does_not_stop_ticking() {
    let text = "# Tasks: x\n\n<!--\nAn example:\n```\n- [ ] T999 Not a task\n-->\n\n## Phase 1\n\n- [ ] T001 Create `a.txt`\n- [ ] T002 Create `b.txt`\n";
    let p = read(text);
    assert_eq!(
        ids(&["T001", "T002"]),
        p.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>()
    );
    let ticked = parse::tick("t.md", text, &done(&["T001", "T002"])).unwrap();
    assert_eq!(ticked, text.replace("- [ ] T00", "- [x] T00"));
    assert!(read(&ticked).tasks.iter().all(|t| t.done));
}

#[test]
fn a_commented_out_task_line_is_never_ticked() {
    let text = "## Phase 1\n\n<!-- - [ ] T001 Create `old.txt` -->\n- [ ] T001 Create `a.txt`\n<!--\n- [ ] T002 Create `b.txt`\n-->\n- [ ] T003 Create `c.txt`\n";
    let p = read(text);
    assert_eq!(p.tasks.len(), 2);
    assert_eq!(task(&p, "T001").line, 4);
    let ticked = parse::tick("t.md", text, &done(&["T001", "T002", "T003"])).unwrap();
    assert_eq!(
        ticked,
        "## Phase 1\n\n<!-- - [ ] T001 Create `old.txt` -->\n- [x] T001 Create `a.txt`\n<!--\n- [ ] T002 Create `b.txt`\n-->\n- [x] T003 Create `c.txt`\n"
    );
}

#[test]
fn a_bom_before_the_first_task_line_keeps_that_task() {
    let text = "\u{feff}- [ ] T001 Create `a.txt`\n- [ ] T002 Create `b.txt`\n";
    let p = read(text);
    assert_eq!(p.tasks.len(), 2, "{:?}", p.tasks);
    assert_eq!(task(&p, "T001").line, 1);
    assert_eq!(deps_of(&p, "T002"), ids(&["T001"]));
    let ticked = parse::tick("t.md", text, &done(&["T001"])).unwrap();
    assert_eq!(
        ticked,
        "\u{feff}- [x] T001 Create `a.txt`\n- [ ] T002 Create `b.txt`\n"
    );
}

#[test]
fn a_backtick_fence_is_closed_only_by_its_own_kind() {
    let text = "```\n~~~\n- [ ] T009 In the fence\n```\n- [ ] T001 Create `a.txt`\n";
    let p = read(text);
    assert_eq!(
        p.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["T001"]
    );
}

/// `CommonMark` (and so GitHub, which renders the file): a closing fence has nothing after its
/// backticks but spaces. A line `` ```rust `` inside a fence is the fence's text, so the example
/// below stays one block, and the tasks after it are tasks.
#[test]
fn a_fence_line_with_an_info_string_does_not_close_a_fence() {
    let text = "## Phase 1\n\nAn example of a block in a block:\n```\n```rust\n- [ ] T009 In the fence\n```\n- [ ] T001 Create `a.txt`\n- [ ] T002 Create `b.txt`\n";
    let p = read(text);
    assert_eq!(
        p.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["T001", "T002"]
    );
    let ticked = parse::tick("t.md", text, &done(&["T001", "T002"])).unwrap();
    assert_eq!(
        ticked,
        text.replace("- [ ] T001", "- [x] T001")
            .replace("- [ ] T002", "- [x] T002")
    );
}

/// `CommonMark`: a backtick fence's info string holds no backtick, so a line starting with
/// a code span in triple backticks opens no block: the tasks after it are tasks (GitHub
/// shows them as such).
#[test]
fn a_line_starting_with_a_triple_backtick_code_span_opens_no_fence() {
    let text = "## Phase 1\n\n- [ ] T001 Create `a.txt`\n```make check``` runs the tests.\n- [ ] T002 Create `b.txt`\n";
    let p = read(text);
    assert_eq!(
        p.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["T001", "T002"]
    );
    let ticked = parse::tick("t.md", text, &done(&["T002"])).unwrap();
    assert_eq!(ticked, text.replace("- [ ] T002", "- [x] T002"));
}

#[test]
fn paths_no_task_may_name_are_errors_with_the_line_and_id() {
    let text = "- [ ] T001 Create `a.txt`\n- [ ] T002 Update `.git/config`\n- [ ] T003 Update `../x`\n- [ ] T004 Edit `specs/x/.dagexec/plan.json`\n- [ ] T005 Tick the task in specs/x/tasks.md\n";
    let e = parse("specs/x/tasks.md", text).unwrap_err();
    let e: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(
        e,
        [
            "specs/x/tasks.md:2: task T002 names the file \".git/config\", which points into .git/",
            "specs/x/tasks.md:3: task T003 names the file \"../x\", which must not contain `..`",
            "specs/x/tasks.md:4: task T004 names the file \"specs/x/.dagexec/plan.json\", which points at the plan file itself",
            "specs/x/tasks.md:5: task T005 names the file \"specs/x/tasks.md\", which is this task list itself; only dagexec changes it (it ticks completed tasks)",
        ]
    );
}

/// Every pair (a, b) of the first `n` nodes (the tasks, not the joins after them) with a
/// reachable from b through `deps` (b waits for a, directly or not).
fn closure(deps: &[Vec<usize>], n: usize) -> BTreeSet<(usize, usize)> {
    let mut out = BTreeSet::new();
    for b in 0..n {
        let mut stack = deps[b].clone();
        let mut seen = BTreeSet::new();
        while let Some(a) = stack.pop() {
            if seen.insert(a) {
                if a < n {
                    out.insert((a, b));
                }
                stack.extend(deps[a].iter().copied());
            }
        }
    }
    out
}

proptest::proptest! {
    /// The O(N) edges of a phase give exactly the order the all-pairs rule gave, whatever
    /// the `[P]` markers, stories and `depends on`.
    #[test]
    fn chained_edges_keep_the_all_pairs_order(
        phases in proptest::collection::vec(
            (proptest::bool::ANY, proptest::collection::vec((proptest::bool::ANY, 0usize..4), 1..7)),
            1..5,
        )
    ) {
        let mut text = String::new();
        let mut n = 0;
        for (p, (story, tasks)) in phases.iter().enumerate() {
            let heading = if *story { format!("User Story {}", p + 1) } else { "Build".into() };
            text.push_str(&format!("## Phase {}: {heading}\n\n", p + 1));
            for (parallel, back) in tasks {
                n += 1;
                let marker = if *parallel { "[P] " } else { "" };
                let dep = if *back > 0 && n > *back + 1 {
                    format!(" (depends on T{:03})", n - back - 1)
                } else {
                    String::new()
                };
                text.push_str(&format!("- [ ] T{n:03} {marker}Create `f{n}.txt`{dep}\n"));
            }
        }
        let (mut out, by_number) = parse::read_lines_for_tests("t.md", &text);
        parse::story_phases(&mut out);
        let chain = parse::derive("t.md", &out, &by_number, parse::Rule::Chain).unwrap().deps;
        let pairs = parse::derive("t.md", &out, &by_number, parse::Rule::AllPairs).unwrap().deps;
        let n = out.tasks.len();
        proptest::prop_assert_eq!(closure(&chain, n), closure(&pairs, n), "{}", text);
        let edges = |d: &[Vec<usize>]| d.iter().map(Vec::len).sum::<usize>();
        proptest::prop_assert!(edges(&chain) <= edges(&pairs));
    }
}

#[test]
fn a_phase_without_p_is_a_chain() {
    let mut text = String::from("## Phase 1\n\n");
    for n in 1..=2000 {
        let marker = if n % 5 == 0 { "[P] " } else { "" };
        text.push_str(&format!("- [ ] T{n:04} {marker}Create `f{n}.txt`\n"));
    }
    let p = read(&text);
    let edges: usize = p.deps.iter().map(Vec::len).sum();
    assert!(edges < 2 * 2000, "{edges} edges for 2000 tasks");
    // T0006 waits for T0004 (the last task without [P]) and T0005 ([P], since).
    assert_eq!(deps_of(&p, "T0006"), ids(&["T0004", "T0005"]));
    assert_eq!(deps_of(&p, "T0005"), ids(&[]));
}

#[test]
fn what_plan_validation_refuses_is_named_at_its_line() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("specs/x")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("d")).unwrap();
    std::fs::write(
        root.path().join("specs/x/tasks.md"),
        "- [ ] T001 Create `a.txt`\n- [ ] T002 Write `d/x.txt`\n- [ ] T003 Say \u{1b}[31mhi in `b.txt`\n",
    )
    .unwrap();
    let e = prepare(root.path(), std::path::Path::new("specs/x/tasks.md"), false).unwrap_err();
    let e: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(
        e,
        [
            format!(
                "specs/x/tasks.md:2: task T002 names the file \"d/x.txt\", which goes through d, a symbolic link to {}",
                outside.path().display()
            ),
            "specs/x/tasks.md:3: task T003 contains a control character (U+001B)".to_string(),
        ]
    );
}

/// github/spec-kit#1934's explicit dependencies: ranges and `none` beside single IDs.
#[test]
fn depends_on_reads_ranges_and_none() {
    let text = "## Phase 1: Setup\n\n- [ ] T001 [P] Create `a.txt`\n- [ ] T002 [P] Create `b.txt`\n- [ ] T003 [P] Create `c.txt`\n- [ ] T004 [P] Create `d.txt` (depends on T001-T003)\n- [ ] T005 [P] Create `e.txt` (depends on none)\n- [ ] T006 [P] Create `f.txt` (depends on T002–T003, T005)\n- [ ] T007 [P] Create `g.txt` (depends on: T004..T004)\n";
    let p = parse("t.md", text).unwrap();
    let deps = |id: &str| {
        let i = p.tasks.iter().position(|t| t.id == id).unwrap();
        p.deps[i]
            .iter()
            .map(|&d| p.tasks[d].id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(deps("T004"), ["T001", "T002", "T003"]);
    assert!(deps("T005").is_empty());
    assert_eq!(deps("T006"), ["T002", "T003", "T005"]);
    assert_eq!(deps("T007"), ["T004"]);
    let e = parse(
        "t.md",
        "- [ ] T001 A\n- [ ] T002 B (depends on T009-T001)\n",
    )
    .unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "t.md:2: `depends on` lists the range \"T009-T001\", which goes backwards"
    );
    let e = parse(
        "t.md",
        "- [ ] T001 A\n- [ ] T002 B (depends on T1-T99999)\n",
    )
    .unwrap_err();
    assert!(
        e[0].to_string().contains("spans more than 1000 tasks"),
        "{e:?}"
    );
    let e = parse(
        "t.md",
        "- [ ] T001 A\n- [ ] T005 B (depends on T001-T003)\n",
    )
    .unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "t.md:2: task T005 depends on T002, which is not a task in this file"
    );
}

#[test]
fn a_dependency_written_another_way_is_warned_about() {
    let p = read(
        "- [ ] T001 Create `a.txt`\n- [ ] T002 [P] Create `b.txt` (depend on T001)\n- [ ] T003 [P] Create `c.txt` (depends on T001)\n- [ ] T004 [P] Create `d.txt` (requires T002)\n",
    );
    assert_eq!(
        p.warnings,
        [
            "specs/x/tasks.md:2: task T002 says \"(depend on T001)\", which dagexec does not read as a dependency; write `(depends on T001)` for one",
            "specs/x/tasks.md:4: task T004 says \"(requires T002)\", which dagexec does not read as a dependency; write `(depends on T001)` for one",
        ]
    );
}

/// A phase after an all-`[P]` phase of 3 waits through one join: 3 + 3 edges, not 9; the
/// join comes after every task, named after the phase it joins.
#[test]
fn two_parallel_phases_of_three_meet_at_one_join() {
    let text = "## Phase 1: Setup\n\n- [ ] T001 [P] Create `a.txt`\n- [ ] T002 [P] Create `b.txt`\n- [ ] T003 [P] Create `c.txt`\n\n## Phase 2: Tests\n\n- [ ] T004 [P] Create `d.txt`\n- [ ] T005 [P] Create `e.txt`\n- [ ] T006 [P] Create `f.txt`\n";
    let p = read(text);
    assert_eq!(p.joins, ["Phase 1: Setup done"]);
    assert_eq!(p.deps.len(), 7);
    assert_eq!(p.deps[6], [0, 1, 2]);
    for t in 3..6 {
        assert_eq!(p.deps[t], [6], "{}", p.tasks[t].id);
    }
    let edges: usize = p.deps.iter().map(Vec::len).sum();
    assert_eq!(edges, 6);
    assert_eq!(deps_of(&p, "T005"), ids(&["T001", "T002", "T003"]));
    // The plan: six tasks at their places in the file, then the join, which does no work.
    let plan = build(&p, "specs/x/tasks.md", &[]);
    assert_eq!(plan.tasks.len(), 7);
    assert_eq!(plan.total(), 6);
    assert!(plan.tasks[6].join && plan.tasks[6].metadata.is_none());
    assert_eq!(plan.tasks[6].subject, "Phase 1: Setup done");
    assert!(plan.tasks[..6].iter().all(|t| !t.join));
    assert_eq!(crate::pure::plan::ids::list_ids(&plan).unwrap().len(), 6);
    // Two by two is no saving (4 edges either way): no join.
    let small = read(
        "## Phase 1\n\n- [ ] T001 [P] Create `a.txt`\n- [ ] T002 [P] Create `b.txt`\n\n## Phase 2\n\n- [ ] T003 [P] Create `c.txt`\n- [ ] T004 [P] Create `d.txt`\n",
    );
    assert!(small.joins.is_empty());
    assert_eq!(small.deps[3], [0, 1]);
}

/// The phase after the stories waits for each story's last tasks through one join.
#[test]
fn the_phase_after_the_stories_waits_through_a_join() {
    let text = "## Phase 1: Foundational\n\n- [ ] T001 Create `a.txt`\n\n## Phase 2: User Story 1\n\n- [ ] T002 [P] [US1] Create `b.txt`\n- [ ] T003 [P] [US1] Create `c.txt`\n\n## Phase 3: User Story 2\n\n- [ ] T004 [P] [US2] Create `d.txt`\n\n## Phase 4: Polish\n\n- [ ] T005 [P] Create `e.txt`\n- [ ] T006 [P] Create `f.txt`\n- [ ] T007 [P] Create `g.txt`\n";
    let p = read(text);
    assert_eq!(
        p.joins,
        ["Phase 2: User Story 1, Phase 3: User Story 2 done"]
    );
    let join = p.tasks.len();
    assert_eq!(p.deps[join], [1, 2, 3]);
    for id in ["T005", "T006", "T007"] {
        let i = p.tasks.iter().position(|t| t.id == id).unwrap();
        assert_eq!(p.deps[i], [join], "{id}");
        assert_eq!(deps_of(&p, id), ids(&["T002", "T003", "T004"]));
    }
    // The stories wait for the foundational task directly (1 × 2: no join).
    assert_eq!(deps_of(&p, "T002"), ids(&["T001"]));
    assert_eq!(p.deps[1], [0]);
}

/// A task line whose checkbox holds a mark Spec Kit does not write (`[~]`, `[-]`) is refused
/// at its line like one with no checkbox, never left out without a word.
#[test]
fn a_task_marked_with_a_mark_spec_kit_does_not_write_is_refused_at_its_line() {
    let e = parse(
        "t.md",
        "- [ ] T001 Do a\n- [~] T002 Do b\n- [-] T003 Do c\n",
    )
    .unwrap_err();
    let e: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(
        e,
        [
            "t.md:2: task T002 is marked `[~]`, which is not a Spec Kit mark",
            "t.md:3: task T003 is marked `[-]`, which is not a Spec Kit mark"
        ]
    );
}

/// Spec Kit's template until 2025 ended tasks.md with a `## Dependencies` list written as
/// `- T008 blocks T009, T015` (thousands of public tasks.md keep it): a list item that starts
/// with an ID, no checkbox. It is an edge (T009 and T015 wait for T008), not a task missing
/// its checkbox; an ID there that is no task is an error at its line.
#[test]
fn the_templates_dependencies_list_is_read_as_edges() {
    let text = "# Tasks: Users\n\n## Phase 3.1: Setup\n- [ ] T001 Create project in src/main.py\n\
                - [ ] T002 [P] Configure linting in setup.cfg\n\n## Phase 3.3: Core\n\
                - [ ] T008 [P] User model in src/models/user.py\n\
                - [ ] T009 [P] UserService in src/services/user_service.py\n\
                - [ ] T015 [P] Connect to DB in src/db.py\n\n## Dependencies\n\
                - Tests (T004-T007) before implementation (T008-T014)\n\
                - T008 blocks T009, T015\n- T002 blocks T008 (lint first)\n\n\
                ## Parallel Example\n```\n# Launch T008-T009 together:\n\
                Task: \"User model in src/models/user.py\"\n```\n";
    let p = read(text);
    // [P] in one phase, they would not wait for each other.
    assert_eq!(deps_of(&p, "T009"), ["T008"]);
    assert_eq!(deps_of(&p, "T015"), ["T008"]);
    let said = refused(&text.replace("T009, T015", "T009, T099"));
    assert_eq!(
        said,
        ["t.md:14: the dependency names T099, which is not a task in this file"]
    );
}

/// Generated tasks.md often end with a `## Validation Checklist` (`- [x] All contracts have
/// corresponding tests`) and summaries naming tasks (`- T039: Final validation`): in a section
/// without task lines they are no tasks, said once as a warning; among task lines they are
/// errors as before.
#[test]
fn a_checklist_section_without_task_lines_is_no_task() {
    let text = "## Phase 1: Setup\n- [ ] T001 Create project in src/main.py\n\n\
                ## Summary\n- T001: the project\n- T001-T004: setup\n\n\
                ## Validation Checklist\n*GATE: Checked by main() before returning*\n\n\
                - [x] All contracts have corresponding tests\n- [ ] Each task specifies exact file path\n";
    let p = read(text);
    assert_eq!(p.tasks.len(), 1);
    assert_eq!(
        p.warnings,
        [
            "specs/x/tasks.md:5: \"- T001: the project\" and the like under \"Summary\" are not read as tasks (no task line there)",
            "specs/x/tasks.md:11: \"- [x] All contracts have corresponding tests\" and the like under \"Validation Checklist\" are not read as tasks (no task line there)",
        ]
    );
    // Under a phase's heading, a task without its checkbox is refused as before.
    let e = parse(
        "t.md",
        &format!("{text}\n## Phase 2: Core\n- T002 Do it in src/b.py\n"),
    );
    let said: Vec<String> = e.unwrap_err().iter().map(ToString::to_string).collect();
    assert_eq!(said, ["t.md:15: task T002 has no checkbox"]);
}

/// A task inserted after the list was numbered takes a letter (`T010a`, thousands of public
/// tasks.md have them): it is a task of its own, named so in `depends on` and ticked; `T010`
/// and `T010a` are two tasks, `T010a` and `T010A` one.
#[test]
fn a_letter_after_the_number_is_a_task_of_its_own() {
    let text = "## Phase 1: Setup\n- [ ] T010 Create model in src/a.py\n\
                - [ ] T010a Add checks in src/b.py (depends on T010)\n\
                - [ ] T011 Use them in src/c.py (depends on T010a)\n";
    let p = read(text);
    assert_eq!(p.tasks.len(), 3);
    assert_eq!(deps_of(&p, "T011"), ["T010a"]);
    let done = BTreeSet::from(["T010a".to_string()]);
    let ticked = parse::tick("t.md", text, &done).unwrap();
    assert!(ticked.contains("- [x] T010a Add checks"), "{ticked}");
    let said = refused(&format!("{text}- [ ] T010A Again in src/d.py\n"));
    assert_eq!(
        said,
        ["t.md:5: task ID T010A is used twice (first on line 3)"]
    );
}

/// A range of lettered IDs (`T004a-T004d`, as tasks inserted after the list was numbered are
/// named) is the letters between, in `depends on` and in a stated dependency; one that mixes
/// numbers or goes backwards is refused at its line, saying how to write it.
#[test]
fn a_lettered_range_is_the_letters_between_within_one_number() {
    let text = "## Phase 1: Setup\n- [ ] T004 [P] Create `a.txt`\n\
                - [ ] T004a [P] Create `b.txt`\n- [ ] T004b [P] Create `c.txt`\n\
                - [ ] T004c [P] Create `d.txt`\n- [ ] T004d [P] Create `e.txt`\n\
                - [ ] T005 [P] Create `f.txt` (depends on T004a-T004d)\n\
                - [ ] T006 [P] Create `g.txt`\n\n## Dependencies\n- T006 depends on T004b..T004c\n";
    let p = read(text);
    assert_eq!(deps_of(&p, "T005"), ["T004a", "T004b", "T004c", "T004d"]);
    assert_eq!(deps_of(&p, "T006"), ["T004b", "T004c"]);
    for (range, why) in [
        ("T004a-T005", "mixes lettered IDs and numbers"),
        ("T004b-T005b", "mixes lettered IDs and numbers"),
        ("T004d-T004a", "goes backwards"),
    ] {
        for (from, to) in [
            ("(depends on T004a-T004d)", format!("(depends on {range})")),
            ("depends on T004b..T004c", format!("depends on {range}")),
        ] {
            let e = parse("t.md", &text.replace(from, &to)).unwrap_err();
            let line = if from.starts_with('(') { 7 } else { 11 };
            assert_eq!(
                e[0].to_string(),
                format!("t.md:{line}: `depends on` lists the range {range:?}, which {why}"),
            );
            assert!(e[0].hint.contains("T004a-T004d"), "{:?}", e[0].hint);
        }
    }
}

/// Generated tasks.md often write task IDs in bold: task lines (`- [ ] **T012** [P] …`) and
/// stated dependencies (`- **T012** depends on **T010**`) are read as their plain forms; any
/// other line that orders tasks in words dagexec does not read (a dependencies section's
/// prose, a task's `Depends on T010` outside `(depends on …)`, the rest of a stated line
/// after a `;`) is named in a warning, never dropped without a word.
#[test]
fn bold_ids_are_read_and_an_order_in_prose_is_named() {
    let text = "## Phase 1: Setup\n- [ ] **T010** [P] Create `a.txt`\n\
                - [ ] **T011** [P] Create `b.txt`\n- [ ] T012 [P] Create `c.txt`\n\
                - [ ] T013 [P] Create `d.txt`. **Depends on T010**.\n\
                - [ ] T014 [P] Create `e.txt`\n\n## Dependencies\n\
                - **T012** depends on **T010**, **T011**\n\
                **T014** needs **T012**\n- Tests (T010-T011) before the rest\n\
                - T014 blocks T013; T012 depends on T013\n\
                - **Setup (Phase 1)**: No dependencies\n- T010 [P] and T011 [P] can run in parallel\n";
    let p = read(text);
    assert_eq!(p.tasks.len(), 5);
    assert!(task(&p, "T011").parallel);
    assert_eq!(deps_of(&p, "T012"), ["T010", "T011"]);
    assert_eq!(deps_of(&p, "T013"), ["T014"]);
    // What each line says is named as it is read, what a task's own text says after.
    let unread = unread(&p);
    assert_eq!(
        unread,
        [
            "specs/x/tasks.md:10: \"**T014** needs **T012**\" orders tasks in words dagexec does not read; write each as `- T012 depends on T010` or as `(depends on T010)` in T012's line",
            "specs/x/tasks.md:11: \"- Tests (T010-T011) before the rest\" orders tasks in words dagexec does not read; write each as `- T012 depends on T010` or as `(depends on T010)` in T012's line",
            "specs/x/tasks.md:12: \"T012 depends on T013\" orders tasks in words dagexec does not read; write each as `- T012 depends on T010` or as `(depends on T010)` in T012's line",
            "specs/x/tasks.md:5: task T013 says \"Depends on T010\", which dagexec does not read as a dependency; write `(depends on T001)` for one",
        ]
    );
}

/// Real tasks.md files, excerpted in `tests/fixtures/speckit/public/` (its README names each
/// one's repository).
fn public(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/speckit/public/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The template's `## Dependencies & Execution Order` has a `### Phase Dependencies`
/// subsection, and its `### Parallel Opportunities` that follows names tasks in list items
/// (`- T002, T003, T004 可并行`). That heading names no phase of tasks: those lines are a
/// summary, not tasks missing their checkbox.
#[test]
fn the_templates_phase_dependencies_heading_is_no_phase() {
    let p = read(&public("phase-dependencies.md"));
    assert_eq!(p.tasks.len(), 4);
    assert_eq!(p.phases.len(), 1);
    assert_eq!(
        p.warnings
            .iter()
            .filter(|w| w.contains("not read as tasks"))
            .collect::<Vec<_>>(),
        [
            "specs/x/tasks.md:20: \"- T002, T003, T004 可并行\" and the like under \"Dependencies & Execution Order\" are not read as tasks (no task line there)"
        ]
    );
}

/// `- [x] T101: serve コマンドの契約テスト作成` — a colon after the ID, as many generated
/// lists write it: the task T101, its description after the colon.
#[test]
fn a_colon_after_the_id_is_read_as_the_ids_end() {
    let p = read(&public("colon-after-id.md"));
    let read: Vec<(&str, bool)> = p.tasks.iter().map(|t| (t.id.as_str(), t.done)).collect();
    assert_eq!(
        read,
        [
            ("T101", true),
            ("T102", true),
            ("T103", true),
            ("T104", true),
            ("T105", true),
            ("T106", true),
            ("T107", true)
        ]
    );
    assert_eq!(
        task(&p, "T104").text,
        "serve コマンド実装（main.cppでrun_node呼び出し）"
    );
    assert_eq!(deps_of(&p, "T107"), ["T106"]);
}

/// `- [X] ~~T016 [P] Create AuthSession schema in …~~ - REMOVED (JWT sessions used instead)`:
/// a task struck through is withdrawn. It is no task (never run, never ticked, its file no
/// task's), said as a warning at its line; the tasks around it keep their order.
#[test]
fn a_struck_through_task_is_withdrawn() {
    let text = public("struck-through.md");
    let p = read(&text);
    let kept: Vec<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(kept, ["T013", "T014", "T015", "T017", "T018", "T019"]);
    assert_eq!(deps_of(&p, "T018"), ["T014", "T015", "T017"]);
    assert_eq!(
        p.warnings
            .iter()
            .filter(|w| w.contains("struck"))
            .collect::<Vec<_>>(),
        ["specs/x/tasks.md:6: task T016 is struck through: withdrawn, not read as a task"]
    );
    // Struck-through text that names no task (a checklist item withdrawn) is not said.
    let p = read(&format!(
        "{text}- [x] ~~`supported_models.json` の定義~~ **廃止予定**\n"
    ));
    assert_eq!(p.tasks.len(), 6);
    assert_eq!(
        p.warnings.iter().filter(|w| w.contains("struck")).count(),
        1
    );
}

/// `T017 [US2] Explain configuration hierarchy (.aikit/config.toml → ~/.aikit/config.toml →
/// defaults)`: a path in the home directory (or from the file system's root) is a place on
/// the machine the text talks about, no file of the repository; it is no file of the task,
/// and no reason to refuse the list (`..`, `.git/` and the plan itself still are).
#[test]
fn a_path_outside_the_repository_in_a_tasks_text_is_no_file_of_it() {
    let p = read(&public("home-path.md"));
    assert_eq!(p.tasks.len(), 4);
    let t = task(&p, "T017");
    assert_eq!(
        (t.create.clone(), t.modify.clone()),
        (vec![], ids(&[".aikit/config.toml"]))
    );
    let text = "- [ ] T001 Read /etc/hosts and write `/etc/dagexec.conf` in src/conf.py\n";
    assert_eq!(read(text).tasks[0].modify, ["src/conf.py"]);
}

/// `- [x] [P] T030 Unit Test: …`: the markers written before the ID, as many lists write them
/// (and `- [ ] [P] T005 [P] Setup …` both sides): the task T030, `[P]`.
#[test]
fn markers_before_the_id_are_the_tasks_markers() {
    let p = read(&public("marker-before-id.md"));
    let marked: Vec<(&str, bool)> = p
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), t.parallel))
        .collect();
    assert_eq!(
        marked,
        [
            ("T026", false),
            ("T027", false),
            ("T028", false),
            ("T029", false),
            ("T030", true),
            ("T031", true)
        ]
    );
    assert_eq!(
        task(&p, "T031").text,
        "Unit Test: 未対応アーキテクチャのエラー応答"
    );
    let both = read("- [ ] [P] T005 [P] [US1] Setup `data/raw/x.csv`\n");
    let t = &both.tasks[0];
    assert_eq!(
        (t.parallel, t.stories.as_slice(), t.text.as_str()),
        (
            true,
            ["US1".to_string()].as_slice(),
            "Setup `data/raw/x.csv`"
        )
    );
}

/// `- [x] T231.1 [P] [US8] Create HistoricalStatisticsDto …`: tasks inserted after T231 and
/// numbered with a dot, as `T231a` would be: each a task of its own, named so in `depends on`
/// (one by one or as a range `T231.1-T231.3`).
#[test]
fn a_number_after_a_dot_is_a_task_of_its_own() {
    let text = public("dotted-ids.md");
    let p = read(&text);
    let ids_read: Vec<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids_read,
        [
            "T233", "T234", "T235", "T231.1", "T231.2", "T231.3", "T231.4", "T231.5", "T231.6",
            "T231.7"
        ]
    );
    assert_eq!(deps_of(&p, "T231.3"), ["T235", "T231.1", "T231.2"]);
    let more = format!(
        "{text}- [ ] T236 Chart legend in `src/legend.ts` (depends on T231.1-T231.3, T231.7)\n"
    );
    let p = read(&more);
    assert_eq!(
        deps_of(&p, "T236"),
        ["T231.1", "T231.2", "T231.3", "T231.6", "T231.7"]
    );
}

/// `- [x] T007.3 技術制約テスト追加` with `  - [x] SupportsSafetensorsAndGgufFormats` nested under
/// it: a checkbox without an ID indented under a task is that task's own checklist, no task
/// missing its ID (one at a task line's own depth still is).
#[test]
fn a_checklist_nested_under_a_task_is_part_of_it() {
    let text = public("nested-checklist.md");
    let p = read(&text);
    let ids_read: Vec<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids_read, ["T007", "T007.1", "T007.3", "T007.4"]);
    assert_eq!(deps_of(&p, "T007.4"), ["T007.3"]);
    let open = text.replace("- [x]", "- [ ]");
    let ticked = parse::tick("t.md", &open, &done(&["T007.3"])).unwrap();
    assert_eq!(ticked, open.replacen("- [ ] T007.3", "- [x] T007.3", 1));
    let said = refused(&format!("{text}- [ ] Not nested\n"));
    assert_eq!(
        said,
        ["t.md:14: the checkbox line \"Not nested\" has no task ID"]
    );
}

/// `(Depends on T003, T004, T008.)`: a list that ends its sentence inside the parentheses. The
/// full stop ends the last ID; the list was refused (`"T008." is not a task ID`).
#[test]
fn a_full_stop_after_the_last_depends_on_id_ends_it() {
    let p = read(&public("markdown-links.md"));
    assert_eq!(p.tasks.len(), 11);
    assert_eq!(
        task(&p, "T009").depends_on,
        ["T003", "T004", "T008"].map(String::from)
    );
    assert_eq!(task(&p, "T012").depends_on, ["T009"].map(String::from));
}

/// `Create [packages/web/…/ClockAdjuster.tsx](../../packages/web/…/ClockAdjuster.tsx)` in
/// story one and `Extend [packages/web/…/ClockAdjuster.tsx](…)` in story two: a file named as
/// a Markdown link is the task's file, so two stories that change it are kept apart. A link's
/// target starting with `./` or `../` is relative to the tasks.md's folder (as GitHub renders
/// it), one starting with `/` to the repository root, any other to the root as every path in
/// a task's text is; a link to the feature's own design documents names its context (every
/// task has it), not its work; a web address is no file (its text is read as text).
#[test]
fn a_file_named_as_a_markdown_link_is_the_tasks() {
    let p = read(&public("markdown-links.md"));
    let files = |id: &str| {
        let t = task(&p, id);
        (t.create.clone(), t.modify.clone())
    };
    let adjuster = "packages/web/src/components/game/ClockAdjuster.tsx";
    assert_eq!(files("T009"), (ids(&[adjuster]), vec![]));
    assert_eq!(files("T012"), (vec![], ids(&[adjuster])));
    assert_eq!(
        files("T002"),
        (ids(&["packages/web/src/lib/store.test.ts"]), vec![])
    );
    assert!(!p.warnings.iter().any(|w| w.contains("names no file")));
    let p = read(concat!(
        "- [ ] T001 Update [`src/x.ts`](src/x.ts) and [the y](/src/y.ts#L3 \"y\")\n",
        "- [ ] T002 Note in [notes](./notes.md), see [spec.md](spec.md), [z](https://h/z.ts)\n",
        "- [ ] T003 Document [docs/](../../docs/) in [`contracts/api.md`](contracts/api.md)\n",
    ));
    assert_eq!(p.tasks[0].modify, ["src/x.ts", "src/y.ts"]);
    assert_eq!(p.tasks[1].modify, ["specs/x/notes.md"]);
    assert!(p.tasks[2].modify.is_empty());
    let e = parse(
        "specs/x/tasks.md",
        "- [ ] T001 Edit [c](../../../c.ts) and [g](../../.git/config)\n",
    )
    .unwrap_err();
    let said: Vec<String> = e.iter().map(|p| p.message.clone()).collect();
    assert_eq!(
        said,
        [
            "specs/x/tasks.md:1: task T001 names the file \"../../../c.ts\", which must not contain `..`",
            "specs/x/tasks.md:1: task T001 names the file \".git/config\", which points into .git/"
        ]
    );
}

/// `- [x] T006 [US1] [US2] [US3] Define domain_name variable …` in every task of the
/// foundational phase: a task that serves several stories is work they share, not one
/// story's. Its phase is no story phase (read as one, the stories after it waited only for
/// setup and ran beside the foundation they build on), and its prompt names every story (it
/// named the last one only).
#[test]
fn a_task_of_several_stories_is_shared_work_and_names_them_all() {
    let p = read(&public("several-stories.md"));
    let stories: Vec<bool> = p.phases.iter().map(|ph| ph.story).collect();
    assert_eq!(stories, [false, false, true, true, true]);
    for first in ["T022", "T043", "T049"] {
        assert_eq!(deps_of(&p, first), ["T008"], "{first}");
    }
    let plan = build(&p, "specs/x/tasks.md", &[]);
    let said = |i: usize| plan.tasks[i].description.clone().unwrap_or_default();
    assert!(
        said(2).contains("(user stories US1, US2, US3)"),
        "{}",
        said(2)
    );
    assert!(said(5).contains("(user story US1)\n"), "{}", said(5));
}

/// Lines of real lists that name tasks and a word or arrow of order but order none: the
/// format note `- **TaskID**: Sequential number (T001, T002...)` (IDs as an example of their
/// form) and the strategy's estimates `7. Phase 5: US3 Testing (T027-T030) → ~30 min`, `1.
/// Complete Setup + Foundational (T001-T025) → ~55 minutes → Foundation ready` (an arrow
/// with no task after it). They are not said; an arrow between two tasks still is.
#[test]
fn format_notes_and_estimates_are_no_order_in_words() {
    let text = "- [ ] T001 Create `a.txt`\n\n## Notes\n\
                - **TaskID**: Sequential number (T001, T002...)\n\
                2. **Task ID**: Sequential number (T001, T002...) in execution order\n\
                7. Phase 5: US3 Testing (T027-T030) → ~30 min\n\
                1. Complete Setup + Foundational (T001-T025) → ~55 minutes → Foundation ready\n\
                - US2: T011 (single test file) → T012 (single impl file).\n";
    let p = read(text);
    let unread = unread(&p);
    assert_eq!(
        unread,
        [
            "specs/x/tasks.md:8: \"- US2: T011 (single test file) → T012 (single impl file).\" orders tasks in words dagexec does not read; write each as `- T012 depends on T010` or as `(depends on T010)` in T012's line"
        ]
    );
}
