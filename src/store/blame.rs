//! Blame by checkpoint: for each line of a version of a file, the checkpoint it first appears in,
//! walking back from a checkpoint through the ones before it.
//!
//! The walk goes from a checkpoint to its parent, except from a `restore` checkpoint, whose
//! files came from the checkpoint it restored: the walk goes there, so a line a rewind brought
//! back is found where it was first written (git's blame would name the restore). Each step
//! compares the file's two versions line by line (Myers, bounded in time) only when their blobs
//! differ, each line numbered once when its version is read ([`LineIds`]); a file that appears from nothing in a step is followed to the file of the step before
//! that it was renamed from (the deleted file most of whose lines it shares, at least half, as
//! git's rename detection does). ckpt's own blame rather than gix's: gix-blame needs gix's
//! `blob-diff` feature set, and it would blame restored lines on the restore.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use super::checkpoint::{parse_id, Checkpoint, CheckpointError};
use super::tree::file_at;
use super::treediff::diff_trees;
use super::{Store, StoreError};
use crate::model::Kind;

/// How many checkpoints a walk looks at, at most.
const MAX_WALK: usize = 100_000;
/// How long one comparison of two versions may take before it settles for a coarser answer.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);
/// Bytes a walk reads through one handle before it makes the next (see [`Reader`]).
const RENEW_AFTER: u64 = 4 << 20;
/// What a step of a walk is charged besides its version: a commit and a tree read, each
/// mapping up to 64 KiB.
const STEP_BYTES: u64 = 128 << 10;
/// Files larger than this are not compared for renames.
const MAX_RENAME_BYTES: u64 = 4 << 20;

/// Where each line of a version came from.
#[derive(Debug)]
pub struct Blamed {
    /// The checkpoints walked, newest first: `walk[0]` is the one the walk started from.
    pub walk: Vec<Checkpoint>,
    /// For each line: the index in `walk` of the checkpoint it first appears in, or None for a
    /// line that `walk[0]` does not hold (written since).
    pub lines: Vec<Option<usize>>,
}

/// The lines of `data` as compared (their bytes, the newline left out).
fn lines_of(data: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', data) {
        lines.push(&data[start..end]);
        start = end + 1;
    }
    if start < data.len() {
        lines.push(&data[start..]);
    }
    lines
}

/// Lines as numbers: equal lines get the same id in every version of a walk, so that two
/// versions are compared as numbers (each line hashed once, when its version is read) instead
/// of byte by byte at every step of the comparison.
#[derive(Default)]
struct LineIds {
    ids: hashbrown::HashMap<Box<[u8]>, u32>,
}

impl LineIds {
    /// Forgets the lines of versions the walk has left once the map holds this many more than
    /// the version it keeps (see [`LineIds::keep_only`]).
    const SPARE: usize = 1 << 16;

    /// The ids of the lines of `data`, into `out`.
    fn number(&mut self, data: &[u8], out: &mut Vec<u32>) {
        out.clear();
        for line in lines_of(data) {
            let next = self.ids.len() as u32;
            let id = match self.ids.get(line) {
                Some(id) => *id,
                None => {
                    self.ids.insert(line.into(), next);
                    next
                }
            };
            out.push(id);
        }
    }

    /// Keeps the map to about what `kept` (the version the walk is at) holds: past
    /// [`LineIds::SPARE`] more lines, it is numbered afresh from its lines alone.
    fn keep_only(&mut self, kept: &mut Version) {
        if self.ids.len() > kept.ids.len() + Self::SPARE {
            self.ids.clear();
            let mut ids = std::mem::take(&mut kept.ids);
            self.number(&kept.data, &mut ids);
            kept.ids = ids;
        }
    }
}

/// A version of the file and the ids of its lines (see [`LineIds`]). Its buffers are reused
/// from version to version.
#[derive(Default)]
struct Version {
    data: Vec<u8>,
    ids: Vec<u32>,
}

impl Version {
    /// Reads blob `id` into this version, past the handle's cache of objects (each version is
    /// read once, and a cache full of them would keep megabytes the walk has done with), and
    /// numbers its lines; how many bytes it holds.
    fn load(
        &mut self,
        repo: &gix::Repository,
        id: ObjectId,
        numbers: &mut LineIds,
    ) -> Result<usize, StoreError> {
        use gix::objs::FindExt;
        uncached(repo)
            .find_blob(&id, &mut self.data)
            .map_err(|e| StoreError::git("reading a file", e))?;
        numbers.number(&self.data, &mut self.ids);
        Ok(self.data.len())
    }
}

/// The handle a walk reads through, made anew once it has read about [`RENEW_AFTER`] bytes:
/// the pack pages a read maps stay resident while its handle lives (a fault maps up to 64 KiB
/// around the object read), and a walk over hundreds of versions, the newest ones stored
/// whole and uncompressed, would otherwise hold them all at once.
struct Reader<'a> {
    store: &'a Store,
    repo: gix::Repository,
    /// Bytes charged to `repo` so far.
    charged: u64,
}

impl<'a> Reader<'a> {
    fn new(store: &'a Store) -> Result<Self, StoreError> {
        Ok(Reader {
            store,
            repo: store.detached_handle()?,
            charged: 0,
        })
    }

    /// The handle for one step of the walk (a commit and a tree read, a version maybe).
    fn step(&mut self) -> Result<&gix::Repository, StoreError> {
        if self.charged >= RENEW_AFTER {
            self.repo = self.store.detached_handle()?;
            self.charged = 0;
        }
        self.charged += STEP_BYTES;
        Ok(&self.repo)
    }

    /// Charges the bytes of a version read.
    fn charge(&mut self, bytes: usize) {
        self.charged += bytes as u64;
    }
}

/// The store's objects without the handle's cache of objects read.
fn uncached(repo: &gix::Repository) -> &impl gix::objs::Find {
    // `objects` is the in-memory layer over the cache over the store's handle.
    &**repo.objects
}

/// For each line of `new`, the line of `old` it is (None: added in `new`).
fn matching<T: Ord + std::hash::Hash>(old: &[T], new: &[T]) -> Vec<Option<usize>> {
    let mut map = vec![None; new.len()];
    let deadline = Instant::now() + DIFF_DEADLINE;
    for op in
        similar::capture_diff_slices_deadline(similar::Algorithm::Myers, old, new, Some(deadline))
    {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for k in 0..len {
                map[new_index + k] = Some(old_index + k);
            }
        }
    }
    map
}

/// The share of lines two versions have in common (0 to 1).
fn similarity(a: &[u8], b: &[u8]) -> f64 {
    let (a, b) = (lines_of(a), lines_of(b));
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let common = matching(&a, &b).iter().filter(|m| m.is_some()).count();
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

impl Store {
    /// Blames `current` (a version of the file at `path`) by the checkpoints before `head`.
    pub fn blame(
        &self,
        head: Checkpoint,
        path: &BStr,
        current: &[u8],
    ) -> Result<Blamed, CheckpointError> {
        let mut files = Files::default();
        let mut walk = vec![head];
        let mut path = BString::from(path);
        let mut numbers = LineIds::default();
        let mut current_ids = Vec::new();
        numbers.number(current, &mut current_ids);
        // Lines of the current version still to place, by their index in the version the walk
        // is at (`at`).
        let mut open: Vec<(usize, usize)> = Vec::new();
        let mut lines = vec![None; current_ids.len()];
        let mut reader = Reader::new(self)?;
        // Retention cut the history below these: the walk stops there, cleanly.
        let cut = self.shallow()?;
        let repo = reader.step()?;
        let Some(mut at_blob) = files.at(repo, parse_id(&walk[0].tree)?, path.as_bstr())? else {
            return Ok(Blamed { walk, lines });
        };
        let (mut at, mut before_version) = (Version::default(), Version::default());
        let read = at.load(repo, at_blob, &mut numbers)?;
        reader.charge(read);
        for (line, index) in matching(&at.ids, &current_ids).into_iter().enumerate() {
            if let Some(index) = index {
                open.push((line, index));
            }
        }
        while !open.is_empty() {
            let i = walk.len() - 1;
            let repo = reader.step()?;
            let previous = match self.previous(repo, &walk[i], &cut)? {
                Some(p) if walk.len() < MAX_WALK => p,
                _ => break,
            };
            let previous_tree = parse_id(&previous.tree)?;
            let mut before = files.at(repo, previous_tree, path.as_bstr())?;
            if before.is_none() {
                if let Some((renamed, state)) =
                    self.renamed_from(repo, previous_tree, parse_id(&walk[i].tree)?, &at.data)?
                {
                    path = renamed;
                    before = Some(state);
                }
            }
            walk.push(previous);
            let Some(before) = before else {
                // The file appears at walk[i]: so does every line still open.
                for (line, _) in open.drain(..) {
                    lines[line] = Some(i);
                }
                break;
            };
            if before == at_blob {
                continue;
            }
            numbers.keep_only(&mut at);
            let read = before_version.load(repo, before, &mut numbers)?;
            reader.charge(read);
            let map = matching(&before_version.ids, &at.ids);
            open.retain_mut(|(line, at)| match map[*at] {
                Some(old) => {
                    *at = old;
                    true
                }
                None => {
                    lines[*line] = Some(i);
                    false
                }
            });
            std::mem::swap(&mut at, &mut before_version);
            at_blob = before;
        }
        // What is left is as old as the last checkpoint walked.
        let last = walk.len() - 1;
        for (line, _) in open {
            lines[line] = Some(last);
        }
        Ok(Blamed { walk, lines })
    }

    /// The checkpoint a walk goes to from `c`: the one it restored, else its parent; none
    /// past a retention cut (`cut`: the checkpoints whose parents were pruned).
    fn previous(
        &self,
        repo: &gix::Repository,
        c: &Checkpoint,
        cut: &std::collections::HashSet<ObjectId>,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        // A restore continues from what it restored, when this store has it (another person's
        // restore may name a checkpoint that was sent with another id).
        if let (Kind::Restore, Some(link)) = (&c.kind, &c.restore) {
            if let Ok(restored) = self.checkpoint(repo, link.restored_to.object_id()) {
                return Ok(Some(restored));
            }
        }
        if cut.contains(&c.id.object_id()) {
            return Ok(None);
        }
        c.parent
            .map(|id| self.checkpoint(repo, id.object_id()))
            .transpose()
    }

    fn blob(&self, repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>, StoreError> {
        use gix::objs::FindExt;
        let mut data = Vec::new();
        uncached(repo)
            .find_blob(&id, &mut data)
            .map_err(|e| StoreError::git("reading a file", e))?;
        Ok(data)
    }

    /// The file of tree `old` that `data` (new in tree `new`) was renamed from: a file deleted
    /// between them sharing at least half its lines, the most similar one.
    fn renamed_from(
        &self,
        repo: &gix::Repository,
        old: ObjectId,
        new: ObjectId,
        data: &[u8],
    ) -> Result<Option<(BString, ObjectId)>, StoreError> {
        let mut best: Option<(f64, BString, ObjectId)> = None;
        for change in diff_trees(repo, Some(old), Some(new), &[])? {
            let (Some(gone), None) = (change.old, change.new) else {
                continue;
            };
            if !matches!(gone.kind, EntryKind::Blob | EntryKind::BlobExecutable) {
                continue;
            }
            let header = repo
                .find_header(gone.id)
                .map_err(|e| StoreError::git("reading a file", e))?;
            if header.size() > MAX_RENAME_BYTES {
                continue;
            }
            let score = similarity(&self.blob(repo, gone.id)?, data);
            if score >= 0.5 && best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                best = Some((score, change.path, gone.id));
            }
        }
        Ok(best.map(|(_, path, id)| (path, id)))
    }
}

/// Files looked up by tree and path, remembered (consecutive checkpoints share most trees).
#[derive(Default)]
struct Files(HashMap<(ObjectId, BString), Option<ObjectId>>);

impl Files {
    /// The blob of the regular file at `path` in tree `tree`.
    fn at(
        &mut self,
        repo: &gix::Repository,
        tree: ObjectId,
        path: &BStr,
    ) -> Result<Option<ObjectId>, StoreError> {
        let key = (tree, BString::from(path));
        if let Some(found) = self.0.get(&key) {
            return Ok(*found);
        }
        let found = file_at(repo, tree, path)?.map(|f| f.id);
        self.0.insert(key, found);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_matched_across_versions() {
        let old = lines_of(b"a\nb\nc\n");
        let new = lines_of(b"a\nx\nb\nc\nd");
        assert_eq!(
            matching(&old, &new),
            [Some(0), None, Some(1), Some(2), None]
        );
        assert_eq!(lines_of(b""), Vec::<&[u8]>::new());
        assert!((similarity(b"a\nb\n", b"a\nb\n") - 1.0).abs() < 1e-9);
        assert!(similarity(b"a\nb\nc\nd\n", b"x\ny\nz\nd\n") < 0.5);
    }

    #[test]
    fn line_ids_agree_across_versions_after_the_map_is_trimmed() {
        let mut numbers = LineIds::default();
        let mut at = Version {
            data: b"a\nb\nc\n".to_vec(),
            ids: Vec::new(),
        };
        numbers.number(&at.data, &mut at.ids);
        // Versions the walk has left fill the map past what it keeps.
        let left: Vec<u8> = (0..LineIds::SPARE + 10)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        numbers.number(&left, &mut Vec::new());
        numbers.keep_only(&mut at);
        assert_eq!(numbers.ids.len(), 3, "only the kept version's lines remain");
        let mut before = Vec::new();
        numbers.number(b"b\nc\nd", &mut before);
        assert_eq!(matching(&before, &at.ids), [None, Some(0), Some(1)]);
        assert_eq!(lines_of(b"b\nc\nd"), [&b"b"[..], b"c", b"d"]);
        assert_eq!(lines_of(b"\n"), [&b""[..]]);
    }
}
