//! How to write to the store — one answer: [`Store::begin`] gives a [`Txn`]; add objects
//! ([`Txn::objects`]) and ref edits ([`Txn::update`], [`Txn::delete`], [`Txn::edit`]), then
//! [`Txn::commit`] makes them durable together (one journal record, one flush) and publishes
//! them. A `Txn` dropped without a commit publishes nothing: its ref edits are never made.
//!
//! Objects belong to the operation, not to one `Txn`: what a dropped `Txn` wrote stays staged
//! with the operation's other new objects (the index writes a project's trees long before the
//! checkpoint that names them), and is made durable by the next commit, or when the operation
//! ends ([`Store::flush_objects`]). How durability is achieved is [`crate::store::txn`]'s.

use gix::refs::transaction::RefEdit;
use gix::ObjectId;

use super::error::StoreError;
use super::open::Store;
use super::txn::refs::{delete_edit, update_edit};

/// One write to the store: objects and ref edits made durable and published together by
/// [`Txn::commit`], or not at all.
#[must_use = "a transaction publishes nothing until it is committed"]
pub struct Txn<'s> {
    store: &'s Store,
    edits: Vec<RefEdit>,
}

impl Store {
    /// Starts a write to the store.
    pub fn begin(&self) -> Txn<'_> {
        Txn {
            store: self,
            edits: Vec::new(),
        }
    }

    /// Makes every object the operation staged durable and readable now (no ref moves): one
    /// pack, in one journal record. On failure they are dropped and [`Store::take_lost`] says
    /// so once (whoever cached their ids must forget them).
    pub fn flush_objects(&self) -> Result<(), StoreError> {
        if self.begin().commit_objects()? {
            if let Some(load) = self.pack_loader() {
                load();
            }
        }
        Ok(())
    }

    /// The pack the capture workers write this operation's blobs into.
    pub(crate) fn pending_blobs(
        &self,
    ) -> Result<std::sync::Arc<super::pack::writer::PackWriter>, StoreError> {
        self.durable.pending_blobs()
    }

    /// Completes the operation's blobs' pack now if it outgrew memory (see
    /// `Durable::seal_large_blobs`).
    pub(crate) fn seal_large_blobs(&self) -> Result<(), StoreError> {
        self.durable.seal_large_blobs()
    }

    /// The work of making the store's handles load the pack written last, when they have not:
    /// the caller chooses when, e.g. after its reply (running it late, twice or never changes
    /// no result).
    pub fn pack_loader(&self) -> Option<impl FnOnce() + Send + 'static> {
        self.durable.pack_loader(self.thread_safe())
    }

    /// Whether enough small packs accumulated to merge them when the project is quiet.
    pub fn needs_merge(&self) -> bool {
        self.durable.needs_merge()
    }

    /// Whether so many accumulated that they are merged without waiting for quiet.
    pub fn must_merge(&self) -> bool {
        self.durable.must_merge()
    }

    /// Whether staged objects were dropped since the last call (a failed flush).
    pub fn take_lost(&self) -> bool {
        self.durable.take_lost()
    }

    /// Flushes everything the journal's records wrote and starts its new epoch: before packs
    /// are removed, so that no record names one.
    pub(crate) fn retire_journal(&self) -> Result<(), StoreError> {
        self.durable.retire_journal()
    }
}

impl Txn<'_> {
    /// Runs `f` with the handle whose memory holds the operation's new trees, commits and
    /// metadata: what it writes is staged, and it reads staged and stored objects alike.
    pub fn objects<T>(&self, f: impl FnOnce(&gix::Repository) -> T) -> T {
        self.store.durable.with_pending(|| self.store.own_repo(), f)
    }

    /// Points `name` at `new` if it still points at `expected` (None: must not exist).
    pub fn update(
        &mut self,
        name: &str,
        expected: Option<ObjectId>,
        new: ObjectId,
        log_message: &str,
    ) -> Result<(), StoreError> {
        self.edits
            .push(update_edit(name, expected, new, log_message)?);
        Ok(())
    }

    /// Deletes `name` if it still points at `expected`.
    pub fn delete(&mut self, name: &str, expected: ObjectId) -> Result<(), StoreError> {
        self.edits.push(delete_edit(name, expected)?);
        Ok(())
    }

    /// Adds ref edits made elsewhere (a fetch's).
    pub fn edit(&mut self, edits: impl IntoIterator<Item = RefEdit>) {
        self.edits.extend(edits);
    }

    /// Makes the staged objects and the ref edits durable in one journal record and publishes
    /// them: the refs move only if each still holds the value its edit expects (compare and
    /// swap, with a reflog); otherwise nothing moves and the objects are still made durable.
    /// `doing` names the work in errors ("updating", "fetching").
    pub fn commit(self, doing: &str) -> Result<(), StoreError> {
        let store = self.store;
        store.durable.write_pending()?;
        if self.edits.is_empty() {
            store.durable.commit_staged()?;
            return Ok(());
        }
        let repo = store.repo();
        store
            .durable
            .move_refs(&repo, self.edits, doing, &|path| store.retire(path))
    }

    /// Commits the staged objects alone; whether there were any.
    fn commit_objects(self) -> Result<bool, StoreError> {
        debug_assert!(self.edits.is_empty());
        if self.store.durable.write_pending()? {
            self.store.durable.commit_staged()?;
            return Ok(true);
        }
        Ok(false)
    }
}
