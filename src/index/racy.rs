//! Racy entries: files read (or written by a restore) within a timestamp tick of a write, whose
//! stat cannot tell a later write in the same tick, so the next refresh reads them again — and
//! settling them once their window has passed, after the reply, so that the next checkpoint
//! reads only what changed.

use std::path::Path;

use gix::bstr::ByteSlice;

use super::file_index::{FileIndex, RACY_WINDOW_NS};
use crate::filter::{rel_to_abs, WalkEntry};
use crate::fs::{now_ns, Stat};
use crate::store::snapshot::{Captured, SnapshotOptions};
use crate::store::{Store, StoreError};

impl FileIndex {
    /// The moment the racy entries that can settle will all have left their window (see
    /// [`FileIndex::settle_racy`]), in nanoseconds since the epoch; `None` when none is still
    /// ahead. An mtime far in the future never leaves its window: such an entry is read again
    /// at every refresh, as before.
    pub fn settle_due(&self) -> Option<i64> {
        let now = now_ns();
        self.racy
            .iter()
            .filter_map(|rel| self.get(rel.as_bstr()))
            .map(|e| e.stat.mtime_ns.saturating_add(RACY_WINDOW_NS))
            .filter(|&due| due > now && due <= now.saturating_add(2 * RACY_WINDOW_NS))
            .max()
    }

    /// Reads again, without writing anything, the racy entries whose window has passed: one
    /// whose stat and content are still what the index holds is racy no more (a later write
    /// would now change its stat), which is what the next refresh would conclude; every other
    /// stays racy for the next refresh. Returns how many settled.
    pub fn settle_racy(
        &mut self,
        store: &Store,
        root: &Path,
        max_file_size: u64,
    ) -> Result<usize, StoreError> {
        let now = now_ns();
        let mut files = super::refresh::ToRead::default();
        for rel in &self.racy {
            let Some(entry) = self.get(rel.as_bstr()) else {
                continue;
            };
            if entry.stat.mtime_ns.saturating_add(RACY_WINDOW_NS) >= now {
                continue;
            }
            match std::fs::symlink_metadata(rel_to_abs(root, rel)) {
                Ok(meta) if Stat::of(&meta) == entry.stat => files.push(WalkEntry {
                    rel: rel.clone(),
                    stat: entry.stat,
                }),
                _ => {}
            }
        }
        if files.is_empty() {
            return Ok(0);
        }
        let options = SnapshotOptions {
            write: false,
            max_file_size,
        };
        let mut settled = 0;
        self.capture_changed(store, root, files, options, &mut |index, read, read_at| {
            for found in read {
                let Captured::File { rel, state, stat } = found else {
                    continue;
                };
                let same = index
                    .get(rel.as_bstr())
                    .is_some_and(|e| e.state == state && e.stat == stat);
                if same && stat.mtime_ns.saturating_add(RACY_WINDOW_NS) < read_at {
                    index.racy.remove(&rel);
                    settled += 1;
                }
            }
        })?;
        self.progress.start(0, 0);
        Ok(settled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Filter;
    use crate::fs::{now_ns, Stat};
    use crate::index::testing::read_once;
    use crate::store::snapshot::SnapshotOptions;
    use crate::store::tree::FileState;
    use crate::store::Store;

    use crate::index::file_index::{FileIndex, RACY_WINDOW_NS};
    use crate::index::node::IndexEntry;
    use gix::bstr::BString;
    use gix::objs::tree::EntryKind;

    fn settle(index: &mut FileIndex, store: &Store, filter: &Filter) -> usize {
        index.settle_racy(store, filter.root(), 1 << 20).unwrap()
    }

    fn past_the_window() {
        std::thread::sleep(std::time::Duration::from_nanos(
            RACY_WINDOW_NS as u64 + 20_000_000,
        ));
    }

    #[test]
    fn files_read_just_now_settle_only_once_their_window_has_passed() {
        let (_dir, store, filter, mut index) =
            read_once(&[("a.txt", "a"), ("sub/b.txt", "b"), ("c.txt", "c")]);
        assert_eq!(
            index.racy.len(),
            3,
            "files written just before the read are racy"
        );
        let due = index.settle_due().expect("a moment to settle them");
        assert!(due > now_ns() && due <= now_ns() + RACY_WINDOW_NS);
        assert_eq!(
            settle(&mut index, &store, &filter),
            0,
            "still in their window"
        );
        assert_eq!(index.racy.len(), 3);
        past_the_window();
        assert_eq!(index.settle_due(), None, "nothing is due later");
        assert_eq!(settle(&mut index, &store, &filter), 3);
        assert!(index.racy.is_empty());
    }

    #[test]
    fn an_entry_whose_file_differs_from_it_stays_racy_and_the_next_refresh_reads_it() {
        let (_dir, store, filter, mut index) = read_once(&[
            ("same.txt", "same"),
            ("changed.txt", "old"),
            ("lied.txt", "true"),
        ]);
        let root = filter.root().to_path_buf();
        past_the_window();
        // A write the stat shows: the file is left for the refresh.
        std::fs::write(root.join("changed.txt"), "new content").unwrap();
        // A write the stat cannot show (a rewrite within the same timestamp tick): the index
        // holds other content under the file's very stat.
        let lied = BString::from("lied.txt");
        let stat = index.get(lied.as_bstr()).unwrap().stat;
        let other = FileState {
            kind: EntryKind::Blob,
            id: gix::ObjectId::from_hex(b"0123456789012345678901234567890123456789").unwrap(),
        };
        index.insert(lied.as_bstr(), IndexEntry { state: other, stat });
        assert_eq!(
            settle(&mut index, &store, &filter),
            1,
            "only same.txt settles"
        );
        let racy: Vec<&BString> = index.racy.iter().collect();
        assert_eq!(racy, [&BString::from("changed.txt"), &lied]);
        // What stayed racy is read again, though no watcher reported it and its stat matches.
        let options = SnapshotOptions {
            write: true,
            max_file_size: 1 << 20,
        };
        let outcome = index
            .refresh(&store, &filter, Vec::new(), options, &mut |_| {})
            .unwrap();
        store.flush_objects().unwrap();
        assert_eq!(outcome.hashed, 2);
        assert_ne!(index.get(lied.as_bstr()).unwrap().state, other);
        assert_eq!(index.get(b"same.txt".as_bstr()).unwrap().stat.size, 4);
    }

    #[test]
    fn a_file_written_by_a_restore_is_racy_until_it_settles() {
        let (_dir, store, filter, mut index) = read_once(&[("r.txt", "before")]);
        past_the_window();
        assert_eq!(settle(&mut index, &store, &filter), 1);
        // What a restore does: write the file, record what it wrote, mark it.
        let path = filter.root().join("r.txt");
        std::fs::write(&path, "after!").unwrap();
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, b"after!")
            .unwrap();
        let entry = IndexEntry {
            state: FileState {
                kind: EntryKind::Blob,
                id,
            },
            stat: Stat::of(&std::fs::symlink_metadata(&path).unwrap()),
        };
        index.insert(b"r.txt".as_bstr(), entry);
        index.mark_written(&[BString::from("r.txt"), BString::from("not-there.txt")]);
        assert_eq!(
            index.racy.iter().collect::<Vec<_>>(),
            [&BString::from("r.txt")]
        );
        assert!(index.settle_due().is_some());
        assert_eq!(
            settle(&mut index, &store, &filter),
            0,
            "still in its window"
        );
        past_the_window();
        assert_eq!(settle(&mut index, &store, &filter), 1);
        assert!(index.racy.is_empty());
        // Long after a write, marking finds nothing recent.
        index.mark_written(&[BString::from("r.txt")]);
        assert!(index.racy.is_empty());
    }
}
