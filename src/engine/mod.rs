//! The domain: everything ckpt does to a project, as plain synchronous functions.
//!
//! Every operation that reads or writes a project — checkpoints, restores, edit transactions —
//! is a function of `(&Project, &mut Opened, params)`: [`Project`] is what it knows of the
//! project, [`Opened`] its state (store, index, filter, watcher), and [`opened::operate`] runs
//! one on it, checks first and durability after. Scheduling is not here: the daemon's owner of
//! each project (`daemon::owner`) holds its lock and runs operations on blocking threads; its
//! handlers only decode, call and encode. Nothing here needs a runtime.
//!
//! - [`project`], [`opened`]: the project and its opened state.
//! - [`record`]: recording a checkpoint, which the operations below call down to.
//! - [`checkpoint`]: a prompt's checkpoint, looking at checkpoints, export and import, verify
//!   and fsck.
//! - [`restore`]: restore, undo and reset, read top-down: pre-restore checkpoint, plan, apply
//!   ([`worktree`]), leftovers check, restore checkpoint.
//! - [`worktree`]: the only code that writes project files, with its path-safety rules (used by
//!   restores and by edit aborts).
//! - [`replace`]: replacing one project file without losing a write another process made
//!   meanwhile (exchange, check, put back).
//! - [`flush`]: flushing what the worktree wrote, on threads kept for it.
//! - [`workers`]: the threads kept parked for the parts of a restore that run side by side.
//! - [`edit`], [`transactions`]: edit transactions for agent tools, and their saved copies.
//! - [`share`]: remotes, push and fetch (the transport is the client's `git`).
//! - [`timeline`]: dialogs, sessions, retention, the disk budget, gc.
//! - [`running`]: turns as they run; [`turns`]:
//!   what each checkpoint records of them ([`step`]: an agent's after-tool and turn-end hooks);
//!   [`attribution`]: who changed what, read from that;
//!   [`revert`]: one turn's changes taken back ([`merge3`], line by line).
//! - [`history`]: what the prompts did: their log, and blame by prompt.
//! - [`events`]: live events for subscribers (fed by the watcher).
//! - [`registry`]: the registered projects file, and which folders may be projects.

pub mod attribution;
pub mod checkpoint;
pub mod edit;
mod error;
pub mod events;
pub mod flush;
pub mod history;
pub mod merge3;
pub mod opened;
pub mod paths;
pub mod project;
pub mod record;
pub mod registry;
pub mod replace;
pub mod restore;
pub mod revert;
pub mod running;
pub mod share;
pub mod step;
pub mod timeline;
pub mod transactions;
pub mod transfer;
pub mod turns;
pub mod upkeep;
pub mod wire;
pub mod workers;
pub mod worktree;

pub use error::{Error, Result};
pub use opened::Opened;
pub use project::Project;
