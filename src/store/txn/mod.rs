//! How a write to the store becomes durable — the one place that answers it.
//!
//! An operation stages its new objects and then commits them with its ref changes. It holds a [`Txn`](crate::store::write::Txn) (`store.begin()` → objects and ref
//! edits → `commit`); underneath, the handle's [`durable::Durable`] state does this:
//!
//! 1. **Stage.** New objects collect in the pending batch ([`pending`]): blobs in a pack the
//!    capture workers write ([`PackWriter`](crate::store::pack::writer::PackWriter)), trees,
//!    commits and metadata in one repository handle's memory. `write_pending` completes the
//!    batch as one pack; a pack small enough to stay in memory (up to 1 MiB: every checkpoint of a change) is
//!    kept whole, unwritten ([`staged::StagedPack`]); a larger one is flushed with its folder
//!    (and its index from 4 MiB) before any ref may name it.
//! 2. **Commit.** `move_refs` locks and compares the refs, writes one record of the
//!    store's journal ([`journal`], format in [`records`]) holding the staged pack and every
//!    ref's old and new value, and flushes it: one `fdatasync`, the operation's only wait for
//!    the device. Then the pack is published (into files made ahead of time, [`spares`]) and
//!    the refs move, neither flushed: the record holds all it takes to redo them.
//! 3. **Redo.** When a process first opens a store, what a crash lost is redone from the
//!    journal's current epoch ([`replay`]): packs written again, each ref change made again
//!    where the ref still holds the value the change found, never a ref moved backwards; a
//!    damaged record is reported as damage. A small pack's index, never flushed, is rebuilt
//!    from its pack if a power cut left it unfinished
//!    ([`repair_indices`](crate::store::pack::index::repair_indices)).
//! 4. **Settle.** Before the journal wraps around, before packs are removed (merges, gc,
//!    `fsck --repair`) and at a clean shutdown, everything the journal's records wrote is
//!    flushed and a new epoch starts.
//!
//! Only ckpt's own files are flushed, never the filesystem (`syncfs`): a build writing
//! gigabytes beside the project costs a checkpoint nothing. The file operations all of this is
//! made of — a private file, a file replaced atomically, a flush of a file or folder — are in
//! [`files`], a leaf. Restored project files are flushed by the engine (`engine::flush`).

pub mod durable;
pub mod files;
pub mod journal;
pub mod pending;
pub mod records;
pub mod refs;
pub mod replay;
pub mod spares;
pub mod staged;
