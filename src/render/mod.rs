//! TEMPORARY stand-in until the real renderers land (being written now).
pub mod status {
    use crate::plan::Plan;
    pub fn status_table(_plan: &Plan, _out: &mut impl std::io::Write) -> std::io::Result<()> {
        Ok(())
    }
}
pub mod graph {
    use crate::plan::Plan;
    pub enum GraphFormat {
        Mermaid,
        Dot,
    }
    pub fn render(_plan: &Plan, _f: GraphFormat) -> String {
        String::new()
    }
}
