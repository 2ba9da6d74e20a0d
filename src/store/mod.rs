//! The object store of one project: a bare git repository outside the project, written with gix.
//!
//! Everything here is synchronous; the daemon calls it from blocking threads while holding the
//! project's lock, so one project's store is only ever written by one operation at a time.
//!
//! Layout: checkpoints are commits whose tree is the project's tree. Each dialog's timeline is
//! a first-parent chain under `refs/ckpt/dialogs/<dialog>`; client metadata blobs are kept
//! alive by `refs/ckpt/meta/<blob id>`. Every write goes through one [`write::Txn`]
//! (`store.begin()` → objects and ref edits → `commit`): an operation's new objects become one
//! pack ([`pack`]), its ref updates compare-and-swap transactions with a reflog, and both are
//! made durable before anything is published, by one flushed record of the store's journal
//! ([`txn`]).
//!
//! This file only names the parts: the handle is [`open::Store`], and every file that adds
//! methods to it depends on [`open`], never the other way round.

pub mod blame;
pub mod bundle;
pub mod checkpoint;
pub mod diff;
pub mod error;
mod folders;
pub mod fsck;
pub mod gc;
pub(crate) mod identity;
pub mod import;
pub(crate) mod message;
pub mod names;
pub mod open;
pub mod pack;
pub mod pool;
pub mod record;
pub mod refs;
pub mod retention;
mod sentinel;
pub mod share;
pub mod snapshot;
pub mod span;
pub mod timeline;
mod trash;
pub mod tree;
pub mod treediff;
pub mod txn;
pub mod write;

pub use checkpoint::{
    Checkpoint, CheckpointError, Imported, NewCheckpoint, RestoreLink, DEFAULT_DIALOG,
};
pub use error::StoreError;
pub use folders::{SPARE_DIR, TRASH_DIR};
pub use open::{Repo, Store};
pub use snapshot::{Snapshot, SnapshotError, SnapshotOptions};
pub use write::Txn;
