//! Files an operation replaces or removes keep a second name in the store's [`TRASH_DIR`] until
//! after the reply, so that the operation frees no blocks while the client waits (see
//! [`Retired`]); and the files the next publish writes into are made after the reply too.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::folders::{private_folder, SPARE_DIR, TRASH_DIR};
use super::open::Store;
use crate::fs::Retired;

static TRASH_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// Gives the file at `path` (a ref, or a project file on the same filesystem), which a
    /// rename is about to replace, a second name in [`TRASH_DIR`]: the rename then frees
    /// nothing, and dropping [`Store::take_retired`]'s list after the reply does (see
    /// [`Retired`]). Never where the folder is not a real one of the store; where no second
    /// name can be made, the rename pays as before.
    pub fn retire(&self, path: &Path) {
        if let Some(alias) = self.trash_name() {
            self.retired.lock().keep(path, alias);
        }
    }

    /// Removes the file at `path` (a project file a restore took out of the way), freeing its
    /// blocks after the reply where it can: it is moved into [`TRASH_DIR`] (same filesystem),
    /// else removed now. A folder that cannot be moved stays where it is.
    pub fn discard(&self, path: &Path) {
        let moved = self
            .trash_name()
            .is_some_and(|alias| self.retired.lock().take(path, alias));
        if !moved {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a file a restore replaced");
            }
        }
    }

    /// A new name in [`TRASH_DIR`]; None where the folder is not a real one of the store.
    fn trash_name(&self) -> Option<PathBuf> {
        let trash = private_folder(&self.dir, TRASH_DIR)?;
        let n = TRASH_COUNTER.fetch_add(1, Ordering::Relaxed);
        Some(trash.join(format!("{}-{n}", std::process::id())))
    }

    /// The work of making the files the next publish writes into (see [`pack::Spares`]), when
    /// they are not ready: the caller runs it after its reply. Running it late, twice or never
    /// changes no result (a publish without them makes its own).
    pub fn spare_maker(&self) -> Option<impl FnOnce() + Send + 'static> {
        if !self.durable.spares.short() {
            return None;
        }
        let (spares, dir) = (self.durable.spares.clone(), self.dir.clone());
        Some(move || {
            if let Some(folder) = private_folder(&dir, SPARE_DIR) {
                spares.top_up(&folder);
            }
        })
    }

    /// The second names of the files replaced since the last call, to drop (which removes
    /// them) after the reply.
    pub fn take_retired(&self) -> Retired {
        std::mem::take(&mut *self.retired.lock())
    }
}
