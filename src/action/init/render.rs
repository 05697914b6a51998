//! The template filled in: the action reference in every job (the action's own checkout for
//! the jobs that hold a write token when it is built from the repository), the worker's
//! secret check and install, its environment and variables, the command, the schedule.

use super::{CHECKOUT, DEFAULT_PLAN, InitOptions, TEMPLATE, TEMPLATE_ACTION, TRUSTED_ACTION_DIR};
use crate::pure::agents::CLAUDE_COMMAND;

/// The template with the action reference, the plan, the worker, its install and secret
/// filled in.
pub fn render(opts: &InitOptions) -> String {
    let text = TEMPLATE.replace("      # @trusted-action@\n", &trusted_checkout(opts));
    let text = plan(&text, &opts.plan);
    let text = pin_action(&text, opts)
        .replace("      # @worker-setup@\n", &worker_setup(opts))
        .replace("    # @worker-environment@\n", &environment_line(opts))
        .replace("        # @worker-env@\n", &worker_env(opts));
    let old = format!(
        "          worker: '{}'\n",
        CLAUDE_COMMAND.replace('\'', "''")
    );
    // A YAML single-quoted scalar: only the quote itself needs escaping.
    let new = format!(
        "          worker: '{}'\n",
        opts.worker.command().replace('\'', "''")
    );
    let text = text.replace(&old, &new);
    if opts.eager { eager(&text) } else { text }
}

/// `schedule: eager`, conducted by the plan job itself (one job's start-up less): the plan
/// job gets the conductor's permissions, and its pre-flight checks run as the agent's user.
fn eager(text: &str) -> String {
    text.replace(
        "          schedule: rounds\n",
        "          schedule: eager\n          # This job goes on as the conductor (its pre-flight checks run as the agent's\n          # unprivileged user). false: a `conduct` job of its own, this one read-only.\n          conduct: true\n",
    )
    .replace(
        "      contents: read # check out and fetch the execution branch (a private repository needs it)\n",
        "      # It conducts (`conduct: true` below): the conductor's permissions.\n      contents: write # commit and push each result\n      pull-requests: write # open and update the PR\n      issues: write # the status comment and questions on the PR's conversation\n      checks: write # the dagexec check run\n      actions: write # start task runs (and a successor conductor); read their artifacts\n",
    )
}

/// The plan the workflow runs when it is not `.design/plan.json`: the `plan` input's default
/// (a round's dispatch passes it on), and the `/execute` jobs' (a comment's run has no inputs).
fn plan(text: &str, plan: &str) -> String {
    if plan == DEFAULT_PLAN || plan.is_empty() {
        return text.to_string();
    }
    // A YAML single-quoted scalar: only the quote itself needs escaping.
    let quoted = format!("'{}'", plan.replace('\'', "''"));
    let mut text = text
        .replacen(
            "# dagexec: executes .design/plan.json on",
            &format!("# dagexec: executes {plan} on"),
            1,
        )
        .replacen(
            &format!("        default: {DEFAULT_PLAN}\n"),
            &format!("        default: {quoted}\n"),
            1,
        );
    for job in ["comment", "steer"] {
        let line = format!("          command: {job}\n");
        text = text.replace(&line, &format!("{line}          plan: {quoted}\n"));
    }
    text
}

/// The jobs that hold a write token (plan reads the branch they act on) run the action from
/// the default branch when it is built from this repository: its checkout there.
fn trusted_checkout(opts: &InitOptions) -> String {
    if opts.action.is_local() {
        format!(
            "      # The action's own source, from the default branch, never from the execution
      # branch that task patches land on: this job's token must not run their code.
      - uses: {CHECKOUT}
        with:
          ref: ${{{{ github.event.repository.default_branch }}}}
          path: {TRUSTED_ACTION_DIR}
          persist-credentials: false
      - name: Keep the action's checkout out of the repository's status
        run: echo /{TRUSTED_ACTION_DIR}/ >> .git/info/exclude
"
        )
    } else {
        String::new()
    }
}

/// Every `uses:` of the template's action reference replaced: the pinned action, or the
/// trusted checkout in the jobs that write (plan, finalize, conduct) when it is local.
fn pin_action(text: &str, opts: &InitOptions) -> String {
    let mut out = String::with_capacity(text.len());
    // Whether the job the line is in holds a write token.
    let mut writes = false;
    let target = format!("uses: {TEMPLATE_ACTION}");
    for line in text.split_inclusive('\n') {
        if let Some(name) = line
            .strip_prefix("  ")
            .and_then(|l| l.strip_suffix(":\n"))
            .filter(|l| !l.starts_with(' '))
        {
            writes = matches!(name, "plan" | "finalize" | "conduct");
        }
        if let Some(at) = line.find(&target) {
            let uses = if opts.action.is_local() && writes {
                format!("./{TRUSTED_ACTION_DIR}")
            } else {
                opts.action.uses.clone()
            };
            out.push_str(&line[..at]);
            out.push_str(&opts.action.line(&uses));
            out.push_str(&line[at + target.len()..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// The work job's first steps: the worker's secret checked, its CLI installed.
fn worker_setup(opts: &InitOptions) -> String {
    let mut setup = String::new();
    if let Some(secret) = &opts.secret {
        let (place, flag) = match &opts.environment {
            Some(e) => (format!(" in the environment {e}"), format!(" --env {e}")),
            None => (" of the repository".to_string(), String::new()),
        };
        setup.push_str(&format!(
            "      # The worker's secret, checked before anything is installed or run.
      - name: Check the {secret} secret
        env:
          {secret}: ${{{{ secrets.{secret} }}}}
        run: |
          if [ -z \"${secret}\" ]; then
            echo \"::error title=dagexec: the {secret} secret is not set::The worker ({label}) needs the secret {secret}{place}. Set it with: gh secret set {secret}{flag}\"
            exit 1
          fi
",
            label = opts.worker.label().replace('"', "'"),
        ));
    }
    if let Some((name, run)) = opts.worker.install() {
        // Pinned to an exact version; zizmor's adhoc-packages asks for a lockfile.
        setup.push_str(&format!(
            "      - name: {name}\n        run: {run} # zizmor: ignore[adhoc-packages] -- an exact version\n"
        ));
    }
    setup
}

/// The work job's environment, when the secret lives in one.
fn environment_line(opts: &InitOptions) -> String {
    opts.environment.as_ref().map_or_else(String::new, |e| format!(
        "    # The worker's secret lives in this environment: only this job can read it.\n    environment: {e}\n"
    ))
}

/// The worker step's variables: its secret and the CLI's own settings.
fn worker_env(opts: &InitOptions) -> String {
    let mut vars: Vec<String> = Vec::new();
    if let Some(s) = &opts.secret {
        vars.push(format!("          {s}: ${{{{ secrets.{s} }}}}\n"));
    }
    for (k, v) in opts.worker.env() {
        vars.push(format!(
            "          {k}: \"{v}\" # the CLI's own retries: a dead API fails in seconds\n"
        ));
    }
    if vars.is_empty() {
        String::new()
    } else {
        format!("        env:\n{}", vars.concat())
    }
}
