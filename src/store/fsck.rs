//! Damage: the cheap checks made before every operation (the store's layout, every pack's
//! trailer against its index), and `fsck`, which reads every object a ref reaches and says
//! which checkpoints lost what.
//!
//! A damaged store is never used silently: operations refuse with what is damaged until
//! `fsck --repair` has salvaged every object that can still be read out of a damaged pack
//! into a new pack and set the damaged files aside (in `<store>/damaged/`, never deleted).
//! Refs whose commits are gone are set aside there too. After a repair the daemon re-reads
//! every file whose object the store lost, so new checkpoints never name an unreadable blob.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::error::StoreError;
use super::open::Store;
use super::pack::writer::PackWriter;
use super::txn::files::{stamp_of, PackStamp};

/// Affected checkpoints listed in a report (the count is always complete).
const MAX_LISTED: usize = 100;

/// What `fsck` found (and, with `repair`, did).
#[derive(Debug, Clone, Default)]
pub struct FsckReport {
    /// Objects read (every object some ref reaches).
    pub objects: usize,
    /// Objects a ref reaches that cannot be read (first 100).
    pub unreadable: Vec<String>,
    pub unreadable_count: usize,
    /// Packs whose file does not match its index (truncated, overwritten).
    pub damaged_packs: Vec<String>,
    /// Checkpoints (commits) that cannot be restored whole: `{id, ref_name, missing}`.
    pub affected: Vec<Affected>,
    /// Damage found in the store's journal (when the store was opened, or now), in words:
    /// records that do not verify where a power cut cannot explain it.
    pub journal_damage: Vec<String>,
    pub affected_count: usize,
    /// With `repair`: objects salvaged from damaged packs, refs set aside, where things went.
    pub repair: Option<Repair>,
    /// Every unreadable object (the daemon reads again the files that named one).
    pub unreadable_ids: HashSet<ObjectId>,
}

#[derive(Debug, Clone)]
pub struct Affected {
    pub id: String,
    /// The ref through which it was reached.
    pub ref_name: String,
    /// How many of its objects (its files, trees, or the commit itself) cannot be read.
    pub missing: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Repair {
    pub salvaged: usize,
    pub packs_set_aside: Vec<String>,
    pub refs_set_aside: Vec<String>,
    pub damaged_dir: PathBuf,
}

impl Store {
    /// Puts back the parts of a store's layout that a bare repository needs to open (HEAD,
    /// `objects/`, `refs/`), so that `fsck --repair` can look at what is left.
    pub fn repair_layout(dir: &Path) {
        if !dir.is_dir() {
            return;
        }
        for sub in ["objects/pack", "objects/info", "refs/heads", "refs/tags"] {
            let _ = std::fs::create_dir_all(dir.join(sub));
        }
        if !dir.join("HEAD").is_file() {
            let _ =
                super::txn::files::write_atomically(&dir.join("HEAD"), b"ref: refs/heads/main\n");
        }
        if !dir.join("config").is_file() {
            let _ = super::txn::files::write_atomically(
                &dir.join("config"),
                b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\tlogallrefupdates = always\n[gc]\n\tauto = 0\n",
            );
        }
    }

    /// Cheap checks of the store's layout and of every pack (its trailer must be the checksum
    /// its index names): what is damaged, in words; empty when nothing is. Where the store's
    /// folders are watched (see [`super::sentinel`]), only the packs that changed since the
    /// last check are looked at again, and the layout only when part of it was created,
    /// removed or renamed; everything is, the first time and for as long as damage is known.
    pub fn damage(&self) -> Vec<String> {
        let seen = self.inbox.as_ref().map(|inbox| inbox.take());
        if let Some(seen) = seen.filter(|s| !s.all) {
            let found: Vec<String> = self
                .check_packs(Some(&seen.names))
                .iter()
                .map(|pack| not_matching(pack))
                .collect();
            if !found.is_empty() {
                self.ask_full_check();
            }
            return found;
        }
        // Watched again first: what changes from here on is either seen below or reported.
        if let Some(inbox) = &self.inbox {
            inbox.rewatch(self.dir());
        }
        let mut found = Vec::new();
        for (name, dir) in [
            ("HEAD", false),
            ("config", false),
            ("objects", true),
            ("refs", true),
        ] {
            let ok = std::fs::symlink_metadata(self.dir().join(name)).is_ok_and(|m| {
                if dir {
                    m.is_dir()
                } else {
                    m.is_file()
                }
            });
            if !ok {
                found.push(format!("{name} is missing"));
            }
        }
        for pack in self.damaged_packs() {
            found.push(not_matching(&pack));
        }
        if !found.is_empty() {
            self.ask_full_check();
        }
        found
    }

    /// The next [`Store::damage`] checks everything (damage is reported every time).
    fn ask_full_check(&self) {
        if let Some(inbox) = &self.inbox {
            inbox.ask_all();
        }
    }

    /// Packs whose data file does not end with the checksum their index names (a pack
    /// without its index is one being written, not damage). Results are cached by stat.
    fn damaged_packs(&self) -> Vec<String> {
        self.check_packs(None)
    }

    /// The packs of `only` (names of files in the pack folder), or of the whole folder (None),
    /// that do not match their index.
    fn check_packs(&self, only: Option<&BTreeSet<String>>) -> Vec<String> {
        use rustix::fs::{AtFlags, Dir, Mode, OFlags};
        let pack_dir = self.dir().join("objects").join("pack");
        // Looked at through the folder's descriptor: one lookup of the store's path per
        // operation, not two per pack.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let Ok(dir) = rustix::fs::open(&pack_dir, flags, Mode::empty()) else {
            return Vec::new();
        };
        let stamp = |name: &str| {
            rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|m| stamp_of(&m))
        };
        let mut checked = self.durable.checked_packs.lock();
        let mut damaged = Vec::new();
        // Whether `stem` has an index (is a pack); damage goes to `damaged`.
        let mut check = |stem: &str, checked: &mut HashMap<String, PackStamp>| {
            let idx = format!("{stem}.idx");
            let key = (stamp(&idx), stamp(&format!("{stem}.pack")));
            if key.0.is_none() {
                return false;
            }
            if checked.get(stem) != Some(&key) {
                let pack = pack_dir.join(format!("{stem}.pack"));
                if pack_matches_index(&pack, &pack_dir.join(&idx)) {
                    checked.insert(stem.to_string(), key);
                } else {
                    checked.remove(stem);
                    damaged.push(stem.to_string());
                }
            }
            true
        };
        let vanished = match only {
            Some(names) => {
                let stems: BTreeSet<&str> = names
                    .iter()
                    .filter_map(|n| n.strip_suffix(".idx").or_else(|| n.strip_suffix(".pack")))
                    .collect();
                let mut vanished = false;
                for stem in stems {
                    if !check(stem, &mut checked) {
                        vanished |= checked.remove(stem).is_some();
                    }
                }
                vanished
            }
            None => {
                let Ok(mut entries) = Dir::read_from(&dir) else {
                    return Vec::new();
                };
                let mut listed = HashSet::new();
                while let Some(Ok(entry)) = entries.read() {
                    let name = entry.file_name().to_string_lossy();
                    let Some(stem) = name.strip_suffix(".idx") else {
                        continue;
                    };
                    if check(stem, &mut checked) {
                        listed.insert(stem.to_string());
                    }
                }
                let before = checked.len();
                checked.retain(|stem, _| listed.contains(stem));
                checked.len() != before
            }
        };
        // A pack this handle had checked is gone: someone else (`git gc`) replaced it. Loaded
        // indices of removed packs would still vouch for their objects.
        if vanished {
            self.packs_vanished
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        damaged.sort();
        damaged
    }

    /// Whether packs this handle knew were removed by someone else since the last call (the
    /// caller reopens the store).
    pub fn take_packs_vanished(&self) -> bool {
        self.packs_vanished
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// Reads every object a ref reaches; with `repair`, first salvages damaged packs and
    /// afterwards sets aside refs whose commits are gone.
    #[tracing::instrument(skip_all, fields(store = %self.dir().display(), repair))]
    pub fn fsck(&mut self, repair: bool) -> Result<FsckReport, StoreError> {
        let mut report = FsckReport {
            damaged_packs: self.damaged_packs(),
            journal_damage: self.journal_damage(),
            ..FsckReport::default()
        };
        let damaged_dir = self.dir().join("damaged");
        if repair {
            self.set_journal_damage_aside(&damaged_dir)?;
            // No journal record may name a pack set aside (a redo would write it again).
            self.retire_journal()?;
            Self::repair_layout(self.dir());
            let mut done = Repair {
                damaged_dir: damaged_dir.clone(),
                ..Repair::default()
            };
            for pack in &report.damaged_packs {
                done.salvaged += self.salvage(pack, &damaged_dir)?;
                done.packs_set_aside.push(pack.clone());
            }
            *self = Store::open(self.dir())?;
            report.repair = Some(done);
        }
        let repo = self.repo();
        let refs = self.refs_under(&repo, "refs/")?;
        let mut readable: HashMap<ObjectId, bool> = HashMap::new();
        let mut unreadable: HashSet<ObjectId> = HashSet::new();
        let shallow = self.shallow().unwrap_or_default();
        for (name, id) in &refs {
            let missing = count_missing(&repo, *id, &shallow, &mut readable, &mut unreadable);
            if missing > 0 {
                report.affected_count += 1;
                if report.affected.len() < MAX_LISTED {
                    report.affected.push(Affected {
                        id: id.to_string(),
                        ref_name: format!("refs/{name}"),
                        missing,
                    });
                }
            }
        }
        report.objects = readable.len();
        report.unreadable_count = unreadable.len();
        report.unreadable_ids = unreadable.clone();
        let mut listed: Vec<String> = unreadable.iter().map(ToString::to_string).collect();
        listed.sort();
        listed.truncate(MAX_LISTED);
        report.unreadable = listed;
        if let Some(done) = report.repair.as_mut() {
            // A ref whose own object is gone leads nowhere: set it aside (listed, not lost).
            let mut lines = String::new();
            for (name, id) in &refs {
                if unreadable.contains(id) {
                    let full = format!("refs/{name}");
                    let mut txn = self.begin();
                    txn.delete(&full, *id)?;
                    txn.commit("deleting")?;
                    lines.push_str(&format!("{id} {full}\n"));
                    done.refs_set_aside.push(full);
                }
            }
            if !lines.is_empty() {
                std::fs::create_dir_all(&damaged_dir).map_err(|source| StoreError::Io {
                    path: damaged_dir.clone(),
                    source,
                })?;
                let file =
                    damaged_dir.join(format!("refs-{}.txt", jiff::Timestamp::now().as_second()));
                super::txn::files::write_atomically(&file, lines.as_bytes())?;
            }
        }
        tracing::info!(
            objects = report.objects,
            unreadable = report.unreadable_count,
            affected = report.affected_count,
            damaged_packs = report.damaged_packs.len(),
            "fsck done"
        );
        Ok(report)
    }

    /// The journal damage noted when the store was opened, and any in its live records.
    fn journal_damage(&self) -> Vec<String> {
        let mut found = super::txn::replay::noted_damage(self.dir());
        // Under the journal's lock: no record is being written meanwhile.
        let journal = self.durable.journal.lock();
        if let super::txn::records::End::Damaged { offset, later } =
            super::txn::records::read_records(self.dir()).end
        {
            found.push(format!(
                "the journal's record at byte {offset} does not verify although {later} \
                 record(s) after it do: damage to the file"
            ));
        }
        drop(journal);
        found
    }

    /// Moves the note of journal damage into `damaged_dir` (beside the journal's copy): it is
    /// reported once more, by this fsck, and then no longer.
    fn set_journal_damage_aside(&self, damaged_dir: &Path) -> Result<(), StoreError> {
        let note = self.dir().join(super::txn::replay::DAMAGE_NOTE);
        if std::fs::symlink_metadata(&note).is_err() {
            return Ok(());
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        std::fs::create_dir_all(damaged_dir).map_err(io(damaged_dir))?;
        let aside = damaged_dir.join(format!(
            "journal-damage-{}.txt",
            jiff::Timestamp::now().as_second()
        ));
        std::fs::rename(&note, &aside).map_err(io(&note))
    }

    /// Copies every object that can still be read out of the damaged pack `stem` into a new
    /// pack, then moves the damaged pack and its index into `damaged_dir`.
    fn salvage(&self, stem: &str, damaged_dir: &Path) -> Result<usize, StoreError> {
        let pack_dir = self.dir().join("objects").join("pack");
        let idx_path = pack_dir.join(format!("{stem}.idx"));
        let ids: Vec<ObjectId> = match gix_pack::index::File::at(&idx_path, gix::hash::Kind::Sha1) {
            Ok(index) => index.iter().map(|e| e.oid).collect(),
            Err(e) => {
                tracing::warn!(pack = stem, error = %e, "the damaged pack's index is unreadable too");
                Vec::new()
            }
        };
        // A fresh handle maps the files as they are now (never past their end).
        let fresh = Store::open(self.dir())?;
        let repo = fresh.repo();
        let pack = PackWriter::new(self.dir())?;
        let mut salvaged = 0;
        for id in ids {
            if let Some(object) = read(&repo, id) {
                pack.add(id, object.kind, &object.data)?;
                salvaged += 1;
            }
        }
        drop(repo);
        drop(fresh);
        // Durable (pack, index and folder fsynced) before the damaged pack moves away.
        pack.finish()?;
        std::fs::create_dir_all(damaged_dir).map_err(|source| StoreError::Io {
            path: damaged_dir.to_path_buf(),
            source,
        })?;
        // The index first, so that no reader finds an index without its pack.
        for ext in ["idx", "pack", "rev", "keep"] {
            let from = pack_dir.join(format!("{stem}.{ext}"));
            if from.exists() {
                let to = damaged_dir.join(format!("{stem}.{ext}"));
                std::fs::rename(&from, &to)
                    .map_err(|source| StoreError::Io { path: from, source })?;
            }
        }
        tracing::warn!(
            pack = stem,
            salvaged,
            "set a damaged pack aside after salvaging what could be read"
        );
        Ok(salvaged)
    }
}

/// The object `id`, if it can be read at all (a damaged pack may make the reader panic on a
/// slice past its end: that is unreadable too).
fn read(repo: &gix::Repository, id: ObjectId) -> Option<gix::ObjectDetached> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        repo.find_object(id).ok().map(|o| o.detach())
    }))
    .ok()
    .flatten()
}

/// How many objects below `id` (itself included) cannot be read; memoised per object.
fn count_missing(
    repo: &gix::Repository,
    id: ObjectId,
    shallow: &HashSet<ObjectId>,
    readable: &mut HashMap<ObjectId, bool>,
    unreadable: &mut HashSet<ObjectId>,
) -> usize {
    let mut missing = 0;
    let mut todo = vec![id];
    let mut seen = HashSet::new();
    while let Some(next) = todo.pop() {
        if !seen.insert(next) {
            continue;
        }
        if unreadable.contains(&next) {
            missing += 1;
            continue;
        }
        let Some(object) = read(repo, next) else {
            unreadable.insert(next);
            missing += 1;
            continue;
        };
        readable.insert(next, true);
        match object.kind {
            gix::objs::Kind::Commit => {
                match gix::objs::CommitRef::from_bytes(&object.data, gix::hash::Kind::Sha1) {
                    Ok(commit) => {
                        todo.push(commit.tree());
                        if !shallow.contains(&next) {
                            todo.extend(commit.parents());
                        }
                    }
                    Err(_) => {
                        unreadable.insert(next);
                        missing += 1;
                    }
                }
            }
            gix::objs::Kind::Tree => {
                match gix::objs::TreeRef::from_bytes(&object.data, gix::hash::Kind::Sha1) {
                    Ok(tree) => todo.extend(
                        tree.entries
                            .iter()
                            .filter(|e| !e.mode.is_commit())
                            .map(|e| e.oid.to_owned()),
                    ),
                    Err(_) => {
                        unreadable.insert(next);
                        missing += 1;
                    }
                }
            }
            gix::objs::Kind::Blob | gix::objs::Kind::Tag => {}
        }
    }
    missing
}

/// The words for a pack whose data does not match its index.
fn not_matching(pack: &str) -> String {
    format!("objects/pack/{pack}.pack does not match its index")
}

/// Whether the pack file ends with the pack checksum recorded in its index.
fn pack_matches_index(pack: &Path, idx: &Path) -> bool {
    let tail = |path: &Path, from_end: i64| -> Option<[u8; 20]> {
        let mut file = crate::fs::open_regular(path).ok()?;
        if file.metadata().ok()?.len() < 32 {
            return None;
        }
        file.seek(SeekFrom::End(from_end)).ok()?;
        let mut sum = [0u8; 20];
        file.read_exact(&mut sum).ok()?;
        Some(sum)
    };
    // An index ends with the pack's checksum, then its own.
    match (tail(idx, -40), tail(pack, -20)) {
        (Some(expected), Some(found)) => expected == found,
        // No pack beside the index: damage too (every object it lists is gone).
        _ => false,
    }
}
