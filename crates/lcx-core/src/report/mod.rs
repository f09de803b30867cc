//! Reports: statistics and verdicts over stored runs, pure renderers
//! (markdown, JSON, CSV, SVG plots) and the dated archive.
//!
//! Nothing here touches SQLite or clap: [`builder::load`] asks the store for
//! each cell's series and [`moments`] folds them, [`builder::assemble`] turns
//! those into a [`model::Report`], and the renderers turn that into text.

pub mod archive;
pub mod builder;
pub mod comment;
pub mod compare;
pub mod history;
pub mod model;
pub mod moments;
pub mod plots;
pub mod prose;
pub mod render;
pub mod rows;
pub mod stats;
pub mod sweep_render;
pub mod words;

#[cfg(test)]
pub(crate) mod fixture;

pub use builder::{load, Options};
pub use comment::render_comment;
pub use model::Report;
pub use render::{render_csv, render_json, render_markdown, render_summary};
