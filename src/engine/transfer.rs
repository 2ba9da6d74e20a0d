//! Checkpoints in and out of the store as files: a patch `git apply` takes, a git bundle
//! written, a bundle imported (each of its timelines a new dialog, its unsafe paths refused).

use std::collections::HashMap;

use super::checkpoint::parent_tree;
use super::record::emit_created;
use super::{Error, Opened, Project, Result};
use crate::model::{CheckpointId, Kind};
use crate::protocol::methods::{ExportBundleParams, ExportPatchParams, ImportBundleParams};
use crate::protocol::results as r;
use crate::store::checkpoint::{parse_id, validate_dialog};
use crate::store::diff::diff;
use crate::store::import::unsafe_paths;
use crate::store::treediff::diff_trees;
use crate::store::{NewCheckpoint, Store};

/// The changes of checkpoint `id` against its parent (or `against`) as a patch `git apply` takes.
pub fn export_patch(_: &Project, o: &mut Opened, params: ExportPatchParams) -> Result<r::Patch> {
    let store = &o.store;
    let repo = store.repo();
    let to = store.resolve(&repo, &params.id)?;
    let from = match (&params.against, &to.parent) {
        (Some(other), _) => Some(store.resolve(&repo, other)?),
        (None, Some(_)) if parent_tree(store, &repo, &to)?.is_none() => {
            return Err(Error::invalid(format!(
                "the checkpoint before {} was pruned by retention: name one to diff against \
                 (--against)",
                to.id.short()
            )))
        }
        (None, Some(parent)) => Some(store.checkpoint(&repo, parent.object_id())?),
        (None, None) => None,
    };
    let old = from.as_ref().map(|c| parse_id(&c.tree)).transpose()?;
    let changes = diff_trees(&repo, old, Some(parse_id(&to.tree)?), &[])?;
    let result = diff(&repo, &changes, true, false)?;
    Ok(r::Patch {
        id: to.id,
        against: from.map(|c| c.id),
        patch: result.patch.unwrap_or_default(),
    })
}

/// Writes checkpoints (and all they reach) as a git bundle.
pub fn export_bundle(
    _: &Project,
    o: &mut Opened,
    params: ExportBundleParams,
) -> Result<r::BundleWritten> {
    if params.ids.is_empty() {
        return Err(Error::invalid(
            "export_bundle needs at least one checkpoint id",
        ));
    }
    let path = super::project::absolute(&params.path)?;
    let store = &o.store;
    let repo = store.repo();
    let mut ids = Vec::new();
    for id in &params.ids {
        ids.push(store.resolve(&repo, id)?.id);
    }
    if !params.force && std::fs::symlink_metadata(&path).is_ok() {
        return Err(Error::invalid(format!(
            "{} exists; pass --force (`force`) to replace it",
            path.display()
        )));
    }
    let objects: Vec<gix::ObjectId> = ids.iter().map(CheckpointId::object_id).collect();
    let objects = store
        .export_bundle(&objects, &path, params.force)
        .map_err(Error::BundleWrite)?;
    Ok(r::BundleWritten {
        path,
        checkpoints: ids,
        objects,
    })
}

/// Reads a git bundle's objects into the store and records a checkpoint (kind `imported`) for
/// each commit its refs name, oldest first, on one dialog.
pub fn import_bundle(
    p: &Project,
    o: &mut Opened,
    params: ImportBundleParams,
) -> Result<r::BundleImported> {
    let path = super::project::absolute(&params.path)?;
    if let Some(d) = &params.dialog {
        validate_dialog(d)?;
    }
    let store = &o.store;
    let objects = store
        .import_bundle_objects(&path)
        .map_err(|source| Error::Import {
            path: path.clone(),
            source,
        })?;
    let repo = store.repo();
    let result = (|| {
        let (candidates, not_imported) = store.import_candidates(&repo, &objects.header)?;
        // A tree no restore could write is refused here, not found out later.
        let mut heights = HashMap::new();
        for candidate in &candidates {
            let bad = unsafe_paths(&repo, candidate.tree, &mut heights, 10)?;
            if !bad.is_empty() {
                objects.discard();
                return Err(Error::invalid(format!(
                    "cannot import {}: commit {} holds paths no checkout may write ({}); \
                     nothing was imported",
                    path.display(),
                    candidate.commit,
                    bad.join(", ")
                )));
            }
        }
        let dialog = match &params.dialog {
            Some(d) => d.clone(),
            None => free_dialog_name(store, &repo, "imported")?,
        };
        let mut imported = Vec::new();
        for candidate in candidates {
            let new = NewCheckpoint {
                message_id: candidate.message_id,
                meta: candidate.meta,
                imported: Some(candidate.imported),
                ..NewCheckpoint::new(dialog.clone(), Kind::Imported, candidate.label)
            };
            let c = store.record_checkpoint(candidate.tree, candidate.skipped, new)?;
            emit_created(p, &c);
            imported.push(c);
        }
        Ok(r::BundleImported {
            path: path.clone(),
            dialog: (!imported.is_empty()).then_some(dialog),
            objects: objects.objects,
            imported: super::wire::checkpoints(imported),
            not_imported: not_imported.into_iter().map(Into::into).collect(),
        })
    })();
    // The new checkpoints' refs reach what matters now; gc may drop the rest.
    if let Some(keep) = &objects.keep {
        let _ = std::fs::remove_file(keep);
    }
    result
}

/// `base` if no dialog has that name, else the first free `base-2`, `base-3`, ...
fn free_dialog_name(store: &Store, repo: &gix::Repository, base: &str) -> Result<String> {
    for n in 1.. {
        let name = match n {
            1 => base.to_string(),
            n => format!("{base}-{n}"),
        };
        if !store.dialog_exists(repo, &name)? {
            return Ok(name);
        }
    }
    unreachable!("some dialog name is free")
}
