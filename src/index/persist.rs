//! The on-disk stat cache: every non-racy entry of the index, written atomically (temp file +
//! rename) with a trailing checksum. It only saves re-hashing after a restart; a missing,
//! foreign or corrupt file is ignored.

use std::collections::HashMap;
use std::path::Path;

use gix::bstr::BString;
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use super::{FileIndex, IndexEntry, Stat};
use crate::store::snapshot::FileState;

const MAGIC: &[u8; 8] = b"CKPTIDX1";

/// Writes the index's stable entries to `path`.
pub fn save_stat_cache(index: &FileIndex, path: &Path) -> std::io::Result<()> {
    let files = index.files();
    let mut out = Vec::with_capacity(64 + files.len() * 96);
    out.extend_from_slice(MAGIC);
    for (rel, e) in files.iter().filter(|(rel, _)| !index.racy.contains(*rel)) {
        out.extend_from_slice(&(rel.len() as u32).to_le_bytes());
        out.extend_from_slice(rel);
        out.extend_from_slice(&(e.state.kind as u16).to_le_bytes());
        out.extend_from_slice(e.state.id.as_bytes());
        out.extend_from_slice(&e.stat.size.to_le_bytes());
        out.extend_from_slice(&e.stat.mtime_ns.to_le_bytes());
        out.extend_from_slice(&e.stat.ctime_ns.to_le_bytes());
        out.extend_from_slice(&e.stat.ino.to_le_bytes());
        out.extend_from_slice(&e.stat.mode.to_le_bytes());
    }
    let sum = checksum(&out);
    out.extend_from_slice(sum.as_bytes());
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, &out)?;
    std::fs::rename(&tmp, path)
}

/// Reads a stat cache; empty when missing or unusable.
pub fn load_stat_cache(path: &Path) -> HashMap<BString, IndexEntry> {
    let Ok(data) = std::fs::read(path) else {
        return HashMap::new();
    };
    match parse(&data) {
        Some(map) => map,
        None => {
            tracing::warn!(path = %path.display(), "ignoring an unusable stat cache; the next checkpoint re-reads every file");
            HashMap::new()
        }
    }
}

fn checksum(data: &[u8]) -> ObjectId {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data)
        .expect("sha1 is always available")
}

fn parse(data: &[u8]) -> Option<HashMap<BString, IndexEntry>> {
    if data.len() < MAGIC.len() + 20 || &data[..8] != MAGIC {
        return None;
    }
    let (body, sum) = data.split_at(data.len() - 20);
    if checksum(body).as_bytes() != sum {
        return None;
    }
    let mut map = HashMap::new();
    let mut r = Reader { data: &body[8..] };
    while !r.data.is_empty() {
        let len = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
        let rel = BString::from(r.take(len)?);
        let kind = match u16::from_le_bytes(r.take(2)?.try_into().ok()?) {
            0o100644 => EntryKind::Blob,
            0o100755 => EntryKind::BlobExecutable,
            0o120000 => EntryKind::Link,
            _ => return None,
        };
        let id = ObjectId::try_from(r.take(20)?).ok()?;
        let stat = Stat {
            size: u64::from_le_bytes(r.take(8)?.try_into().ok()?),
            mtime_ns: i128::from_le_bytes(r.take(16)?.try_into().ok()?),
            ctime_ns: i128::from_le_bytes(r.take(16)?.try_into().ok()?),
            ino: u64::from_le_bytes(r.take(8)?.try_into().ok()?),
            mode: u32::from_le_bytes(r.take(4)?.try_into().ok()?),
        };
        map.insert(
            rel,
            IndexEntry {
                state: FileState { kind, id },
                stat,
            },
        );
    }
    Some(map)
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
