//! The help and the guide agree: every command and flag clap knows is in the guide's
//! reference (docs/src/commands.md), every flag the guide names is one clap knows, and each
//! flag's help shows one default.

use clap::CommandFactory;

use super::args::Cli;

/// The first cell of each row of the guide's command tables (`dagexec run [--worker CMD] …`).
fn rows(guide: &str) -> Vec<String> {
    guide
        .lines()
        .filter_map(|l| l.strip_prefix("| `dagexec "))
        .map(|l| l.split("` |").next().unwrap_or("").replace("\\|", "|"))
        .collect()
}

/// The command path a row is about (`["action", "plan"]`), read against clap's tree.
fn path_of(row: &str, cli: &clap::Command) -> Vec<String> {
    let mut cmd = cli;
    let mut path = Vec::new();
    for word in row.split_whitespace() {
        match cmd.find_subcommand(word) {
            Some(sub) => {
                path.push(word.to_string());
                cmd = sub;
            }
            None => break,
        }
    }
    path
}

/// Every command of the tree, with its visible long flags.
fn commands(cmd: &clap::Command, path: &[String], out: &mut Vec<(Vec<String>, Vec<String>)>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() {
            continue;
        }
        let mut p = path.to_vec();
        p.push(sub.get_name().to_string());
        let mut flags: Vec<String> = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .filter(|l| l != "--help" && l != "--version")
            .collect();
        flags.sort();
        out.push((p.clone(), flags));
        commands(sub, &p, out);
    }
}

#[test]
fn every_command_and_flag_is_in_the_guide_and_no_other() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/commands.md"))
            .unwrap();
    let cli = Cli::command();
    let flag = regex::Regex::new(r"--[a-z][a-z-]*").unwrap();
    let mut in_guide: std::collections::BTreeMap<Vec<String>, Vec<String>> = Default::default();
    for row in rows(&guide) {
        let path = path_of(&row, &cli);
        let mut flags: Vec<String> = flag
            .find_iter(&row)
            .map(|m| m.as_str().to_string())
            .collect();
        flags.sort();
        flags.dedup();
        assert!(
            in_guide.insert(path.clone(), flags).is_none(),
            "two rows for {path:?}"
        );
    }
    let mut all = Vec::new();
    commands(&cli, &[], &mut all);
    let mut problems = Vec::new();
    for (path, flags) in &all {
        let Some(documented) = in_guide.get(path) else {
            problems.push(format!("dagexec {} has no row", path.join(" ")));
            continue;
        };
        for f in flags {
            if !documented.contains(f) {
                problems.push(format!("dagexec {} {f} is not in its row", path.join(" ")));
            }
        }
        for f in documented {
            if !flags.contains(f) {
                problems.push(format!(
                    "the row of dagexec {} names {f}, which clap does not know",
                    path.join(" ")
                ));
            }
        }
    }
    for path in in_guide.keys() {
        if !all.iter().any(|(p, _)| p == path) {
            problems.push(format!(
                "a row for dagexec {}, no such command",
                path.join(" ")
            ));
        }
    }
    // The global --plan, in its own section.
    assert!(guide.contains("Every command takes `--plan PATH`"));
    assert!(
        problems.is_empty(),
        "docs/src/commands.md and clap differ:\n{}",
        problems.join("\n")
    );
}

/// A flag's help shows one default: clap's, or one in its text (then clap's is hidden).
#[test]
fn every_flag_shows_one_default() {
    let mut all = vec![Cli::command()];
    let mut problems = Vec::new();
    while let Some(cmd) = all.pop() {
        for a in cmd.get_arguments() {
            let text = a
                .get_long_help()
                .or_else(|| a.get_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            let shown = !a.get_default_values().is_empty() && !a.is_hide_default_value_set();
            if shown && text.contains("[default:") {
                problems.push(format!("{} --{}", cmd.get_name(), a.get_id()));
            }
        }
        all.extend(cmd.get_subcommands().cloned());
    }
    assert!(problems.is_empty(), "two defaults: {problems:?}");
}

/// `demo` writes its own plan: its help does not offer --plan, and the Action's jobs read
/// theirs at --plan-rel.
#[test]
fn demo_and_the_jobs_do_not_offer_the_global_plan() {
    let mut cli = Cli::command();
    cli.build();
    let visible = |cmd: &clap::Command| {
        cmd.get_arguments()
            .any(|a| a.get_long() == Some("plan") && !a.is_hide_set())
    };
    assert!(!visible(cli.find_subcommand("demo").unwrap()));
    let action = cli.find_subcommand("action").unwrap();
    for job in action.get_subcommands() {
        if job.get_name() != "help" {
            assert!(!visible(job), "action {}", job.get_name());
        }
    }
    assert!(visible(cli.find_subcommand("run").unwrap()));
    assert!(visible(cli.find_subcommand("init").unwrap()));
}

/// `run --yes` says every question it answers.
#[test]
fn run_yes_says_what_it_skips() {
    let cli = Cli::command();
    let run = cli.find_subcommand("run").unwrap();
    let yes = run
        .get_arguments()
        .find(|a| a.get_long() == Some("yes"))
        .unwrap();
    let help = yes.get_help().unwrap().to_string();
    assert!(help.contains("blocking assumption checks"), "{help}");
    assert!(help.contains("uncommitted changes"), "{help}");
}
