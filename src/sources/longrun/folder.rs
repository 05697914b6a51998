//! A folder of numbered `NN-PLAN.md` files as a dagexec plan: one task per PLAN.md, its
//! dependencies from the file's front matter (`depends_on: ["01"]`), else the previous plan
//! in number order; the task's prompt is the seed's executor prompt. Pure: the caller reads
//! the files.

use serde::Deserialize;
use serde_json::json;

use super::LongRunError;
use super::prompt::{PromptInput, executor_prompt};
use crate::pure::plan::model::{Files, Metadata, Plan, Status, Task};

pub use crate::pure::plan::fields::LONG_RUN as LONG_RUN_FIELD;

/// One `NN-PLAN.md`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFile {
    /// The number as written in the file name (`01`).
    pub number: String,
    /// Repository-relative path.
    pub path: String,
    pub content: String,
    /// Whether `summaries/NN-SUMMARY.md` says the plan is completed.
    pub completed: bool,
    /// Whether it says the plan was skipped (the user deferred its decision).
    pub deferred: bool,
}

/// The PLAN.md front matter keys dagexec reads (others are ignored).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FrontMatter {
    /// Plan numbers this plan needs first; absent: the previous plan; `[]`: none.
    pub depends_on: Option<Vec<serde_yaml::Value>>,
    pub title: Option<String>,
}

/// Where the long-run state lives, repository-relative (the seed's `state_path` and
/// `spec_path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The long-run folder (`state_path`).
    pub state: String,
    /// The folder holding spec.md (`spec_path`).
    pub spec: String,
}

impl Paths {
    /// `STATE/plans/NN-CHECKPOINT.json`, written by the worker.
    pub fn checkpoint(&self, number: &str) -> String {
        format!("{}/plans/{number}-CHECKPOINT.json", self.state)
    }
    /// `STATE/summaries/NN-SUMMARY.md`, written by dagexec on COMPLETED.
    pub fn summary(&self, number: &str) -> String {
        format!("{}/summaries/{number}-SUMMARY.md", self.state)
    }
    /// `STATE/ISSUES.md`, the worker's issue log.
    pub fn issues(&self) -> String {
        format!("{}/ISSUES.md", self.state)
    }
    /// `SPEC/tasks.md`, where the worker marks tasks complete.
    pub fn tasks_md(&self) -> String {
        format!("{}/tasks.md", self.spec)
    }
}

/// The number of an `NN-PLAN.md` file name.
pub fn plan_number(file_name: &str) -> Option<&str> {
    let n = file_name.strip_suffix("-PLAN.md")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(n)
}

/// Splits `---\n<yaml>\n---\n` off the top of a file (after a BOM; CRLF line ends too) and
/// reads the YAML as `T` (its default when there is none).
pub fn front_matter<T: serde::de::DeserializeOwned + Default>(
    path: &str,
    text: &str,
) -> Result<(T, String), LongRunError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((T::default(), text.to_string()));
    };
    let end = rest
        .match_indices("\n---")
        .map(|(i, _)| i)
        // A line `---`, spaces after it allowed.
        .find(|&i| rest[i + 4..].split('\n').next().is_some_and(|l| l.trim().is_empty()))
        .ok_or_else(|| LongRunError::FrontMatter {
            path: path.into(),
            message: "the front matter opened with --- has no closing --- line".into(),
        })?;
    let yaml = &rest[..end];
    let fm = if yaml.trim().is_empty() {
        T::default()
    } else {
        serde_yaml::from_str(yaml).map_err(|e| LongRunError::FrontMatter {
            path: path.into(),
            message: e.to_string(),
        })?
    };
    let after = rest[end + 4..].split_once('\n').map_or("", |(_, b)| b);
    let body = after.trim_start_matches(['\r', '\n']).to_string();
    Ok((fm, body))
}

/// The `status` of a summary's front matter.
fn summary_status(text: &str) -> Option<String> {
    #[derive(Deserialize, Default)]
    struct S {
        status: Option<String>,
    }
    let (s, _) = front_matter::<S>("", text).ok()?;
    s.status.map(|s| s.trim().to_ascii_lowercase())
}

/// Whether a summary's front matter says `status: completed`.
pub fn summary_completed(text: &str) -> bool {
    summary_status(text).as_deref() == Some("completed")
}

/// Whether a summary's front matter says `status: skipped` (a deferred plan).
pub fn summary_skipped(text: &str) -> bool {
    summary_status(text).as_deref() == Some("skipped")
}

fn same_number(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The task of plan file `i`: its blockers, title, prompt and long-run record.
fn task_of(
    files: &[PlanFile],
    i: usize,
    paths: &Paths,
    spec: &str,
    requirements: &str,
) -> Result<Task, LongRunError> {
    let f = &files[i];
    let (fm, body): (FrontMatter, _) = front_matter(&f.path, &f.content)?;
    let blocked_by = match &fm.depends_on {
        // The previous plan in number order; a deferred one does not hold the next back
        // (the seed continues to the next plan).
        None => (0..i)
            .rev()
            .find(|&p| !files[p].deferred)
            .into_iter()
            .collect(),
        Some(deps) => listed_blockers(files, i, deps)?,
    };
    let title = fm
        .title
        .clone()
        .or_else(|| {
            body.lines()
                .find_map(|l| l.strip_prefix("# "))
                .map(|t| t.trim().to_string())
        })
        .unwrap_or_else(|| format!("Plan {}", f.number));
    let checkpoint = paths.checkpoint(&f.number);
    let summary = paths.summary(&f.number);
    let prompt = executor_prompt(&PromptInput {
        plan_content: &f.content,
        plan_number: &f.number,
        spec_content: spec,
        requirements,
        tasks_md_path: &paths.tasks_md(),
        checkpoint_path: &checkpoint,
        issues_path: &paths.issues(),
    });
    let mut task = Task {
        subject: title.clone(),
        description: Some(format!("Execute {} (plan {}).", f.path, f.number)),
        status: if f.completed {
            Status::Completed
        } else if f.deferred {
            Status::Skipped
        } else {
            Status::Pending
        },
        blocked_by,
        metadata: Some(Metadata {
            kind: Some("long-run".into()),
            files: Files {
                create: vec![summary.clone()],
                ..Default::default()
            },
            ..Default::default()
        }),
        prompt: (!f.completed).then_some(prompt),
        ..Default::default()
    };
    if f.completed {
        task.result = Some(format!("completed earlier (see {summary})"));
    } else {
        if f.deferred {
            task.result = Some(format!("deferred by the user (see {summary})"));
        }
        task.extra.insert(
            LONG_RUN_FIELD.into(),
            json!({
                "number": f.number,
                "title": title,
                "plan": f.path,
                "checkpoint": checkpoint,
                "summary": summary,
                "logs": format!("{}/logs", paths.state),
            }),
        );
    }
    Ok(task)
}

/// The plans a `depends_on` list names, by number; an unknown one or the plan itself is an
/// error.
fn listed_blockers(
    files: &[PlanFile],
    i: usize,
    deps: &[serde_yaml::Value],
) -> Result<Vec<usize>, LongRunError> {
    let f = &files[i];
    let mut out = Vec::new();
    for d in deps {
        let want = match d {
            serde_yaml::Value::String(s) => s.trim().to_string(),
            serde_yaml::Value::Number(n) => n.to_string(),
            other => format!("{other:?}"),
        };
        let at = files
            .iter()
            .position(|g| same_number(&g.number, &want))
            .ok_or_else(|| LongRunError::UnknownDependency {
                path: f.path.clone(),
                dep: want.clone(),
                known: files
                    .iter()
                    .map(|g| g.number.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if at == i {
            return Err(LongRunError::SelfDependency {
                path: f.path.clone(),
                number: f.number.clone(),
            });
        }
        out.push(at);
    }
    Ok(out)
}

/// Builds the plan: tasks in number order (files must come sorted).
pub fn build(
    files: &[PlanFile],
    paths: &Paths,
    spec: &str,
    requirements: &str,
) -> Result<Plan, LongRunError> {
    let mut tasks = Vec::with_capacity(files.len());
    for i in 0..files.len() {
        tasks.push(task_of(files, i, paths, spec, requirements)?);
    }
    let mut plan = Plan::new(
        format!("Execute the long-run plans in {}", paths.state),
        tasks,
    );
    if let Err(cycle) = crate::pure::graph::Dag::build(&plan) {
        return Err(LongRunError::Cycle {
            cycle: cycle.iter().map(|&i| files[i].path.clone()).collect(),
        });
    }
    plan.extra.insert(
        LONG_RUN_FIELD.into(),
        json!({"state": paths.state, "spec": paths.spec}),
    );
    crate::sources::list_completed(&mut plan);
    Ok(plan)
}

/// Carries the state of an existing plan over to a freshly built one (same plans, same
/// order): completed tasks stay as they were; the others get the fresh prompt and keep
/// status, result, attempts and every extra field (reviews, question).
pub fn carry_over(fresh: &mut Plan, old: &Plan) -> Result<(), LongRunError> {
    // A task's identity is its summary file: the one field trimming keeps.
    let numbers = |p: &Plan| -> Vec<String> {
        p.tasks
            .iter()
            .map(|t| t.creates().first().cloned().unwrap_or_default())
            .collect()
    };
    if numbers(fresh) != numbers(old) {
        return Err(LongRunError::Changed);
    }
    for (new, old) in fresh.tasks.iter_mut().zip(&old.tasks) {
        if old.status == Status::Completed {
            *new = old.clone();
            continue;
        }
        if new.status == Status::Completed {
            // A summary marked it completed since: keep the fresh one.
            continue;
        }
        // Deferred (its summary says skipped): skipped whatever the old plan said.
        if new.status != Status::Skipped {
            new.status = old.status;
            new.result = old.result.clone();
            new.attempts = old.attempts;
        }
        for (k, v) in &old.extra {
            if k != LONG_RUN_FIELD {
                new.extra.insert(k.clone(), v.clone());
            }
        }
    }
    fresh.progress = old.progress.clone();
    Ok(())
}

/// Plans still to run that name a deferred (skipped) plan in `depends_on`, directly or
/// through another such plan, are skipped, saying which plan was deferred.
pub fn skip_after_deferred(plan: &mut Plan) {
    loop {
        let mut changed = false;
        for i in 0..plan.tasks.len() {
            if plan.tasks[i].status != Status::Pending {
                continue;
            }
            let dep = plan.tasks[i].blocked_by.iter().copied().find(|&d| {
                plan.tasks
                    .get(d)
                    .is_some_and(|t| t.status == Status::Skipped)
            });
            if let Some(d) = dep {
                let why = if crate::pure::question::deferred(&plan.tasks[d])
                    || plan.tasks[d]
                        .result
                        .as_deref()
                        .is_some_and(|r| r.starts_with("deferred"))
                {
                    "was deferred by the user".to_string()
                } else {
                    "was skipped".to_string()
                };
                let result = format!(
                    "Skipped: dependency task {d} ({}) {why}",
                    plan.tasks[d].subject
                );
                let t = &mut plan.tasks[i];
                t.status = Status::Skipped;
                t.result = Some(result);
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(number: &str, content: &str) -> PlanFile {
        PlanFile {
            number: number.into(),
            path: format!(".long-run/plans/{number}-PLAN.md"),
            content: content.into(),
            completed: false,
            deferred: false,
        }
    }

    fn paths() -> Paths {
        Paths {
            state: ".long-run".into(),
            spec: ".long-run/spec".into(),
        }
    }

    #[test]
    fn a_deferred_plan_holds_back_only_the_plans_that_name_it() {
        let mut files = vec![
            file("01", "# A\n"),
            file("02", "# B\n"),
            file("03", "---\ndepends_on: [\"01\"]\n---\n# C\n"),
            file("04", "---\ndepends_on: [\"03\"]\n---\n# D\n"),
        ];
        files[0].deferred = true;
        let mut plan = build(&files, &paths(), "", "").unwrap();
        assert_eq!(plan.tasks[0].status, Status::Skipped);
        assert!(
            plan.tasks[1].blocked_by.is_empty(),
            "02 follows no deferred plan"
        );
        skip_after_deferred(&mut plan);
        assert_eq!(plan.tasks[1].status, Status::Pending);
        assert_eq!(plan.tasks[2].status, Status::Skipped);
        assert_eq!(
            plan.tasks[2].result.as_deref(),
            Some("Skipped: dependency task 0 (A) was deferred by the user")
        );
        assert_eq!(plan.tasks[3].status, Status::Skipped, "transitively");
        assert_eq!(
            plan.tasks[3].result.as_deref(),
            Some("Skipped: dependency task 2 (C) was skipped")
        );
    }

    #[test]
    fn a_cycle_or_self_dependency_names_the_plan_files() {
        let files = vec![
            file("01", "---\ndepends_on: [\"02\"]\n---\n"),
            file("02", ""),
        ];
        let e = build(&files, &paths(), "", "").unwrap_err().to_string();
        assert_eq!(
            e,
            ".long-run/plans/01-PLAN.md: depends_on makes a cycle: .long-run/plans/01-PLAN.md → .long-run/plans/02-PLAN.md → .long-run/plans/01-PLAN.md"
        );
        let files = vec![file("01", "---\ndepends_on: [1]\n---\n")];
        let e = build(&files, &paths(), "", "").unwrap_err().to_string();
        assert_eq!(
            e,
            ".long-run/plans/01-PLAN.md: depends_on names the plan itself (01)"
        );
    }

    #[test]
    fn dependencies_from_front_matter_else_number_order() {
        let files = vec![
            file("01", "# Models\n"),
            file("02", "# Routes\n"),
            file(
                "03",
                "---\ndepends_on: [\"01\"]\ntitle: Docs\n---\n# ignored\n",
            ),
            file("04", "---\ndepends_on: []\n---\n"),
            file("05", "---\ndepends_on: [2, \"3\"]\n---\n"),
        ];
        let plan = build(&files, &paths(), "spec", "").unwrap();
        let deps: Vec<Vec<usize>> = plan.tasks.iter().map(|t| t.blocked_by.clone()).collect();
        assert_eq!(deps, vec![vec![], vec![0], vec![0], vec![], vec![1, 2]]);
        let subjects: Vec<&str> = plan.tasks.iter().map(|t| t.subject.as_str()).collect();
        assert_eq!(
            subjects,
            vec!["Models", "Routes", "Docs", "Plan 04", "Plan 05"]
        );
        assert_eq!(
            plan.tasks[1].creates(),
            [".long-run/summaries/02-SUMMARY.md".to_string()]
        );
        assert!(
            plan.tasks[0]
                .prompt
                .as_deref()
                .unwrap()
                .contains("# Models")
        );
        assert!(crate::pure::validate::check(&plan, Some(".long-run/plan.json")).is_ok());
    }

    #[test]
    fn bad_front_matter_names_the_file() {
        let e = build(
            &[file("01", "---\ndepends_on: [\"09\"]\n---\n")],
            &paths(),
            "",
            "",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            ".long-run/plans/01-PLAN.md: depends_on names plan \"09\", which is not in the folder (plans: 01)"
        );
        let e = build(&[file("01", "---\ndepends_on: [\n---\n")], &paths(), "", "").unwrap_err();
        assert!(
            e.to_string()
                .starts_with(".long-run/plans/01-PLAN.md: front matter: "),
            "{e}"
        );
        let e = build(&[file("01", "---\ntitle: x\n")], &paths(), "", "").unwrap_err();
        assert!(e.to_string().contains("no closing ---"), "{e}");
    }

    #[test]
    fn summaries_and_numbers() {
        assert_eq!(plan_number("07-PLAN.md"), Some("07"));
        assert_eq!(plan_number("x7-PLAN.md"), None);
        assert_eq!(plan_number("07-plan.md"), None);
        assert!(summary_completed(
            "---\nplan: \"01\"\nstatus: completed\n---\n# x"
        ));
        assert!(!summary_completed("---\nstatus: failed\n---\n"));
        assert!(!summary_completed("status: completed"));
        let mut done = file("01", "# A\n");
        done.completed = true;
        let plan = build(&[done, file("02", "# B\n")], &paths(), "", "").unwrap();
        assert_eq!(plan.tasks[0].status, Status::Completed);
        assert_eq!(plan.progress.completed_tasks.len(), 1);
        assert!(!plan.tasks[0].extra.contains_key(LONG_RUN_FIELD));
    }

    #[test]
    fn a_checkout_with_crlf_line_ends_or_a_bom_reads_the_same() {
        // git's core.autocrlf checks the summaries dagexec wrote out with CRLF line ends.
        assert!(summary_completed(
            "---\r\nplan: \"01\"\r\nstatus: completed\r\n---\r\n# x\r\n"
        ));
        assert!(summary_skipped("---\r\nstatus: skipped\r\n---\r\n"));
        assert!(summary_completed("\u{feff}---\nstatus: completed\n---\n"));
        assert!(summary_completed("---\nstatus: completed\n--- \r\n# x"));
        // An editor's BOM before the front matter: its depends_on still orders the plans.
        let files = vec![
            file("01", "# A\n"),
            file("02", "# B\n"),
            file(
                "03",
                "\u{feff}---\r\ndepends_on: []\r\ntitle: C\r\n---\r\n# ignored\r\n",
            ),
        ];
        let plan = build(&files, &paths(), "", "").unwrap();
        assert_eq!(plan.tasks[2].blocked_by, Vec::<usize>::new());
        assert_eq!(plan.tasks[2].subject, "C");
    }

    #[test]
    fn state_carries_over_and_a_changed_folder_is_refused() {
        let files = vec![file("01", "# A\n"), file("02", "# B\n")];
        let mut old = build(&files, &paths(), "old spec", "").unwrap();
        old.tasks[0].status = Status::Completed;
        old.tasks[1].status = Status::Blocked;
        old.tasks[1]
            .extra
            .insert("question".into(), json!({"kind": "action"}));
        crate::pure::update::trim(&mut old.tasks[0]);
        let mut fresh = build(&files, &paths(), "new spec", "").unwrap();
        carry_over(&mut fresh, &old).unwrap();
        assert_eq!(fresh.tasks[0], old.tasks[0]);
        assert_eq!(fresh.tasks[1].status, Status::Blocked);
        assert!(fresh.tasks[1].extra.contains_key("question"));
        assert!(
            fresh.tasks[1]
                .prompt
                .as_deref()
                .unwrap()
                .contains("new spec")
        );
        let mut more = build(&[file("01", "# A\n")], &paths(), "", "").unwrap();
        assert!(matches!(
            carry_over(&mut more, &old),
            Err(LongRunError::Changed)
        ));
    }
}
