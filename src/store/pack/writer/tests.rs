//! The pack writer's own tests: what git reads back from the packs it writes.

use super::*;

/// Adds `data` to `pack` as a blob; returns its id.
fn add_blob(pack: &PackWriter, data: &[u8]) -> ObjectId {
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data).unwrap();
    pack.add(id, gix::objs::Kind::Blob, data).unwrap();
    id
}

/// What `git verify-pack -v` says of the pack of index `idx` (which it must accept).
fn verify_pack(idx: &Path) -> String {
    crate::testing::git([
        std::ffi::OsStr::new("verify-pack"),
        "-v".as_ref(),
        idx.as_os_str(),
    ])
}

/// The pack's set of ids tells apart ids that share their first 8 bytes (its hash), and
/// an id added twice is written once.
#[test]
fn ids_sharing_their_hash_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let pack = PackWriter::new_in(dir.path().to_path_buf()).unwrap();
    pack.reserve(3);
    let id = |last: u8| {
        let mut bytes = [7u8; 20];
        bytes[19] = last;
        ObjectId::from_bytes_or_panic(&bytes)
    };
    for round in 0..2 {
        for n in 0..200u8 {
            pack.add_raw(id(n), &[0x30 + round], 0).unwrap();
        }
    }
    let state = pack.lock();
    assert_eq!(state.entries.len(), 200);
    assert!((0..200).all(|n| state.holds(&id(n))));
    assert!(!state.holds(&id(200)));
    assert!(state
        .entries
        .iter()
        .enumerate()
        .all(|(n, e)| e.id == id(n as u8)));
}

/// A real pack of blobs, some of them twice, is what git reads back.
#[test]
fn a_pack_with_repeated_blobs_verifies_with_git() {
    let dir = tempfile::tempdir().unwrap();
    let pack = PackWriter::new_in(dir.path().to_path_buf()).unwrap();
    for n in 0..3000 {
        add_blob(&pack, format!("blob {}\n", n % 1000).as_bytes());
    }
    let (count, name) = pack.finish_named().unwrap();
    assert_eq!(count, 1000);
    let idx = dir.path().join(format!("{}.idx", name.unwrap()));
    let listed = verify_pack(&idx)
        .lines()
        .filter(|l| l.contains(" blob "))
        .count();
    assert_eq!(listed, 1000);
}

/// An operation's pack stores its first entries uncompressed and compresses the rest;
/// git reads every one back.
#[test]
fn a_quick_pack_stores_small_entries_and_git_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let pack = PackWriter::quick(dir.path()).unwrap();
    let text = |n: usize| format!("line {n} of a text that compresses well\n").repeat(n);
    let mut ids = Vec::new();
    for n in 0..400 {
        let data = text(n);
        ids.push((add_blob(&pack, data.as_bytes()), data.len()));
    }
    let (count, name) = pack.finish_named().unwrap();
    assert_eq!(count, 400);
    let idx = dir
        .path()
        .join("objects/pack")
        .join(format!("{}.idx", name.unwrap()));
    let listed = verify_pack(&idx);
    // `<id> blob <size> <size in pack> <offset>`
    let in_pack = |id: &ObjectId| {
        let line = listed
            .lines()
            .find(|l| l.starts_with(&id.to_string()))
            .unwrap();
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(2)
            .map(|f| f.parse().unwrap())
            .collect();
        (fields[1], fields[2])
    };
    let (first, size) = ids[50];
    let (stored, offset) = in_pack(&first);
    assert!(offset < QUICK_BYTES && stored > size as u64, "{listed}");
    let (last, size) = ids[399];
    let (compressed, offset) = in_pack(&last);
    assert!(
        offset > QUICK_BYTES && compressed < size as u64 / 4,
        "{listed}"
    );
}
