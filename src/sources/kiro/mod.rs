//! Kiro / cc-sdd `.kiro/specs/<feature>/tasks.md` (being written).
use super::generated::{Built, Context, Problem, Reader};
use std::collections::BTreeSet;

/// The Kiro reader.
pub struct Kiro;

impl Reader for Kiro {
    fn build(&self, cx: &Context<'_>, _text: &str) -> Result<Built, Vec<Problem>> {
        Err(vec![Problem::new(
            format!("{}: Kiro task lists are not read yet", cx.rel),
            "",
        )])
    }
    fn write_back(
        &self,
        _text: &str,
        _done: &BTreeSet<String>,
        _meta: &serde_json::Value,
    ) -> Result<String, String> {
        Err("Kiro task lists are not written yet".into())
    }
}
