//! Reading git bundles into the store: the objects of `ckpt export --bundle` or of plain
//! `git bundle create`.
//!
//! A bundle is a short text header (a signature line, optional capabilities, prerequisite
//! commits `-<id>`, then `<id> <ref>` lines, then a blank line) followed by a pack. The pack is
//! indexed into `objects/pack` by gix-pack, which resolves its deltas (including ones against
//! objects this store already has, as `git bundle` writes for incremental bundles) and checks its
//! checksum; a pack that is damaged or that needs objects nobody has leaves nothing behind.
//! The bundle is untrusted input: gix-pack allocates no entry's declared size up front and
//! at most [`MAX_BUNDLE_OBJECT_BYTES`] for any one object (its `alloc_limit_bytes`).
//! Turning the bundle's commits into checkpoints is up to the caller.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::ObjectId;

mod candidates;
mod header;

use super::error::{error_chain, StoreError};
use super::open::Store;
use super::pack::index::MAX_OBJECT_BYTES;
pub use candidates::{unsafe_paths, Candidate, NotImported};
use header::short_list;
pub use header::{read_header, BundleHeader, ImportError};
/// Largest object a bundle may hold (see [`MAX_OBJECT_BYTES`]).
pub const MAX_BUNDLE_OBJECT_BYTES: u64 = MAX_OBJECT_BYTES;

/// What [`Store::import_bundle_objects`] brought in.
#[derive(Debug)]
pub struct ImportedObjects {
    pub header: BundleHeader,
    /// Objects in the bundle's pack.
    pub objects: u32,
    /// The `.keep` file that protects the new pack; remove it once refs reach what is needed.
    pub keep: Option<PathBuf>,
}

impl ImportedObjects {
    /// Removes the pack the import wrote (nothing refers to it yet): a refused bundle leaves
    /// nothing behind.
    pub fn discard(&self) {
        if let Some(keep) = &self.keep {
            for ext in ["idx", "pack", "rev", "keep"] {
                let _ = std::fs::remove_file(keep.with_extension(ext));
            }
        }
    }
}

impl Store {
    /// Indexes the pack of the bundle at `path` into the store and returns the bundle's header.
    /// Objects become durable before this returns; nothing refers to them yet.
    #[tracing::instrument(skip_all, fields(bundle = %path.display()))]
    // Long by design: open, check, index, verify and clean up on every failure path, in the
    // order that leaves nothing behind.
    pub fn import_bundle_objects(&self, path: &Path) -> Result<ImportedObjects, ImportError> {
        let read_err = |source| ImportError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Never blocks on a FIFO; a folder, FIFO or device is refused.
        let file = crate::fs::open_regular(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::InvalidInput => ImportError::NotABundle {
                path: path.to_path_buf(),
                reason: if path.is_dir() {
                    "it is a directory".into()
                } else {
                    source.to_string()
                },
            },
            _ => read_err(source),
        })?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let header = read_header(&mut reader, path)?;
        if header.refs.is_empty() {
            return Err(ImportError::NotABundle {
                path: path.to_path_buf(),
                reason: "it names no commits".into(),
            });
        }
        let repo = self.repo();
        let missing: Vec<ObjectId> = header
            .prerequisites
            .iter()
            .filter(|id| !repo.has_object(*id))
            .copied()
            .collect();
        let outcome = self.index_pack(&mut reader).map_err(|e| match e {
            PackError::Store(e) => ImportError::Store(e),
            PackError::Pack(message) => match missing.is_empty() {
                true => ImportError::Pack(message),
                false => ImportError::MissingPrerequisites {
                    missing: missing.clone(),
                    message,
                },
            },
        })?;
        // Refs must name objects the store has now.
        let repo = self.repo();
        let unknown: HashSet<ObjectId> = header
            .refs
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !repo.has_object(*id))
            .collect();
        if !unknown.is_empty() {
            if let Some(keep) = &outcome.keep_path {
                let _ = std::fs::remove_file(keep);
            }
            let unknown: Vec<ObjectId> = unknown.into_iter().collect();
            return Err(ImportError::Pack(format!(
                "it lacks the commits its header names ({})",
                short_list(&unknown)
            )));
        }
        tracing::info!(
            objects = outcome.objects,
            refs = header.refs.len(),
            "bundle indexed"
        );
        Ok(ImportedObjects {
            header,
            objects: outcome.objects,
            keep: outcome.keep_path,
        })
    }
}

/// Why a pack could not be indexed into the store.
#[derive(Debug)]
pub(crate) enum PackError {
    /// The pack itself (damaged, or needing objects nobody has).
    Pack(String),
    Store(StoreError),
}

/// A pack indexed into the store by [`Store::index_pack`].
pub(crate) struct IndexedPack {
    pub objects: u32,
    /// The `.keep` file that protects it until refs reach what is needed.
    pub keep_path: Option<PathBuf>,
}

impl Store {
    /// Indexes the pack `reader` streams (deltas against this store's objects allowed) into
    /// the store's pack folder, durable (pack, index, folder flushed) before this returns;
    /// nothing refers to it yet and a `.keep` file protects it.
    pub(crate) fn index_pack(&self, reader: &mut dyn BufRead) -> Result<IndexedPack, PackError> {
        let repo = self.repo();
        let pack_dir = self.dir().join("objects").join("pack");
        std::fs::create_dir_all(&pack_dir).map_err(|source| {
            PackError::Store(StoreError::Io {
                path: pack_dir.clone(),
                source,
            })
        })?;
        let options = gix_pack::bundle::write::Options {
            thread_limit: Some(2),
            // An entry's declared size is never trusted for an allocation past this.
            alloc_limit_bytes: Some(MAX_BUNDLE_OBJECT_BYTES as usize),
            ..Default::default()
        };
        let outcome = gix_pack::Bundle::write_to_directory(
            reader,
            Some(&pack_dir),
            &mut gix::progress::Discard,
            &AtomicBool::new(false),
            Some(repo.objects.clone()),
            gix::hash::Kind::Sha1,
            options,
        )
        .map_err(|e| PackError::Pack(error_chain(&e)))?;
        // gix does not fsync what it wrote: the pack, its index and the folder, before any ref
        // names them.
        for path in [&outcome.data_path, &outcome.index_path]
            .into_iter()
            .flatten()
        {
            super::txn::files::fsync_if_present(path).map_err(PackError::Store)?;
        }
        super::txn::files::fsync_if_present(&pack_dir).map_err(PackError::Store)?;
        Ok(IndexedPack {
            objects: outcome.index.num_objects,
            keep_path: outcome.keep_path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &[u8]) -> Result<BundleHeader, ImportError> {
        read_header(&mut &text[..], Path::new("b"))
    }

    #[test]
    fn headers_parse() {
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let text = format!("# v2 git bundle\n-{a} parent\n{b} refs/heads/main\n{b} HEAD\n\nPACK");
        let mut r = text.as_bytes();
        let h = read_header(&mut r, Path::new("b")).unwrap();
        assert_eq!(
            h.prerequisites,
            vec![ObjectId::from_hex(a.as_bytes()).unwrap()]
        );
        assert_eq!(h.refs.len(), 2);
        assert_eq!(h.refs[0].1, "refs/heads/main");
        assert_eq!(r, b"PACK");
        let v3 = format!("# v3 git bundle\n@object-format=sha1\n{b} refs/heads/x\n\n");
        assert_eq!(parse(v3.as_bytes()).unwrap().refs.len(), 1);
    }

    #[test]
    fn bad_headers_are_refused() {
        let b = "2".repeat(40);
        for (text, needle) in [
            ("".to_string(), "empty"),
            ("PACK....".to_string(), "does not start"),
            (
                "# v2 git bundle\nzz refs/heads/x\n\n".to_string(),
                "bad header line",
            ),
            (format!("# v2 git bundle\n{b}\n\n"), "names no ref"),
            (
                format!("# v2 git bundle\n{b} refs/heads/x\n"),
                "ends before",
            ),
            (
                format!("# v3 git bundle\n@object-format=sha256\n{b} x\n\n"),
                "sha256",
            ),
            (
                format!("# v3 git bundle\n@filter=blob:none\n{b} x\n\n"),
                "filter",
            ),
        ] {
            let e = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
