//! Pack indexes (version 2): written beside each pack ckpt writes, and rebuilt from a small
//! pack whose index a power cut left unfinished (a small pack's index is not flushed: it is
//! derived data, the pack is flushed).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use gix::ObjectId;

use super::small::SMALL_PACK_BYTES;
use crate::store::error::StoreError;
use crate::store::txn::files::{create_private, sha1, unique};

/// One entry of a pack, as its index lists it.
pub(crate) struct Written {
    pub(crate) id: ObjectId,
    pub(crate) offset: u64,
    pub(crate) crc32: u32,
}

/// Largest object read from a pack ckpt did not index itself (a bundle's, a pack whose index a
/// power cut left unfinished): ckpt never captures files larger than `max_file_size`, and this
/// leaves room for a larger setting. gix-pack refuses to allocate more for one object while it
/// indexes a pack, whatever size an entry declares.
pub const MAX_OBJECT_BYTES: u64 = 1 << 30;

/// The version 2 index of a pack whose entries are sorted by id.
pub(crate) fn index_bytes(entries: &[Written], pack_sum: ObjectId) -> Result<Vec<u8>, StoreError> {
    let out = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    write_index(entries, pack_sum, out).map_err(|e| StoreError::git("hashing", e))
}

/// Writes the version 2 index of `entries` (sorted by id) of the pack whose checksum is
/// `pack_sum` to `out` as it goes, hashed in the buffer's chunks: a pack's index is never whole
/// in memory (28 bytes an object). Returns `out`.
pub(crate) fn write_index<W: std::io::Write>(
    entries: &[Written],
    pack_sum: ObjectId,
    out: W,
) -> std::io::Result<W> {
    let hashing = gix::hash::io::Write::new(out, gix::hash::Kind::Sha1);
    let mut out = std::io::BufWriter::with_capacity(64 << 10, hashing);
    out.write_all(b"\xfftOc")?;
    out.write_all(&2u32.to_be_bytes())?;
    let mut fanout = [0u32; 256];
    for e in entries {
        fanout[e.id.as_bytes()[0] as usize] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        out.write_all(&total.to_be_bytes())?;
    }
    for e in entries {
        out.write_all(e.id.as_bytes())?;
    }
    for e in entries {
        out.write_all(&e.crc32.to_be_bytes())?;
    }
    let mut large = Vec::new();
    for e in entries {
        if e.offset < 0x8000_0000 {
            out.write_all(&(e.offset as u32).to_be_bytes())?;
        } else {
            out.write_all(&(0x8000_0000 | large.len() as u32).to_be_bytes())?;
            large.push(e.offset);
        }
    }
    for off in large {
        out.write_all(&off.to_be_bytes())?;
    }
    out.write_all(pack_sum.as_bytes())?;
    let gix::hash::io::Write { mut inner, hash } = out.into_inner().map_err(|e| e.into_error())?;
    let sum = hash.try_finalize().map_err(std::io::Error::other)?;
    inner.write_all(sum.as_bytes())?;
    Ok(inner)
}

/// Rebuilds the indices of small packs that do not match their pack: a small pack's index is
/// written without a flush (see [`PackWriter::finish_named`]), so a power cut may leave it cut
/// short or holding stale blocks, while the pack, flushed, is whole. Each is rebuilt from its
/// pack (which must verify: its checksum, every entry a whole object) and flushed. A pack that
/// does not verify is left as it is, for the store's damage check to report. Returns the packs
/// whose index was rebuilt.
pub(crate) fn repair_indices(pack_dir: &Path) -> Vec<String> {
    let Ok(listing) = std::fs::read_dir(pack_dir) else {
        return Vec::new();
    };
    let mut rebuilt = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".idx").filter(|s| s.starts_with("pack-")) else {
            continue;
        };
        let pack_path = pack_dir.join(format!("{stem}.pack"));
        // Both are read only as regular files (a FIFO is never read, so nothing blocks) and
        // never past the small-pack size.
        let Some(pack) = crate::fs::read_small(&pack_path, SMALL_PACK_BYTES) else {
            continue;
        };
        let idx = crate::fs::read_small(&entry.path(), 2 * SMALL_PACK_BYTES);
        if idx.is_some_and(|idx| index_matches(&idx, &pack)) {
            continue;
        }
        let Some(fresh) = index_from_pack(&pack) else {
            continue;
        };
        let tmp = pack_dir.join(format!("tmp_ckpt_{}_{}.idx", std::process::id(), unique()));
        let publish = || -> std::io::Result<()> {
            let mut f = create_private(&tmp)?;
            f.write_all(&fresh)?;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, entry.path())?;
            File::open(pack_dir)?.sync_all()
        };
        match publish() {
            Ok(()) => {
                tracing::warn!(pack = %stem, "rebuilt a pack's index from the pack (it did not match, e.g. after a power cut)");
                rebuilt.push(stem.to_string());
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(pack = %stem, error = %e, "cannot rebuild a pack's index");
            }
        }
    }
    rebuilt
}

/// Whether `idx` is a whole version 2 index of `pack`: its own checksum holds, it names the
/// pack's checksum and as many objects as the pack's header.
fn index_matches(idx: &[u8], pack: &[u8]) -> bool {
    const HEAD: usize = 8 + 256 * 4;
    if idx.len() < HEAD + 40 || pack.len() < 32 || !idx.starts_with(b"\xfftOc\0\0\0\x02") {
        return false;
    }
    let (body, own_sum) = idx.split_at(idx.len() - 20);
    let count = u32::from_be_bytes(idx[HEAD - 4..HEAD].try_into().expect("4 bytes"));
    body[body.len() - 20..] == pack[pack.len() - 20..]
        && pack[8..12] == count.to_be_bytes()
        && sha1(body).is_ok_and(|sum| sum.as_bytes() == own_sum)
}

/// The version 2 index of `pack`, from the pack alone, as gix-pack builds one (its entries
/// inflated to find where each ends and which object it is, deltas resolved). None when the
/// pack does not verify: its header, its checksum, an entry cut short or not whole.
pub(crate) fn index_from_pack(pack: &[u8]) -> Option<Vec<u8>> {
    use gix_pack::data::input::{BytesToEntriesIter, EntryDataMode, Mode};
    let entries = BytesToEntriesIter::new_from_header(
        pack,
        Mode::Verify,
        EntryDataMode::Crc32,
        gix::hash::Kind::Sha1,
    )
    .ok()?;
    let mut entries = entries.peekable();
    entries.peek()?;
    let owned = pack.to_vec();
    let resolver = move || Ok((entry_bytes, owned));
    let mut out = Vec::with_capacity(8 + 1024 + pack.len() / 16);
    let outcome = gix_pack::index::write_data_iter_to_stream(
        gix_pack::index::Version::V2,
        resolver,
        &mut entries,
        Some(1),
        &mut gix::progress::Discard,
        &mut out,
        &std::sync::atomic::AtomicBool::new(false),
        gix::hash::Kind::Sha1,
        Some(MAX_OBJECT_BYTES as usize),
        gix_pack::data::Version::V2,
    )
    .ok()?;
    // The pack's checksum is verified by the iterator; what it read must be the whole pack.
    (outcome.data_hash.as_bytes() == &pack[pack.len().checked_sub(20)?..]).then_some(out)
}

/// The bytes of an entry of the pack in memory (for gix-pack's index writer, which hands the
/// pack over as the resolver's own `&R`).
#[allow(clippy::ptr_arg)]
fn entry_bytes(range: gix_pack::data::EntryRange, pack: &Vec<u8>) -> Option<&[u8]> {
    pack.get(usize::try_from(range.start).ok()?..usize::try_from(range.end).ok()?)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::store::pack::writer::PackWriter;

    /// A pack of blobs, trees and a commit, some large enough to take several bytes of entry
    /// header; returns its name.
    fn sample_pack(dir: &Path) -> String {
        let pack = PackWriter::new_in(dir.to_path_buf()).unwrap();
        let add = |kind, data: Vec<u8>| {
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data).unwrap();
            pack.add(id, kind, &data).unwrap();
        };
        for n in 0..300 {
            add(
                gix::objs::Kind::Blob,
                format!("blob {n}\n").repeat(n * 7).into_bytes(),
            );
        }
        add(gix::objs::Kind::Blob, Vec::new());
        add(gix::objs::Kind::Tree, Vec::new());
        add(
            gix::objs::Kind::Commit,
            b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nmessage\n".to_vec(),
        );
        pack.finish_named().unwrap().1.unwrap()
    }

    /// A pack's index rebuilt from the pack alone is the index written with it, byte for
    /// byte; a pack that does not verify gives none.
    #[test]
    fn an_index_rebuilt_from_its_pack_is_the_one_written() {
        let dir = tempfile::tempdir().unwrap();
        let name = sample_pack(dir.path());
        let pack = std::fs::read(dir.path().join(format!("{name}.pack"))).unwrap();
        let idx = std::fs::read(dir.path().join(format!("{name}.idx"))).unwrap();
        assert!(index_matches(&idx, &pack));
        assert_eq!(index_from_pack(&pack).as_deref(), Some(idx.as_slice()));
        for at in [
            0,
            9,
            12,
            13,
            100,
            pack.len() / 2,
            pack.len() - 21,
            pack.len() - 1,
        ] {
            let mut bad = pack.clone();
            bad[at] ^= 0x40;
            assert_eq!(index_from_pack(&bad), None, "byte {at} flipped");
        }
        assert_eq!(index_from_pack(&pack[..pack.len() - 1]), None);
        assert_eq!(index_from_pack(&[]), None);
        let cut = &idx[..idx.len() - 1];
        assert!(!index_matches(cut, &pack));
        let mut stale = idx.clone();
        stale[1100..1200].fill(0);
        assert!(!index_matches(&stale, &pack));
    }

    /// Indices cut short, emptied or holding stale blocks are rebuilt from their packs and
    /// flushed; an index that matches is left alone, and a damaged pack's index is not rebuilt
    /// from it.
    #[test]
    fn indices_that_do_not_match_are_rebuilt_from_their_packs() {
        let dir = tempfile::tempdir().unwrap();
        let one_blob = |data: &[u8]| {
            let pack = PackWriter::new_in(dir.path().to_path_buf()).unwrap();
            let kind = gix::objs::Kind::Blob;
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, data).unwrap();
            pack.add(id, kind, data).unwrap();
            pack.finish_named().unwrap().1.unwrap()
        };
        let (a, b, c) = (sample_pack(dir.path()), one_blob(b"b"), one_blob(b"c"));
        let path = |stem: &str, ext: &str| dir.path().join(format!("{stem}.{ext}"));
        let original: Vec<Vec<u8>> = [&a, &b, &c]
            .iter()
            .map(|s| std::fs::read(path(s, "idx")).unwrap())
            .collect();
        assert!(
            repair_indices(dir.path()).is_empty(),
            "whole indices were rebuilt"
        );
        let overwrite = |p: PathBuf, bytes: &[u8]| {
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            std::fs::write(&p, bytes).unwrap();
        };
        overwrite(path(&a, "idx"), &original[0][..original[0].len() / 2]);
        let mut stale = original[1].clone();
        stale[8..1032].fill(0);
        overwrite(path(&b, "idx"), &stale);
        overwrite(path(&c, "idx"), b"");
        let mut rebuilt = repair_indices(dir.path());
        rebuilt.sort();
        let mut expected = vec![a.clone(), b.clone(), c.clone()];
        expected.sort();
        assert_eq!(rebuilt, expected);
        for (stem, bytes) in [&a, &b, &c].iter().zip(&original) {
            assert_eq!(&std::fs::read(path(stem, "idx")).unwrap(), bytes, "{stem}");
        }
        // A damaged pack: its index stays as it is, for the damage check to report.
        let mut pack = std::fs::read(path(&c, "pack")).unwrap();
        let last = pack.len() - 25;
        pack[last] ^= 1;
        overwrite(path(&c, "pack"), &pack);
        overwrite(path(&c, "idx"), b"short");
        assert!(repair_indices(dir.path()).is_empty());
        assert_eq!(std::fs::read(path(&c, "idx")).unwrap(), b"short");
        // A FIFO where an index should be is never opened for reading (that would block): it
        // is replaced by the index rebuilt from its pack.
        std::fs::remove_file(path(&b, "idx")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(path(&b, "idx"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(repair_indices(dir.path()), vec![b.clone()]);
        assert_eq!(std::fs::read(path(&b, "idx")).unwrap(), original[1]);
    }
}
