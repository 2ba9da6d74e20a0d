//! The store's values as the wire carries them: checkpoints, diffs and the upkeep reports, each
//! converted here so that `protocol` depends on the model alone and never on the store.

use crate::protocol::checkpoints::{
    ChangeStatus, Checkpoint, DiffResult, FileChange, Imported, RestoreLink, TurnField,
};
use crate::protocol::upkeep::{
    Affected, FsckReport, GcReport, NotImported, PruneReport, PrunedCheckpoint, Repair,
};
use crate::store;

impl From<store::Checkpoint> for Checkpoint {
    fn from(c: store::Checkpoint) -> Checkpoint {
        Checkpoint {
            id: c.id,
            parent: c.parent,
            tree: c.tree,
            dialog: c.dialog,
            seq: c.seq,
            session: c.session,
            kind: c.kind,
            label: c.label,
            message_id: c.message_id,
            created_at: c.created_at,
            files: c.files,
            added: c.added,
            modified: c.modified,
            deleted: c.deleted,
            skipped: c.skipped,
            tags: c.tags,
            notes: c.notes,
            restore: c.restore.map(|r| RestoreLink {
                restored_to: r.restored_to,
                undo: r.undo,
            }),
            imported: c.imported.map(|i| Imported {
                from: i.from,
                kind: i.kind,
                created_at: i.created_at,
                dialog: i.dialog,
                ref_name: i.ref_name,
            }),
            meta: c.meta,
            origin: c.origin,
            turn: c.point.as_ref().map(|t| TurnField::Of(t.turn)),
            tool: c.point.as_ref().and_then(|t| t.tool.clone()),
            step: c.point.as_ref().and_then(|t| t.seq),
            tool_use_id: c.point.as_ref().and_then(|t| t.tool_use_id.clone()),
            touched: c.point.map(|t| t.paths).unwrap_or_default(),
        }
    }
}

impl From<store::diff::FileChange> for FileChange {
    fn from(f: store::diff::FileChange) -> FileChange {
        use store::diff::ChangeStatus as S;
        FileChange {
            path: f.path,
            path_bytes: f.path_bytes,
            status: match f.status {
                S::Added => ChangeStatus::Added,
                S::Modified => ChangeStatus::Modified,
                S::Deleted => ChangeStatus::Deleted,
                S::ModeChanged => ChangeStatus::ModeChanged,
                S::TypeChanged => ChangeStatus::TypeChanged,
            },
            old_mode: f.old_mode,
            new_mode: f.new_mode,
            binary: f.binary,
            lines_added: f.lines_added,
            lines_removed: f.lines_removed,
        }
    }
}

impl From<store::diff::DiffResult> for DiffResult {
    fn from(d: store::diff::DiffResult) -> DiffResult {
        DiffResult {
            truncated: d.files_cut || d.next_offset.is_some(),
            files: d.files.into_iter().map(FileChange::from).collect(),
            patch: d.patch,
            files_total: None,
            next_offset: d.next_offset,
        }
    }
}

/// The checkpoints, as the wire carries them.
pub fn checkpoints(list: Vec<store::Checkpoint>) -> Vec<Checkpoint> {
    list.into_iter().map(Checkpoint::from).collect()
}

impl From<store::retention::PruneReport> for PruneReport {
    fn from(r: store::retention::PruneReport) -> PruneReport {
        PruneReport {
            pruned: r.pruned,
            pruned_checkpoints: r.pruned_checkpoints.into_iter().map(Into::into).collect(),
            kept: r.kept,
            dry_run: r.dry_run,
        }
    }
}

impl From<store::retention::PrunedCheckpoint> for PrunedCheckpoint {
    fn from(c: store::retention::PrunedCheckpoint) -> PrunedCheckpoint {
        PrunedCheckpoint {
            id: c.id,
            dialog: c.dialog,
            seq: c.seq,
            kind: c.kind,
            created_at: c.created_at,
            label: c.label,
        }
    }
}

impl From<store::gc::GcReport> for GcReport {
    fn from(g: store::gc::GcReport) -> GcReport {
        GcReport {
            objects: g.objects,
            loose_removed: g.loose_removed,
            packs_removed: g.packs_removed,
            bytes_before: g.bytes_before,
            bytes_after: g.bytes_after,
        }
    }
}

impl From<store::fsck::FsckReport> for FsckReport {
    fn from(f: store::fsck::FsckReport) -> FsckReport {
        FsckReport {
            objects: f.objects,
            unreadable: f.unreadable,
            unreadable_count: f.unreadable_count,
            damaged_packs: f.damaged_packs,
            affected: f
                .affected
                .into_iter()
                .map(|a| Affected {
                    id: a.id,
                    ref_name: a.ref_name,
                    missing: a.missing,
                })
                .collect(),
            journal_damage: f.journal_damage,
            affected_count: f.affected_count,
            repair: f.repair.map(|r| Repair {
                salvaged: r.salvaged,
                packs_set_aside: r.packs_set_aside,
                refs_set_aside: r.refs_set_aside,
                damaged_dir: r.damaged_dir,
            }),
        }
    }
}

impl From<store::import::NotImported> for NotImported {
    fn from(n: store::import::NotImported) -> NotImported {
        NotImported {
            from: n.from,
            ref_name: n.ref_name,
            reason: n.reason,
        }
    }
}
