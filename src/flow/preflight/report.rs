//! The human form of the setup output (seed Step 2): the three report lines, then what needs
//! attention — resume, a dirty tree, failed checks, missing context files, overlaps.

use std::io::{self, Write};

use super::{Overlaps, SetupOutput, Validation};
use crate::pure::plan::model::{Plan, Status};

/// Lists longer than this are cut with a count of the rest.
const SHOWN: usize = 12;

fn list(items: &[String]) -> String {
    counted(items, items.len())
}

/// The first items of a list of `total`, with a count of the rest.
fn counted(items: &[String], total: usize) -> String {
    let mut s = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if total > SHOWN {
        s.push_str(&format!(", … (+{} more)", total - SHOWN));
    }
    s
}

/// Writes the report.
pub fn write(
    out: &mut impl Write,
    plan: &Plan,
    setup: &SetupOutput,
    overlaps: &Overlaps,
) -> io::Result<()> {
    writeln!(out, "{}", header(setup))?;
    if setup.is_resume {
        writeln!(out, "Resuming execution.")?;
        if plan.count(Status::Pending) + plan.count(Status::InProgress) == 0 {
            writeln!(out, "All tasks are already resolved — nothing to do.")?;
        }
    }
    problems(out, &setup.validation)?;
    writeln!(out)?;
    writeln!(out, "Depth summary:")?;
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for (d, tasks) in &setup.depth_summary {
        let tasks: Vec<String> = tasks.iter().map(|&i| names.get(i)).collect();
        writeln!(out, "  depth {d}: {}", list(&tasks))?;
    }
    overlap_lines(out, setup, overlaps, &names)
}

/// What stands in the way: the work tree's changes, failed blocking checks, missing context
/// files.
/// The report's first lines, which `dagexec run` says too: the goal, the tasks and their
/// depth, the blocking checks.
pub fn header(setup: &SetupOutput) -> String {
    let v = &setup.validation;
    let checks = if v.checks_skipped {
        "blocking checks skipped (--no-checks)".to_string()
    } else {
        let passed = v.blocking_checks.iter().filter(|c| c.passed).count();
        format!(
            "{passed}/{} blocking checks passed",
            v.blocking_checks.len()
        )
    };
    format!(
        "Executing: {}\nTasks: {} (max dependency depth: {})\nValidation: {checks}",
        setup.goal, setup.task_count, setup.max_depth
    )
}

fn problems(out: &mut impl Write, v: &Validation) -> io::Result<()> {
    if !v.git_clean {
        writeln!(out)?;
        writeln!(
            out,
            "Warning: the working tree is not clean (git status --porcelain):"
        )?;
        for line in v.git_status.lines().take(SHOWN) {
            writeln!(out, "  {line}")?;
        }
        let more = v.git_status.lines().count().saturating_sub(SHOWN);
        if more > 0 {
            writeln!(out, "  … (+{more} more)")?;
        }
    }
    let failed: Vec<_> = v.blocking_checks.iter().filter(|c| !c.passed).collect();
    if !failed.is_empty() {
        writeln!(out)?;
        writeln!(out, "Failed blocking checks:")?;
        for c in failed {
            writeln!(out, "  ✗ task {}: {} — `{}`", c.task, c.claim, c.verify)?;
            for line in c.output.lines().take(3) {
                writeln!(out, "      {line}")?;
            }
        }
        writeln!(
            out,
            "  Fix them, or proceed anyway when running (dagexec run asks; --yes proceeds)."
        )?;
    }
    if !v.missing_context_files.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Missing context files: {}",
            list(&v.missing_context_files)
        )?;
    }
    Ok(())
}

/// The overlaps between tasks, and those a v3 plan's `fileOverlaps` miss.
fn overlap_lines(
    out: &mut impl Write,
    setup: &SetupOutput,
    overlaps: &Overlaps,
    names: &crate::pure::plan::ids::TaskNames,
) -> io::Result<()> {
    // The matrix is read row by row: only the first pairs are kept, the rest counted.
    let mut pairs: Vec<String> = Vec::new();
    let mut total = 0;
    setup
        .file_overlap_matrix
        .for_each_row(|i, row| {
            for &j in row.iter().filter(|&&j| j as usize > i) {
                total += 1;
                if pairs.len() < SHOWN {
                    pairs.push(format!("{} ↔ {}", names.get(i), names.get(j as usize)));
                }
            }
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap_or_else(|e| match e {});
    if pairs.is_empty() {
        writeln!(out, "File overlaps: none")?;
    } else {
        writeln!(
            out,
            "File overlaps (never run at the same time): {}",
            counted(&pairs, total)
        )?;
    }
    let missed = overlaps.missed_by_plan();
    if !missed.is_empty() {
        let first: Vec<String> = missed
            .first
            .iter()
            .map(|&(a, b)| format!("{} ↔ {}", names.get(a), names.get(b)))
            .collect();
        writeln!(
            out,
            "Warning: the plan's fileOverlaps miss conflicts dagexec found: {} (they will not run at the same time either)",
            counted(&first, missed.count)
        )?;
    }
    Ok(())
}
