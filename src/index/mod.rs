//! The file-state index of one project: path -> (stat, mode, blob id), arranged as a folder
//! tree with a cached git tree id per folder.
//!
//! A checkpoint refreshes only what may have changed (the watcher's dirty paths, or everything
//! in a stat-only verify), re-reads only files whose stat differs, rebuilds only the trees above
//! them, and writes only new objects. It is an optimisation and never a source of truth: every
//! refresh decision is the same one a fresh full walk makes (`Filter::walk_from`), and an entry
//! whose mtime is too close to the moment it was read (git's racy-timestamp rule) is re-read at
//! the next refresh. The persisted form is only a stat cache: lost or corrupt, the next verify
//! re-hashes.

mod baseline;
mod file_index;
mod name;
mod node;
mod persist;
mod progress;
mod racy;
mod refresh;
mod tree;
mod verify;

#[cfg(test)]
pub(super) mod testing;

pub use file_index::{stat_cache_path, FileIndex, StatCache, INDEX_REF};
pub use node::IndexEntry;
pub use persist::{load_stat_cache, save_stat_cache};
pub use progress::{OnDir, Progress, RefreshOutcome};
pub use tree::Trees;

pub use crate::fs::Stat;
