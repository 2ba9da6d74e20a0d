//! The journal under crashes, cut records, wrapped rings and damage.

use std::collections::BTreeMap;

use gix::ObjectId;

use super::super::records::{put_bytes, Old, RefChange, HEAD, MAGIC_V1};
use super::super::replay::{ref_targets, Current};
use super::*;

fn id(n: u8) -> ObjectId {
    ObjectId::from_bytes_or_panic(&[n; 20])
}

fn change(name: &str, old: Option<u8>, new: Option<u8>) -> RefChange {
    RefChange {
        name: name.into(),
        old: Old::of(old.map(id)),
        new: new.map(id),
    }
}

/// A dialog's ref moved from 0 to 1, 2, … `n`, one record each.
fn chain(n: u8) -> Vec<Record> {
    (1..=n)
        .map(|k| Record {
            packs: vec![],
            refs: vec![change(
                "refs/ckpt/dialogs/a",
                (k > 1).then_some(k - 1),
                Some(k),
            )],
        })
        .collect()
}

fn targets(records: &[Record], held: Current) -> BTreeMap<String, Option<ObjectId>> {
    ref_targets(records, |_| held)
}

#[test]
fn records_are_read_back_in_order_until_one_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::new(dir.path(), None);
    let one = Record {
        packs: vec![("pack-x".into(), b"bytes".to_vec())],
        refs: vec![change("refs/ckpt/dialogs/a", None, Some(1))],
    };
    let two = Record {
        packs: vec![],
        refs: vec![
            change("refs/ckpt/dialogs/a", Some(1), None),
            change("refs/ckpt/meta/b", None, Some(2)),
        ],
    };
    j.append(&one).unwrap();
    j.append(&two).unwrap();
    let read = read_records(dir.path());
    assert_eq!(read.epoch, Some(j.epoch));
    assert!(matches!(read.end, End::Clean));
    let read = read.records;
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].packs, one.packs);
    assert_eq!(read[0].refs, one.refs);
    assert_eq!(read[1].refs, two.refs);
    // Nothing was lost (each ref holds what the last record gave it): nothing to redo.
    let last = ref_targets(&read, |name| {
        Current::Holds((name == "refs/ckpt/meta/b").then(|| id(2)))
    });
    assert!(last.is_empty(), "{last:?}");
    // Everything was lost: both redone, in order (`a` ends where it began).
    let last = targets(&read, Current::Holds(None));
    assert!(!last.contains_key("refs/ckpt/dialogs/a"), "{last:?}");
    assert_eq!(last["refs/ckpt/meta/b"], Some(id(2)));
    let last = targets(&read, Current::Holds(Some(id(1))));
    assert_eq!(last["refs/ckpt/dialogs/a"], None);

    // A byte flipped in the second record, the last: only the first is read, and the
    // second is cut short (a power cut can do that).
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let second = one.encode(j.epoch).unwrap().len();
    bytes[second + HEAD + 3] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let read = read_records(dir.path());
    assert_eq!(read.records.len(), 1);
    assert!(matches!(read.end, End::Cut { .. }), "{:?}", read.end);
    // The first damaged too: none, and it is damage (a record after it verifies? no: the
    // second does not either), so still a cut.
    bytes[HEAD + 1] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(read_records(dir.path()).records.is_empty());
}

#[test]
fn a_new_epoch_hides_every_earlier_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::new(dir.path(), None);
    let r = |n| Record {
        packs: vec![],
        refs: vec![change(&format!("refs/ckpt/dialogs/d{n}"), None, Some(n))],
    };
    for n in 0..5 {
        j.append(&r(n)).unwrap();
    }
    j.retire().unwrap();
    assert!(read_records(dir.path()).records.is_empty());
    j.append(&r(9)).unwrap();
    let read = read_records(dir.path()).records;
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].refs, r(9).refs);
}

#[test]
fn a_full_journal_settles_and_starts_again_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::new(dir.path(), None);
    let settled = dir.path().join("written");
    std::fs::write(&settled, b"x").unwrap();
    let big = |n: u8| Record {
        packs: vec![(format!("pack-{n}"), vec![n; 1 << 20])],
        refs: vec![change("refs/ckpt/dialogs/a", None, Some(n))],
    };
    for n in 0..3 {
        j.append(&big(n)).unwrap();
    }
    j.unsettled([settled.clone()]);
    let first_epoch = j.epoch;
    j.append(&big(3)).unwrap();
    assert!(j.unsettled.is_empty(), "the old epoch's files were flushed");
    assert_ne!(j.epoch, first_epoch);
    let read = read_records(dir.path()).records;
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].refs, big(3).refs);
}

#[test]
fn a_journal_that_is_not_a_regular_file_is_refused_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(JOURNAL_FILE);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(read_records(dir.path()).records.is_empty());
    let mut j = Journal::new(dir.path(), None);
    let err = j.append(&Record::default()).unwrap_err();
    assert!(err.to_string().contains(JOURNAL_FILE), "{err}");
}

/// Damage to any one record of five: the records before it are read, it is told apart
/// from a power cut by the verifying records after it (or, for the last one, by refs that
/// already hold its values), and replaying what was read never moves the ref back.
#[test]
fn a_damaged_record_is_damage_and_never_moves_a_ref_back() {
    for damaged in 0..5usize {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::new(dir.path(), None);
        let mut starts = Vec::new();
        for record in chain(5) {
            starts.push(j.cursor);
            j.append(&record).unwrap();
        }
        let path = dir.path().join(JOURNAL_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        // In its payload; the last record's in its checksum (so its content still reads).
        let at = match damaged {
            4 => j.cursor as usize - 1,
            n => starts[n] as usize + HEAD + 6,
        };
        bytes[at] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let read = read_records(dir.path());
        assert_eq!(read.records.len(), damaged);
        let held = |_: &str| Some(id(5));
        match (&read.end, damaged) {
            (End::Cut { offset, .. }, 4) => {
                assert_eq!(*offset, starts[4]);
                assert!(read.end.cut_was_made(held), "the ref holds its value");
                assert!(!read.end.cut_was_made(|_| Some(id(4))), "a power cut");
            }
            (End::Damaged { offset, later }, n) => {
                assert_eq!(*offset, starts[n]);
                assert_eq!(*later, 4 - n);
            }
            (end, n) => panic!("record {n}: {end:?}"),
        }
        // The ref is at 5 (the crash lost nothing): it stays there.
        let redo = targets(&read.records, Current::Holds(Some(id(5))));
        assert!(redo.is_empty(), "record {damaged}: {redo:?}");
        // The ref file lost its last moves (a power cut): moved forward to what was read.
        if damaged > 1 {
            let redo = targets(&read.records, Current::Holds(Some(id(1))));
            assert_eq!(redo["refs/ckpt/dialogs/a"], Some(id(damaged as u8)));
        }
    }
}

/// The head of a record damaged beyond recognition (its magic): the records after it
/// still tell it is damage.
#[test]
fn a_damaged_head_is_found_by_the_records_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::new(dir.path(), None);
    let mut starts = Vec::new();
    for record in chain(3) {
        starts.push(j.cursor);
        j.append(&record).unwrap();
    }
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[starts[1] as usize] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let read = read_records(dir.path());
    assert_eq!(read.records.len(), 1);
    assert!(
        matches!(read.end, End::Damaged { later: 1, .. }),
        "{:?}",
        read.end
    );
}

/// Only changes the ref has not made yet are redone: one whose old value the ref holds.
#[test]
fn replay_moves_refs_only_forward() {
    let records = chain(3);
    let at = |n: Option<u8>| Current::Holds(n.map(id));
    let a = "refs/ckpt/dialogs/a";
    assert_eq!(targets(&records, at(None))[a], Some(id(3)));
    assert_eq!(targets(&records, at(Some(2)))[a], Some(id(3)));
    assert!(targets(&records, at(Some(3))).is_empty());
    // A value no record names (moved since by other means): left alone.
    assert!(targets(&records, at(Some(9))).is_empty());
    // Unreadable: the last value.
    assert_eq!(targets(&records, Current::Unreadable)[a], Some(id(3)));
    // A deletion then a new ref of the same name.
    let records = vec![
        Record {
            packs: vec![],
            refs: vec![change(a, Some(3), None)],
        },
        Record {
            packs: vec![],
            refs: vec![change(a, None, Some(7))],
        },
    ];
    assert_eq!(targets(&records, at(Some(3)))[a], Some(id(7)));
    assert!(targets(&records, at(Some(7))).is_empty());
}

/// Records of an earlier version's journal (no old values) still decode and are redone as
/// they were: the last value wins.
#[test]
fn records_without_old_values_still_read() {
    let mut payload = Vec::new();
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload.extend_from_slice(&1u32.to_le_bytes());
    put_bytes(&mut payload, b"refs/ckpt/dialogs/a");
    put_bytes(&mut payload, id(4).as_bytes());
    let record = Record::decode(&payload, MAGIC_V1).unwrap();
    assert_eq!(record.refs[0].old, Old::Unknown);
    assert_eq!(record.refs[0].new, Some(id(4)));
    let redo = targets(&[record], Current::Holds(Some(id(9))));
    assert_eq!(redo["refs/ckpt/dialogs/a"], Some(id(4)));
}
