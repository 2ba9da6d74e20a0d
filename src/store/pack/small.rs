//! Which packs are small: an operation writes one (about one per checkpoint), and every lookup
//! visits every pack, so small packs are merged ([`Store::consolidate_packs`](crate::store::Store::consolidate_packs)) once there are
//! more than [`MAX_SMALL_PACKS`].

use std::path::Path;

/// Packs below this size count as small: their index is not flushed (it is rebuilt from the
/// pack), and they are merged by [`Store::consolidate_packs`](crate::store::Store::consolidate_packs).
pub const SMALL_PACK_BYTES: u64 = 4 << 20;
/// New small packs allowed before they are merged (each lookup and each check of the store
/// visits every pack, so fewer is faster; a merge copies compressed bytes, so it is cheap).
pub const MAX_SMALL_PACKS: usize = 8;

/// The small packs the next merge takes: under [`SMALL_PACK_BYTES`], not kept, and not one
/// larger than all smaller ones together (earlier merges' results), so a merge copies about
/// what arrived since the last one, not everything again: sizes stay a geometric series.
pub(crate) fn merge_candidates(store_dir: &Path) -> Vec<String> {
    let mut small = small_packs(store_dir);
    small.sort_by_key(|(_, size)| std::cmp::Reverse(*size));
    let mut rest: u64 = small.iter().map(|(_, size)| size).sum();
    let mut large = 0;
    for (_, size) in &small {
        rest -= size;
        if *size <= rest {
            break;
        }
        large += 1;
    }
    small.drain(..large);
    small.into_iter().map(|(stem, _)| stem).collect()
}

/// The names (`pack-<sum>`) and sizes of the store's small packs: under [`SMALL_PACK_BYTES`],
/// not kept.
fn small_packs(store_dir: &Path) -> Vec<(String, u64)> {
    let pack_dir = store_dir.join("objects").join("pack");
    let Ok(entries) = std::fs::read_dir(&pack_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".pack")?.to_string();
            let size = e.metadata().ok().map(|m| m.len())?;
            let kept = pack_dir.join(format!("{stem}.keep")).exists();
            (size < SMALL_PACK_BYTES && !kept).then_some((stem, size))
        })
        .collect()
}
