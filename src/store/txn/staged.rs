//! A complete pack and its index, in memory: an operation's pack, made durable in the store's
//! journal before it is published (written into the pack folder without flushes of its own).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use gix::ObjectId;

use super::files::{create_private, unique};
use super::spares::{Spare, Spares};
use crate::store::pack::index::index_from_pack;

/// What finishing a pack gave.
pub(crate) enum Finished {
    /// It held nothing; nothing was written.
    Empty,
    /// Flushed and published.
    Published,
    /// Complete in memory, written nowhere yet.
    Staged(StagedPack),
}

/// A complete pack and its index, in memory.
pub(crate) struct StagedPack {
    /// `pack-<checksum>`.
    pub name: String,
    pub pack: Vec<u8>,
    pub idx: Vec<u8>,
    /// The object written first (a probe for loading the pack).
    pub first: ObjectId,
}

impl StagedPack {
    /// A staged pack from its bytes alone (as the journal holds it): None unless it verifies.
    pub(crate) fn from_pack(name: &str, pack: Vec<u8>) -> Option<StagedPack> {
        let idx = index_from_pack(&pack)?;
        let sum = ObjectId::try_from(&pack[pack.len() - 20..]).ok()?;
        if name != format!("pack-{sum}") {
            return None;
        }
        // Any object will do as the probe: the first in the index.
        let first = ObjectId::try_from(idx.get(8 + 256 * 4..8 + 256 * 4 + 20)?).ok()?;
        Some(StagedPack {
            name: name.to_string(),
            pack,
            idx,
            first,
        })
    }

    /// Writes the pack and then its index into `dir` under their names (temporary files
    /// renamed into place, read-only to their owner), replacing what is there. `durable`:
    /// both files and the folder are flushed too; otherwise the journal holds the pack.
    pub(crate) fn publish(&self, dir: &Path, durable: bool) -> std::io::Result<()> {
        self.publish_into(dir, durable, None)
    }

    /// [`StagedPack::publish`], writing into files made ahead of time where `spares` has them
    /// (and making its own where it has none, or where one of them cannot be used).
    pub(crate) fn publish_into(
        &self,
        dir: &Path,
        durable: bool,
        spares: Option<&Spares>,
    ) -> std::io::Result<()> {
        if let Some(spares) = spares {
            if let Some(pair) = spares.take_pair() {
                match self.write_files(dir, durable, pair) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        // Most likely someone emptied their folder: the others go too.
                        tracing::debug!(error = %e, "cannot publish through spare files; making new ones");
                        spares.clear();
                    }
                }
            }
        }
        let tmp = |ext: &str| {
            let path = dir.join(format!(
                "tmp_ckpt_{}_{}.{ext}",
                std::process::id(),
                unique()
            ));
            let file = create_private(&path)?;
            Ok::<_, std::io::Error>(Spare { path, file })
        };
        let pack = tmp("pack")?;
        let idx = match tmp("idx") {
            Ok(idx) => idx,
            Err(e) => {
                let _ = std::fs::remove_file(&pack.path);
                return Err(e);
            }
        };
        self.write_files(dir, durable, [pack, idx])
    }

    /// Writes the pack and its index into `files` (new, empty), then renames them into place.
    fn write_files(&self, dir: &Path, durable: bool, files: [Spare; 2]) -> std::io::Result<()> {
        let paths = [files[0].path.clone(), files[1].path.clone()];
        let result = (|| {
            for (spare, bytes) in files.into_iter().zip([&self.pack, &self.idx]) {
                let mut f = spare.file;
                f.write_all(bytes)?;
                if durable {
                    f.sync_all()?;
                }
            }
            std::fs::rename(&paths[0], dir.join(format!("{}.pack", self.name)))?;
            std::fs::rename(&paths[1], dir.join(format!("{}.idx", self.name)))?;
            if durable {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        if result.is_err() {
            for path in &paths {
                let _ = std::fs::remove_file(path);
            }
        }
        result
    }
}
