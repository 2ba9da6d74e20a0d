//! The on-disk stat cache: every non-racy entry of the index, written atomically (temp file +
//! rename) with a trailing checksum. It only saves re-hashing after a restart; a missing,
//! foreign or corrupt file is ignored.

use std::io::{Read, Write};
use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use super::file_index::{FileIndex, StatCache};
use super::name::Name;
use super::node::IndexEntry;
use crate::filter::split_parent;
use crate::fs::Stat;
use crate::store::tree::FileState;

const MAGIC: &[u8; 8] = b"CKPTIDX1";

/// Bytes of an entry besides its path: path length, mode, id, size, mtime, ctime, inode, mode.
const ENTRY_BYTES: usize = 4 + 2 + 20 + 8 + 16 + 16 + 8 + 4;

/// Writes the index's stable entries to `path`, streaming: nothing of the size of the index
/// is built on the way (a first checkpoint of a large project is the daemon's peak).
pub fn save_stat_cache(index: &FileIndex, path: &Path) -> std::io::Result<()> {
    let stable = |rel: &BStr| !index.racy.contains(rel);
    // The checksum is git's blob hash of the body, whose header names the body's length.
    let mut body = MAGIC.len();
    index.for_each_file(|rel, _| {
        if stable(rel) {
            body += ENTRY_BYTES + rel.len();
        }
    });
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(format!("blob {body}\0").as_bytes());
    let tmp = path.with_extension("tmp");
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&tmp)?);
    let mut put = |bytes: &[u8]| {
        hasher.update(bytes);
        out.write_all(bytes)
    };
    let mut written = Ok(());
    put(MAGIC)?;
    index.for_each_file(|rel, e| {
        if written.is_err() || !stable(rel) {
            return;
        }
        let mut entry = Vec::with_capacity(ENTRY_BYTES + rel.len());
        entry.extend_from_slice(&(rel.len() as u32).to_le_bytes());
        entry.extend_from_slice(rel);
        entry.extend_from_slice(&(e.state.kind as u16).to_le_bytes());
        entry.extend_from_slice(e.state.id.as_bytes());
        entry.extend_from_slice(&e.stat.size.to_le_bytes());
        // 16 bytes each, as earlier builds wrote them.
        entry.extend_from_slice(&i128::from(e.stat.mtime_ns).to_le_bytes());
        entry.extend_from_slice(&i128::from(e.stat.ctime_ns).to_le_bytes());
        entry.extend_from_slice(&e.stat.ino.to_le_bytes());
        entry.extend_from_slice(&e.stat.mode.to_le_bytes());
        written = put(&entry);
    });
    written?;
    let sum = hasher
        .try_finalize()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    out.write_all(sum.as_bytes())?;
    out.into_inner().map_err(|e| e.into_error())?;
    std::fs::rename(&tmp, path)
}

/// Reads a stat cache; empty when missing or unusable.
pub fn load_stat_cache(path: &Path) -> StatCache {
    // Never blocks: a FIFO or a device in its place is refused, as is anything not a file.
    let file = match crate::fs::open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return StatCache::default(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ignoring an unusable stat cache; the next checkpoint re-reads every file");
            return StatCache::default();
        }
    };
    match parse(file) {
        Some(cache) => cache,
        None => {
            tracing::warn!(path = %path.display(), "ignoring an unusable stat cache; the next checkpoint re-reads every file");
            StatCache::default()
        }
    }
}

/// A timestamp as stored (16 bytes), clamped to what [`Stat`] holds.
fn nanos_of(bytes: &[u8]) -> Option<i64> {
    let v = i128::from_le_bytes(bytes.try_into().ok()?);
    Some(v.clamp(i64::MIN.into(), i64::MAX.into()) as i64)
}

/// Parses a stat cache as it is read (never the whole file in memory beside the entries it
/// makes: at a million files, the file alone is ~110 MB); None unless its checksum, at the
/// end, says the whole of it is as written.
fn parse(mut file: std::fs::File) -> Option<StatCache> {
    let len = file.metadata().ok()?.len();
    let body_len = len.checked_sub(20).filter(|n| *n >= MAGIC.len() as u64)?;
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(format!("blob {body_len}\0").as_bytes());
    let mut body = Body {
        file: &mut file,
        unread: body_len,
        buf: Vec::with_capacity(CHUNK),
        at: 0,
        hasher,
    };
    if body.take(MAGIC.len())? != MAGIC {
        return None;
    }
    let mut cache = StatCache::default();
    // Entries were written folder by folder: each folder's run is added at once.
    let mut folder = BString::default();
    let mut files: Vec<(Name, IndexEntry)> = Vec::new();
    while !body.is_done() {
        let len = u32::from_le_bytes(body.take(4)?.try_into().ok()?) as usize;
        let rel = BString::from(body.take(len)?);
        let rest = body.take(ENTRY_BYTES - 4)?;
        let mut r = Reader { data: rest };
        let kind = match u16::from_le_bytes(r.take(2)?.try_into().ok()?) {
            0o100644 => EntryKind::Blob,
            0o100755 => EntryKind::BlobExecutable,
            0o120000 => EntryKind::Link,
            _ => return None,
        };
        let id = ObjectId::try_from(r.take(20)?).ok()?;
        let stat = Stat {
            size: u64::from_le_bytes(r.take(8)?.try_into().ok()?),
            mtime_ns: nanos_of(r.take(16)?)?,
            ctime_ns: nanos_of(r.take(16)?)?,
            ino: u64::from_le_bytes(r.take(8)?.try_into().ok()?),
            mode: u32::from_le_bytes(r.take(4)?.try_into().ok()?),
        };
        let (parent, name) = split_parent(rel.as_bstr());
        if parent != folder.as_bstr() {
            cache.add_folder(folder.as_bstr(), std::mem::take(&mut files));
            folder = parent.to_owned();
        }
        let entry = IndexEntry {
            state: FileState { kind, id },
            stat,
        };
        files.push((Name::from(name), entry));
    }
    cache.add_folder(folder.as_bstr(), files);
    let computed = body.hasher.try_finalize().ok()?;
    let mut sum = [0u8; 20];
    file.read_exact(&mut sum).ok()?;
    (computed.as_bytes() == sum).then_some(cache)
}

/// How much of a stat cache is read at a time.
const CHUNK: usize = 1 << 16;

/// A stat cache's body (all but its checksum), read through a buffer that is hashed as it is
/// filled.
struct Body<'f> {
    file: &'f mut std::fs::File,
    /// Bytes of the body not read from the file yet.
    unread: u64,
    buf: Vec<u8>,
    /// Where the next `take` starts in `buf`.
    at: usize,
    hasher: gix::hash::Hasher,
}

impl Body<'_> {
    /// The next `n` bytes; None past the body's end or when the file cannot be read.
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.buf.len() - self.at < n {
            self.buf.drain(..self.at);
            self.at = 0;
            let missing = (n - self.buf.len()) as u64;
            if missing > self.unread {
                return None;
            }
            let more = missing.max(CHUNK as u64).min(self.unread) as usize;
            let start = self.buf.len();
            self.buf.resize(start + more, 0);
            self.file.read_exact(&mut self.buf[start..]).ok()?;
            self.hasher.update(&self.buf[start..]);
            self.unread -= more as u64;
        }
        let taken = &self.buf[self.at..self.at + n];
        self.at += n;
        Some(taken)
    }

    fn is_done(&self) -> bool {
        self.at == self.buf.len() && self.unread == 0
    }
}

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.data.len() < n {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Stat;
    use crate::index::file_index::FileIndex;
    use crate::index::name::Name;
    use crate::index::node::{DirNode, IndexEntry};
    use crate::store::tree::FileState;
    use gix::bstr::{BStr, BString};
    use gix::objs::tree::EntryKind;
    use gix::ObjectId;
    use std::collections::{BTreeMap, HashMap};

    fn entry(n: u8) -> IndexEntry {
        IndexEntry {
            state: FileState {
                kind: EntryKind::Blob,
                id: ObjectId::from_bytes_or_panic(&[n; 20]),
            },
            stat: Stat {
                size: n.into(),
                mtime_ns: 1_700_000_000_000_000_000 + i64::from(n),
                ctime_ns: -i64::from(n),
                ino: u64::from(n) << 40,
                mode: 0o100644,
            },
        }
    }

    /// The index holds one entry per file: it stays small (a million files, 64 MB of them).
    #[test]
    fn an_entry_is_64_bytes() {
        assert!(std::mem::size_of::<IndexEntry>() <= 64);
    }

    /// Files added to a folder together (a first read, a verify, a cache load) end up exactly
    /// as if inserted one by one, whichever way the folder is built: a later entry for a name
    /// wins, and a file replaces a folder of its name.
    #[test]
    fn files_added_together_equal_files_inserted_one_by_one() {
        let name = |n: u32| Name::from(BStr::new(format!("f{n:05}").as_bytes()));
        for known in [0u32, 3, 40, 400] {
            for added in [1u32, 7, 8, 50, 300] {
                let mut together = DirNode::default();
                let mut one_by_one = BTreeMap::new();
                for n in 0..known {
                    together.files.insert(name(n * 2), entry(1));
                    one_by_one.insert(name(n * 2), entry(1));
                }
                together.dirs.insert("f00003".into(), DirNode::default());
                // Unsorted, overlapping what is known, and naming one file twice.
                let mut files: Vec<(Name, IndexEntry)> =
                    (0..added).rev().map(|n| (name(n * 3), entry(2))).collect();
                files.push((name(0), entry(3)));
                for (n, e) in &files {
                    one_by_one.insert(n.clone(), *e);
                }
                together.add_files(files);
                assert_eq!(together.files, one_by_one, "known {known}, added {added}");
                // `f00003` is among the files added when at least two are.
                assert_eq!(together.dirs.contains_key(BStr::new("f00003")), added < 2);
            }
        }
    }

    /// Timestamps outside what an entry holds load clamped, not refused.
    #[test]
    fn stored_timestamps_are_clamped() {
        let far = (i128::from(i64::MAX) + 5).to_le_bytes();
        assert_eq!(nanos_of(&far), Some(i64::MAX));
        assert_eq!(nanos_of(&(-7i128).to_le_bytes()), Some(-7));
    }

    /// The streamed cache reads back as every stable entry (racy ones are left out), and its
    /// checksum is the one `parse` checks (git's blob hash of the body).
    #[test]
    fn a_saved_cache_loads_back_without_its_racy_entries() {
        let mut index = FileIndex::default();
        let paths = ["a.txt", "d/b.txt", "d/e/c.txt", "d/e/f/g/h.txt", "z"];
        for (n, p) in paths.iter().enumerate() {
            index.insert(BStr::new(p), entry(n as u8));
        }
        index.racy.insert("d/e/c.txt".into());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt-index");
        save_stat_cache(&index, &path).unwrap();
        let loaded = load_stat_cache(&path);
        let mut want: HashMap<BString, IndexEntry> = index.files().into_iter().collect();
        want.remove(BStr::new("d/e/c.txt"));
        assert_eq!(loaded.len(), 4);
        assert!(loaded.get(BStr::new("d/e/c.txt")).is_none());
        for (p, e) in &want {
            let got = loaded
                .get(p.as_bstr())
                .unwrap_or_else(|| panic!("{p} missing"));
            assert_eq!(got.state.id, e.state.id);
            assert_eq!(got.stat, e.stat);
        }
        let bytes = std::fs::read(&path).unwrap();
        let (body, sum) = bytes.split_at(bytes.len() - 20);
        let blob = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, body);
        assert_eq!(blob.unwrap().as_bytes(), sum);
        // Whatever part is damaged, cut or added, nothing of the cache is used.
        let mut damaged = vec![bytes[..bytes.len() - 1].to_vec(), bytes[..30].to_vec()];
        damaged.push([bytes.as_slice(), b"more"].concat());
        for at in [0, 9, 40, bytes.len() / 2, bytes.len() - 21, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            damaged.push(flipped);
        }
        // A path length past the end of the file (its checksum made right).
        let mut long = bytes[..bytes.len() - 20].to_vec();
        long[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let sum = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &long);
        long.extend_from_slice(sum.unwrap().as_bytes());
        damaged.push(long);
        for (n, bytes) in damaged.iter().enumerate() {
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(load_stat_cache(&path).len(), 0, "damage {n}");
        }
        assert_eq!(load_stat_cache(&dir.path().join("missing")).len(), 0);
        // In its place, a FIFO (nobody writes to it) or a folder: refused, never waited on.
        std::fs::remove_file(&path).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success());
        assert_eq!(load_stat_cache(&path).len(), 0);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(load_stat_cache(&path).len(), 0);
    }
}
