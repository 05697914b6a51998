//! The pure core: the plan model, the DAG, the engine that picks ready sets, the result
//! processor, the plan updater, prompts, questions, reviews, rendering, time and cost, and the
//! simulator. Nothing here spawns a process, touches the disk, git or the network, or uses
//! tokio: it takes values and returns values (`tests/it/layout.rs` fails when it does).

pub mod agents;
pub mod clip;
pub mod egress;
pub mod engine;
pub mod events;
pub mod gateway;
pub mod graph;
pub mod hash;
pub mod integration;
pub mod join;
pub mod outcome;
pub mod overlap;
pub mod pace;
pub mod paths;
pub mod plan;
pub mod prices;
pub mod prompt;
pub mod question;
pub mod render;
pub mod review;
pub mod said;
pub mod sanitize;
pub mod simulate;
pub mod timeline;
pub mod update;
pub mod usage;
pub mod validate;
