//! `dagexec init`: writes the workflow a repository needs to run its plan on GitHub Actions,
//! from the template in `templates/dagexec.yml` (the same file the end-to-end tests run).

use std::path::{Path, PathBuf};

/// The workflow template, as shipped.
pub const TEMPLATE: &str = include_str!("../../templates/dagexec.yml");

/// Where the workflow goes, relative to the repository root.
pub const WORKFLOW_REL: &str = ".github/workflows/dagexec.yml";

/// The template with the action reference (`org/dagexec@v1`) and, optionally, the worker
/// command replaced.
pub fn render(action: &str, worker: Option<&str>) -> Result<String, String> {
    if action.trim().is_empty() || action.contains(char::is_whitespace) {
        return Err(format!(
            "--action {action:?}: expected a reference such as org/dagexec@v1 or ./"
        ));
    }
    let mut text = TEMPLATE.replace("uses: org/dagexec@v1", &format!("uses: {action}"));
    if let Some(w) = worker {
        if w.trim().is_empty() || w.contains('\n') {
            return Err("--worker: expected one command line".into());
        }
        let old = "          worker: claude -p --permission-mode acceptEdits\n";
        // A YAML single-quoted scalar: only the quote itself needs escaping.
        let new = format!("          worker: '{}'\n", w.replace('\'', "''"));
        text = text.replace(old, &new);
    }
    Ok(text)
}

/// Writes the workflow under `root`; refuses to overwrite unless `force`.
pub fn write(root: &Path, text: &str, force: bool) -> Result<PathBuf, String> {
    let path = root.join(WORKFLOW_REL);
    if path.exists() && !force {
        return Err(format!(
            "{} exists; pass --force to replace it",
            path.display()
        ));
    }
    crate::fsx::write(root, &path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_names_the_action_and_a_worker() {
        let t = render("./", Some("sh -c 'it''s'")).unwrap();
        assert_eq!(t.matches("uses: ./").count(), 4);
        assert!(!t.contains("org/dagexec@v1"));
        assert!(t.contains("worker: 'sh -c ''it''''s'''\n"), "{t}");
        assert!(render("a b", None).is_err());
        let v: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
        assert_eq!(v["jobs"]["work"]["permissions"]["contents"], "read");
    }

    #[test]
    fn init_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "x", false).unwrap();
        assert!(
            write(dir.path(), "y", false)
                .unwrap_err()
                .contains("--force")
        );
        write(dir.path(), "y", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(WORKFLOW_REL)).unwrap(),
            "y"
        );
    }
}
