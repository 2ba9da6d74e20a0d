//! Reading the store's refs. Moving them is a transaction's ([`super::write::Txn`]).

use gix::ObjectId;

use super::error::StoreError;
use super::open::Store;

impl Store {
    /// The id `name` points at, if it exists.
    pub(crate) fn ref_target(
        &self,
        repo: &gix::Repository,
        name: &str,
    ) -> Result<Option<ObjectId>, StoreError> {
        let found = repo
            .try_find_reference(name)
            .map_err(|e| StoreError::git("ref lookup", e))?;
        Ok(found.and_then(|r| r.target().try_id().map(|id| id.to_owned())))
    }

    /// All refs below `prefix` (e.g. `refs/ckpt/dialogs/`), as (name without prefix, target).
    pub(crate) fn refs_under(
        &self,
        repo: &gix::Repository,
        prefix: &str,
    ) -> Result<Vec<(String, ObjectId)>, StoreError> {
        let platform = repo
            .references()
            .map_err(|e| StoreError::git("listing refs", e))?;
        let iter = platform
            .prefixed(prefix)
            .map_err(|e| StoreError::git("listing refs", e))?;
        let mut out = Vec::new();
        for r in iter {
            let r = r.map_err(|e| StoreError::git("listing refs", e))?;
            let name = r.name().as_bstr().to_string();
            if let Some(id) = r.target().try_id() {
                out.push((name.trim_start_matches(prefix).to_string(), id.to_owned()));
            }
        }
        Ok(out)
    }
}
