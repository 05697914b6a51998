//! The plan file: its data model, reading and atomic writing, and validation.

pub mod error;
pub mod fields;
pub mod load;
pub mod model;
pub mod validate;

pub use error::{PlanError, PlanErrors};
pub use load::parse;
pub use model::{Plan, Status, Task};
