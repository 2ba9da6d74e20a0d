//! Writing checkpoints out as a git bundle (`ckpt export --bundle`), which `git clone`,
//! `git fetch` and `ckpt import` read.

use std::path::Path;

use gix::ObjectId;

use super::pack::writer::PackWriter;
use super::{Store, StoreError};

impl Store {
    /// Writes a git bundle (v2) to `dest` holding `commits` (named `refs/heads/ckpt-<id>`, the
    /// first also as HEAD) with every object they reach and their client metadata, so
    /// `git clone` and `git fetch` read it and `ckpt import` restores the metadata too.
    pub fn export_bundle(
        &self,
        commits: &[ObjectId],
        dest: &Path,
        replace: bool,
    ) -> Result<usize, StoreError> {
        let repo = self.repo();
        let mut header = String::from("# v2 git bundle\n");
        for (i, id) in commits.iter().enumerate() {
            if i == 0 {
                header.push_str(&format!("{id} HEAD\n"));
            }
            header.push_str(&format!(
                "{id} refs/heads/ckpt-{}\n",
                id.to_hex_with_len(12)
            ));
        }
        header.push('\n');
        let pack = PackWriter::new(self.dir())?;
        let shallow = self.shallow()?;
        let mut walked = Vec::new();
        let cut = super::gc::pack_reachable(&repo, commits, &shallow, &pack, |id| walked.push(id))?;
        // Client metadata is named in a commit header, not linked: add it so an import keeps it.
        for id in walked {
            let Ok(c) = self.checkpoint(&repo, id) else {
                continue;
            };
            if let Some(blob) = Self::meta_blob_of(&c) {
                let object = repo
                    .find_object(blob)
                    .map_err(|e| StoreError::git("reading metadata", e))?;
                pack.add(blob, object.kind, &object.data)?;
            }
        }
        // History that retention cut away: the bundle names it as a prerequisite.
        for id in cut {
            header.insert_str(
                "# v2 git bundle\n".len(),
                &format!("-{id} pruned by ckpt retention\n"),
            );
        }
        pack.finish_into(header.as_bytes(), dest, replace)
    }
}
