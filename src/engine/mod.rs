//! The domain: everything ckpt does to a project, synchronous, behind one owner per project.
//!
//! A [`Project`] owns its store, index, filter and watcher (the [`Opened`] state) behind one
//! lock: every operation that reads or writes the project's files — checkpoints, restores,
//! edit transactions — runs as a function of `(&Project, &mut Opened, params)` on a blocking
//! thread with that lock held ([`Project::run`]). The daemon's handlers only decode, call, and
//! encode.
//!
//! - [`checkpoint`]: recording (socket → index refresh → tree → commit → ref), looking at
//!   checkpoints, export and import, verify and fsck.
//! - [`restore`]: restore, undo and reset, read top-down: pre-restore checkpoint, plan, apply
//!   ([`worktree`]), leftovers check, restore checkpoint.
//! - [`worktree`]: the only code that writes project files, with its path-safety rules (used by
//!   restores and by edit aborts).
//! - [`replace`]: replacing one project file without losing a write another process made
//!   meanwhile (exchange, check, put back).
//! - [`flush`]: flushing what the worktree wrote, on threads kept for it.
//! - [`workers`]: the threads kept parked for the parts of a restore that run side by side.
//! - [`edit`]: edit transactions for agent tools.
//! - [`timeline`]: dialogs, sessions, retention, the disk budget, gc.
//! - [`events`]: live events for subscribers (fed by the watcher).
//! - [`auto`]: automatic checkpoints after the files settle.
//! - [`registry`]: the registered projects file.

pub mod auto;
pub mod checkpoint;
pub mod edit;
mod error;
pub mod events;
pub mod flush;
pub mod project;
pub mod registry;
pub mod replace;
pub mod restore;
pub mod timeline;
pub mod workers;
pub mod worktree;

pub use error::{Error, Result};
pub use project::{Opened, Project};
