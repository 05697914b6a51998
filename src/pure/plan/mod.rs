//! The plan file: its data model, its fields and errors, and reading it. Its semantic checks,
//! which build the DAG, are [`crate::pure::validate`] (above [`crate::pure::graph`]).

pub mod carry;
pub mod error;
pub mod fields;
pub mod ids;
pub mod load;
pub mod model;

pub use error::{PlanError, PlanErrors};
pub use load::parse;
pub use model::Plan;
