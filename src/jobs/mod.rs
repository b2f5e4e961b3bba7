//! Durable, resumable jobs: the work that outlives a request (an app's deletion, an erasure).
//!
//! A job is a record in sled (`store.rs`: its kind, app, state, cursor and report) run by one
//! task (`runner.rs`) through its kind's steps (`Work`), one job at a time; the cursor is saved
//! after each step and each piece of a long step, so a `kill -9` resumes where it stopped.
//! This module knows sled and the clock, no resource: each kind's `Work` lives above the
//! resources its steps touch (`deletion/` for apps).

pub mod model;
mod runner;
pub mod store;

pub use model::{Cursor, Job, JobError, JobKind, JobState, JobView, StepOutcome};
pub use runner::{Jobs, Kinds, Work};

#[cfg(test)]
mod tests;
