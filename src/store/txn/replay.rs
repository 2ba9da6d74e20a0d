//! Redoing the journal's records when a store is first opened: packs written again where a
//! crash lost them, ref changes made again where they were lost (never a ref moved backwards:
//! [`ref_targets`]), and damage reported as damage ([`report_end`]).

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::records::{End, Old, Record, JOURNAL_FILE};
use super::staged::StagedPack;
use crate::store::StoreError;

/// Writes every pack the records hold whose file is missing or differs, or that has no index
/// (flushed, with its index; an index that exists is `pack::repair_indices`' to check); returns
/// the paths it wrote or found, for settling. A pack that does not verify
/// against its name is an error: the journal is not trusted past it.
pub(crate) fn replay_packs(store: &Path, records: &[Record]) -> Result<Vec<PathBuf>, StoreError> {
    let pack_dir = store.join("objects").join("pack");
    let mut paths = Vec::new();
    for (name, bytes) in records.iter().flat_map(|r| &r.packs) {
        let path = pack_dir.join(format!("{name}.pack"));
        paths.push(path.clone());
        let on_disk = crate::fs::read_small(&path, bytes.len() as u64 + 1);
        // A pack whose index is missing (never renamed in) is written again with one: the
        // index repair only mends indices that exist. One that exists but differs is its job.
        let indexed = std::fs::symlink_metadata(path.with_extension("idx")).is_ok();
        if on_disk.as_deref() == Some(bytes.as_slice()) && indexed {
            continue;
        }
        let staged = StagedPack::from_pack(name, bytes.clone()).ok_or_else(|| StoreError::Io {
            path: store.join(JOURNAL_FILE),
            source: std::io::Error::other(format!("the journal's copy of {name} does not verify")),
        })?;
        std::fs::create_dir_all(&pack_dir).map_err(|source| StoreError::Io {
            path: pack_dir.clone(),
            source,
        })?;
        staged
            .publish(&pack_dir, true)
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        tracing::warn!(pack = %name, "wrote a pack again from the store's journal (it was lost, e.g. in a power cut)");
    }
    if !paths.is_empty() {
        paths.push(pack_dir);
    }
    Ok(paths)
}

/// What a ref holds now, for [`ref_targets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Current {
    Holds(Option<ObjectId>),
    /// Its file cannot be read (a power cut cut it short).
    Unreadable,
}

/// The refs to set, and to what (None: delete), to redo the records' changes that were lost:
/// each change, in order, is made where the ref holds the value the change found (`old`), so a
/// ref that is already past a change never moves back to it. A ref that cannot be read gets
/// the last value the records give it; a change from an earlier version's journal (its old
/// value unknown) is made as it is.
pub(crate) fn ref_targets(
    records: &[Record],
    mut current: impl FnMut(&str) -> Current,
) -> BTreeMap<String, Option<ObjectId>> {
    // Each ref's state as the changes are redone, and the state it started from.
    let mut now: BTreeMap<String, (Current, Current)> = BTreeMap::new();
    for change in records.iter().flat_map(|r| &r.refs) {
        let (state, _) = now.entry(change.name.clone()).or_insert_with(|| {
            let held = current(&change.name);
            (held, held)
        });
        let applies = match (*state, change.old) {
            (Current::Unreadable, _) | (_, Old::Unknown) => true,
            (Current::Holds(held), Old::Absent) => held.is_none(),
            (Current::Holds(held), Old::At(old)) => held == Some(old),
        };
        if applies {
            *state = Current::Holds(change.new);
        }
    }
    now.into_iter()
        .filter_map(|(name, (state, start))| match state {
            Current::Holds(value) if state != start => Some((name, value)),
            _ => None,
        })
        .collect()
}

/// The note of journal damage found and not yet set aside by `fsck --repair` (one line each).
pub const DAMAGE_NOTE: &str = "ckpt-journal-damage";

/// Says what `end` means, in the log and, for damage, in the store's [`DAMAGE_NOTE`] with a
/// copy of the journal beside it (in `damaged/`, which `fsck --repair` never deletes): called
/// before the journal is retired. `made` tells whether a cut record's refs show it was made.
pub(crate) fn report_end(store: &Path, end: &End, made: bool) {
    let what = match end {
        End::Clean => return,
        End::Cut { offset, .. } if !made => {
            tracing::warn!(store = %store.display(), offset, "the store's journal ends with a record cut short (a write interrupted, e.g. by a power cut): its operation was never acknowledged and is not redone");
            return;
        }
        End::Cut { offset, .. } => format!(
            "the journal's last record (at byte {offset}) does not verify although the refs it \
             moves hold its values: it was written whole and damaged since"
        ),
        End::Damaged { offset, later } => format!(
            "the journal's record at byte {offset} does not verify although {later} record(s) \
             after it do: damage to the file, not a power cut"
        ),
    };
    let when = jiff::Timestamp::now();
    let copy = store
        .join("damaged")
        .join(format!("journal-{}", when.as_millisecond()));
    let copied = std::fs::create_dir_all(store.join("damaged"))
        .and_then(|()| std::fs::copy(store.join(JOURNAL_FILE), &copy));
    let kept = match copied {
        Ok(_) => format!("a copy of the journal is {}", copy.display()),
        Err(e) => format!("the journal could not be copied: {e}"),
    };
    let what = format!("{what}; nothing from it on was redone and no ref moved backwards; {kept}");
    tracing::error!(store = %store.display(), "{what}");
    let line = format!("{when}: {what}\n");
    let note = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .mode(0o600)
        .open(store.join(DAMAGE_NOTE))
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    if let Err(e) = note {
        tracing::error!(store = %store.display(), error = %e, "cannot note the journal's damage for fsck");
    }
}

/// The journal damage noted and not yet set aside (see [`report_end`]).
pub(crate) fn noted_damage(store: &Path) -> Vec<String> {
    crate::fs::read_small(&store.join(DAMAGE_NOTE), 1 << 20)
        .map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}
