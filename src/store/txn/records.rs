//! The journal's records: what one holds (an operation's packs, and each ref it moved from
//! what to what), how it is written (magic, epoch, length, payload, SHA-1), and reading the
//! current epoch's records back, telling a record cut short by a power cut (only the last
//! can be) from a damaged one ([`End`]).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use gix::ObjectId;

use super::files::sha1;
use crate::store::StoreError;

/// The journal's file name in the store (git ignores files it does not know).
pub const JOURNAL_FILE: &str = "ckpt-journal";
/// The journal's largest size: records go from its start until the next would not fit.
pub(crate) const RING_BYTES: u64 = 4 << 20;
/// Records with each ref's previous value; [`MAGIC_V1`] ones (from earlier versions) have none.
pub(super) const MAGIC: &[u8; 8] = b"ckptjrn2";
pub(super) const MAGIC_V1: &[u8; 8] = b"ckptjrn1";
/// The old value of a change that did not check it (never made by the store itself).
const UNKNOWN: u8 = 0xff;
/// Magic, epoch, payload length.
pub(super) const HEAD: usize = 8 + 8 + 4;
pub(super) const SUM: usize = 20;

/// One operation's changes.
#[derive(Debug, Default)]
pub(crate) struct Record {
    /// Packs (`pack-<checksum>`, bytes).
    pub packs: Vec<(String, Vec<u8>)>,
    /// The refs it moved.
    pub refs: Vec<RefChange>,
}

/// One ref's move: from `old` (which the move checked it held) to `new` (None: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefChange {
    pub name: String,
    pub old: Old,
    pub new: Option<ObjectId>,
}

/// What a ref held before a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Old {
    Absent,
    At(ObjectId),
    /// Not recorded (a record of an earlier version's journal).
    Unknown,
}

impl Old {
    pub(crate) fn of(id: Option<ObjectId>) -> Old {
        id.map_or(Old::Absent, Old::At)
    }
}

impl Record {
    pub(super) fn encode(&self, epoch: u64) -> Result<Vec<u8>, StoreError> {
        let mut payload = Vec::new();
        payload.extend_from_slice(&(self.packs.len() as u32).to_le_bytes());
        for (name, bytes) in &self.packs {
            put_bytes(&mut payload, name.as_bytes());
            put_bytes(&mut payload, bytes);
        }
        payload.extend_from_slice(&(self.refs.len() as u32).to_le_bytes());
        for change in &self.refs {
            put_bytes(&mut payload, change.name.as_bytes());
            let old = match &change.old {
                Old::At(id) => id.as_bytes(),
                Old::Absent => &[],
                Old::Unknown => &[UNKNOWN],
            };
            put_bytes(&mut payload, old);
            put_bytes(
                &mut payload,
                change.new.as_ref().map_or(&[][..], |id| id.as_bytes()),
            );
        }
        let mut out = Vec::with_capacity(HEAD + payload.len() + SUM);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&epoch.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&payload);
        let sum = sha1(&out)?;
        out.extend_from_slice(sum.as_bytes());
        Ok(out)
    }

    /// Decodes a payload written with `magic`.
    pub(super) fn decode(payload: &[u8], magic: &[u8]) -> Option<Record> {
        let with_old = magic == MAGIC;
        let mut at = payload;
        let mut record = Record::default();
        for _ in 0..take_u32(&mut at)? {
            let name = String::from_utf8(take_bytes(&mut at)?.to_vec()).ok()?;
            record.packs.push((name, take_bytes(&mut at)?.to_vec()));
        }
        let id = |bytes: &[u8]| match bytes {
            [] => Some(None),
            id => ObjectId::try_from(id).ok().map(Some),
        };
        for _ in 0..take_u32(&mut at)? {
            let name = String::from_utf8(take_bytes(&mut at)?.to_vec()).ok()?;
            let old = match with_old {
                true => match take_bytes(&mut at)? {
                    [UNKNOWN] => Old::Unknown,
                    bytes => Old::of(id(bytes)?),
                },
                false => Old::Unknown,
            };
            let new = id(take_bytes(&mut at)?)?;
            record.refs.push(RefChange { name, old, new });
        }
        at.is_empty().then_some(record)
    }
}

pub(super) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn take_u32(at: &mut &[u8]) -> Option<u32> {
    let (n, rest) = at.split_first_chunk::<4>()?;
    *at = rest;
    Some(u32::from_le_bytes(*n))
}

fn take_bytes<'a>(at: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(at)? as usize;
    if at.len() < n {
        return None;
    }
    let (bytes, rest) = at.split_at(n);
    *at = rest;
    Some(bytes)
}

/// What the journal holds: the records of its current epoch, in order, up to the first that
/// cannot be read, and how that run of records ends.
#[derive(Debug, Default)]
pub(crate) struct Journaled {
    pub records: Vec<Record>,
    /// The current epoch (None: no record).
    pub epoch: Option<u64>,
    pub end: End,
}

/// How the run of readable records ends.
#[derive(Debug, Default)]
pub(crate) enum End {
    /// With the last record written (what follows is another epoch's, or nothing).
    #[default]
    Clean,
    /// With a record of the epoch that does not verify and is the last one: a write cut short
    /// (a power cut), unless the refs it names show it was made (see [`End::cut_was_made`]).
    /// `partial` is its content as far as it decodes, checksum aside.
    Cut {
        offset: u64,
        partial: Option<Record>,
    },
    /// With a record that does not verify although `later` records of the epoch after it do:
    /// damage to the file, never a power cut. They are not redone.
    Damaged { offset: u64, later: usize },
}

impl End {
    /// Whether a record that was cut short had been made whole: every ref it moves (at least
    /// one) holds the value it gives, as `current` reads them. Refs move only after their
    /// record is flushed, so such a record was complete, and damaged since.
    pub(crate) fn cut_was_made(&self, mut current: impl FnMut(&str) -> Option<ObjectId>) -> bool {
        match self {
            End::Cut {
                partial: Some(record),
                ..
            } => !record.refs.is_empty() && record.refs.iter().all(|c| current(&c.name) == c.new),
            _ => false,
        }
    }
}

/// One record read at an offset.
enum Read {
    /// A record of the expected epoch (or of any, when none is expected yet), and its length.
    Record(Record, u64, u64),
    /// The head of a record of the epoch (which it names) whose body does not verify; its
    /// content as far as it decodes.
    Broken(Option<Record>, u64),
    /// Nothing of the epoch here.
    Nothing,
}

fn read_at(file: &File, offset: u64, epoch: Option<u64>) -> Read {
    let mut head = [0u8; HEAD];
    if file.read_exact_at(&mut head, offset).is_err() {
        return Read::Nothing;
    }
    let magic = &head[..8];
    if magic != MAGIC && magic != MAGIC_V1 {
        return Read::Nothing;
    }
    let this = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
    if epoch.is_some_and(|e| e != this) {
        return Read::Nothing;
    }
    let len = u32::from_le_bytes(head[16..20].try_into().expect("4 bytes")) as u64;
    if offset + (HEAD + SUM) as u64 + len > RING_BYTES {
        return Read::Broken(None, this);
    }
    let mut rest = vec![0u8; len as usize + SUM];
    if file.read_exact_at(&mut rest, offset + HEAD as u64).is_err() {
        return Read::Broken(None, this);
    }
    let (payload, sum) = rest.split_at(len as usize);
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(&head);
    hasher.update(payload);
    let verified = hasher.try_finalize().is_ok_and(|s| s.as_bytes() == sum);
    match (verified, Record::decode(payload, magic)) {
        (true, Some(record)) => Read::Record(record, this, (HEAD + SUM) as u64 + len),
        (_, partial) => Read::Broken(partial, this),
    }
}

/// The records of the journal's current epoch (see [`Journaled`]). A journal that is
/// missing, is not a regular file or cannot be read has none.
pub(crate) fn read_records(store: &Path) -> Journaled {
    let mut out = Journaled::default();
    let Ok(file) = crate::fs::open_regular(&store.join(JOURNAL_FILE)) else {
        return out;
    };
    let mut offset = 0u64;
    loop {
        match read_at(&file, offset, out.epoch) {
            Read::Record(record, epoch, len) => {
                out.epoch = Some(epoch);
                // The marker that starts an epoch holds nothing to redo.
                if !record.packs.is_empty() || !record.refs.is_empty() {
                    out.records.push(record);
                }
                offset += len;
            }
            Read::Broken(partial, epoch) => {
                // The first record's epoch is the one its head names.
                out.end = match later_records(&file, offset, out.epoch.or(Some(epoch))) {
                    0 => End::Cut { offset, partial },
                    later => End::Damaged { offset, later },
                };
                return out;
            }
            Read::Nothing => {
                if out.epoch.is_some() {
                    // A head damaged beyond recognition is found by what follows it.
                    let later = later_records(&file, offset, out.epoch);
                    if later > 0 {
                        out.end = End::Damaged { offset, later };
                    }
                }
                return out;
            }
        }
    }
}

/// How many records of `epoch` verify after the damaged one at `offset` (found by their
/// magic and epoch, wherever they start).
fn later_records(file: &File, offset: u64, epoch: Option<u64>) -> usize {
    let Some(epoch) = epoch else {
        return 0;
    };
    let len = file.metadata().map_or(0, |m| m.len()).min(RING_BYTES);
    let mut bytes = vec![0u8; len.saturating_sub(offset + 1) as usize];
    if file.read_exact_at(&mut bytes, offset + 1).is_err() {
        return 0;
    }
    let mut pattern = MAGIC.to_vec();
    pattern.extend_from_slice(&epoch.to_le_bytes());
    let mut count = 0;
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], &pattern) {
        let start = offset + 1 + (at + found) as u64;
        if let Read::Record(_, _, len) = read_at(file, start, Some(epoch)) {
            count += 1;
            at += found + len as usize;
        } else {
            at += found + 1;
        }
    }
    count
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
