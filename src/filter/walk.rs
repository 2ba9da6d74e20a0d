//! The walk that lists a project under its rules. A whole-project walk (a first checkpoint, a
//! verify after a restart) lists folders on several threads; a subtree walk (a folder that
//! changed) stays on the calling thread, where starting threads would cost more than it saves.
//! Either way each folder is shown to `on_dir` before it is listed (the watcher places its
//! watch there first, so nothing created in it afterwards goes unnoticed), a folder's
//! subfolders together (up to [`SHOWN_AT_ONCE`]: the watcher places their watches in one
//! request to its thread), and the result is
//! the same set of entries. [`Filter::walk_each`] hands each folder's files over as it is
//! listed ([`Listed`]: the folder's path once, its files' names in one buffer) instead of
//! gathering every file of the project in one list with a path made for each.

use parking_lot::{Condvar, Mutex};
use rustix::fs::{Mode, OFlags};
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

use super::listing::{WalkEntry, WalkResult, WalkSkip};
use super::names::{is_litter, join_rel, rel_to_abs};
use super::project::Filter;
use super::rules::IgnoreRules;
use crate::fs::{nanos, open_dir_beneath, Stat};

/// A folder to list: where it is, its path in the project, and the rules in force in it.
type Folder = (PathBuf, BString, IgnoreRules);

/// Subfolders shown to `on_dir` at once, at most: few enough that the listing threads get the
/// first of a large folder's subfolders soon.
const SHOWN_AT_ONCE: usize = 64;

/// One folder's files as the walk listed them: the folder's path in the project once, and each
/// file's name (all of them in one buffer) with its stat. A verify after a restart looks at a
/// million files by name and stat: none of them needs a path of its own, made on a listing
/// thread and freed on another.
#[derive(Debug, Default)]
pub struct Listed {
    /// The folder, relative to the root (empty: the root).
    pub dir: BString,
    names: Vec<u8>,
    /// Each file's name's end in `names`, and its stat.
    files: Vec<(usize, Stat)>,
}

impl Listed {
    fn push(&mut self, name: &[u8], stat: Stat) {
        self.names.extend_from_slice(name);
        self.files.push((self.names.len(), stat));
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Each file's name and stat, in the order listed.
    pub fn iter(&self) -> impl Iterator<Item = (&BStr, Stat)> + '_ {
        let mut start = 0;
        self.files.iter().map(move |&(end, stat)| {
            let name = self.names[start..end].as_bstr();
            start = end;
            (name, stat)
        })
    }

    /// The path of the file `name` of this folder.
    pub fn path_of(&self, name: &[u8]) -> BString {
        join_rel(&self.dir, name)
    }

    /// Each file as an entry with its path.
    pub fn entries(&self) -> impl Iterator<Item = WalkEntry> + '_ {
        self.iter().map(|(name, stat)| WalkEntry {
            rel: self.path_of(name),
            stat,
        })
    }
}

/// What listing one folder found: its files, what else it met, and its subfolders still to
/// list.
#[derive(Default)]
struct Listing {
    files: Listed,
    result: WalkResult,
    subdirs: Vec<Folder>,
}

/// Folders waiting to be listed (and whether no more will come), shared by the listing threads.
struct Queue {
    items: Mutex<(VecDeque<Folder>, bool)>,
    ready: Condvar,
}

impl Queue {
    fn push(&self, item: Folder) {
        self.items.lock().0.push_back(item);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.items.lock().1 = true;
        self.ready.notify_all();
    }

    /// The next folder, or None once the queue is closed and empty.
    fn pop(&self) -> Option<Folder> {
        let mut items = self.items.lock();
        loop {
            if let Some(item) = items.0.pop_front() {
                return Some(item);
            }
            if items.1 {
                return None;
            }
            self.ready.wait(&mut items);
        }
    }
}

impl Filter {
    /// Walks the subtree at `start` (a folder known to be included), whose rules are `rules`.
    /// `on_dir` sees each included folder before it is listed.
    pub fn walk_from(
        &self,
        start: BString,
        rules: IgnoreRules,
        on_dir: &mut dyn FnMut(&[&Path]),
    ) -> WalkResult {
        let mut files = Vec::new();
        let mut result = self.walk_each(start, rules, on_dir, &mut |found| {
            files.extend(found.entries())
        });
        result.files = files;
        result
    }

    /// Like [`Filter::walk_from`], handing each folder's files to `on_files` (on this thread,
    /// once per folder that has any) as soon as the folder is listed; the result holds no
    /// files.
    pub fn walk_each(
        &self,
        start: BString,
        rules: IgnoreRules,
        on_dir: &mut dyn FnMut(&[&Path]),
        on_files: &mut dyn FnMut(Listed),
    ) -> WalkResult {
        let start_abs = if start.is_empty() {
            self.root.clone()
        } else {
            rel_to_abs(&self.root, &start)
        };
        let threads = match start.is_empty() {
            true => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            false => 1,
        };
        self.walk_with((start_abs, start, rules), on_dir, on_files, threads)
    }

    /// The walk from `start` on `threads` listing threads (1: on this thread).
    fn walk_with(
        &self,
        start: Folder,
        on_dir: &mut dyn FnMut(&[&Path]),
        on_files: &mut dyn FnMut(Listed),
        threads: usize,
    ) -> WalkResult {
        // Folders are opened below the root, never through a symlink (one swapped in for a
        // folder after its parent was listed is not followed out of the project).
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let root = match rustix::fs::open(&self.root, flags, Mode::empty()) {
            Ok(root) => root,
            Err(rustix::io::Errno::NOENT) => return WalkResult::default(),
            Err(e) => {
                let mut result = WalkResult::default();
                result.skips.push(WalkSkip {
                    rel: start.1,
                    reason: format!("cannot read directory: {}", std::io::Error::from(e)),
                });
                return result;
            }
        };
        if threads > 1 {
            return self.walk_parallel(root.as_fd(), start, on_dir, on_files, threads);
        }
        let mut result = WalkResult::default();
        on_dir(&[&start.0]);
        let mut stack = vec![start];
        while let Some((dir, rel_dir, rules)) = stack.pop() {
            let listing = self.list_dir(root.as_fd(), &dir, rel_dir, &rules);
            let (files, subdirs) = gather(&mut result, listing);
            hand_over(files, on_files);
            show(subdirs, on_dir, &mut |sub| stack.push(sub));
        }
        result
    }

    /// The walk on `threads` listing threads. This thread hands out folders: it shows each to
    /// `on_dir`, queues it, and gathers what the listing threads found.
    fn walk_parallel(
        &self,
        root: BorrowedFd<'_>,
        start: Folder,
        on_dir: &mut dyn FnMut(&[&Path]),
        on_files: &mut dyn FnMut(Listed),
        threads: usize,
    ) -> WalkResult {
        let queue = Queue {
            items: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel::<Listing>();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let (queue, tx) = (&queue, tx.clone());
                scope.spawn(move || {
                    while let Some((dir, rel_dir, rules)) = queue.pop() {
                        if tx.send(self.list_dir(root, &dir, rel_dir, &rules)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut result = WalkResult::default();
            on_dir(&[&start.0]);
            queue.push(start);
            let mut outstanding = 1usize;
            while outstanding > 0 {
                let Ok(listing) = rx.recv() else { break };
                outstanding -= 1;
                let (files, subdirs) = gather(&mut result, listing);
                // The listing threads get more folders before this one's files are looked at.
                show(subdirs, on_dir, &mut |sub| {
                    queue.push(sub);
                    outstanding += 1;
                });
                hand_over(files, on_files);
            }
            queue.close();
            result
        })
    }

    /// Lists one folder: its files, its included subfolders (with their rules), and what could
    /// not be looked at. Symlinks are never followed; stats are relative to the open folder.
    /// Every entry listed is looked at, so this is where a whole-project walk spends its time:
    /// names are read and stat'ed without a path or a name of their own made for each (a
    /// file's name joins its folder's [`Listed`]).
    /// `dir` is the folder's path, `rel_dir` the same below `root` (the project's root,
    /// open), through which it is opened.
    fn list_dir(
        &self,
        root: BorrowedFd<'_>,
        dir: &Path,
        rel_dir: BString,
        rules: &IgnoreRules,
    ) -> Listing {
        use rustix::fs::{AtFlags, StatxFlags};
        let mut out = Listing::default();
        let result = &mut out.result;
        let files = &mut out.files;
        let opened = match rel_dir.is_empty() {
            true => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
                rustix::fs::openat(root, ".", flags, Mode::empty()).map_err(Into::into)
            }
            false => open_dir_beneath(root, &rel_dir),
        };
        let mut listing = match opened.and_then(|fd| Ok(rustix::fs::Dir::new(fd)?)) {
            Ok(listing) => listing,
            // Gone, or no longer a folder (a symlink or a file now): not listed. The watcher
            // has the change of its parent, which the next checkpoint looks at again.
            Err(e) if is_gone(&e) => return out,
            Err(e) => {
                result.skips.push(WalkSkip {
                    rel: rel_dir,
                    reason: format!("cannot read directory: {e}"),
                });
                return out;
            }
        };
        result.dirs.push(rel_dir.clone());
        files.dir = rel_dir.clone();
        // `dir/` then each entry's name, in one buffer.
        let mut abs = dir.as_os_str().as_bytes().to_vec();
        if abs.last() != Some(&b'/') {
            abs.push(b'/');
        }
        let base = abs.len();
        let mask = StatxFlags::TYPE
            | StatxFlags::MODE
            | StatxFlags::INO
            | StatxFlags::SIZE
            | StatxFlags::MTIME
            | StatxFlags::CTIME;
        while let Some(item) = listing.read() {
            let item = match item {
                Ok(i) => i,
                Err(e) => {
                    result.skips.push(WalkSkip {
                        rel: rel_dir.clone(),
                        reason: format!("cannot list directory: {}", std::io::Error::from(e)),
                    });
                    break;
                }
            };
            let name = item.file_name();
            let name_bytes = name.to_bytes();
            if name_bytes == b"." || name_bytes == b".." {
                continue;
            }
            if name_bytes == b".git" {
                result.repos.push(rel_dir.clone());
            }
            abs.truncate(base);
            abs.extend_from_slice(name_bytes);
            // An entry's path is made only where it is kept: a folder, a skip, litter.
            let rel = || join_rel(&rel_dir, name_bytes);
            let at = listing.fd().expect("a listing's own folder");
            let stat = match rustix::fs::statx(at, name, AtFlags::SYMLINK_NOFOLLOW, mask) {
                Ok(x) => Stat {
                    size: x.stx_size,
                    mtime_ns: nanos(x.stx_mtime.tv_sec, x.stx_mtime.tv_nsec.into()),
                    ctime_ns: nanos(x.stx_ctime.tv_sec, x.stx_ctime.tv_nsec.into()),
                    ino: x.stx_ino,
                    mode: x.stx_mode.into(),
                },
                // Vanished between listing and stat: it is simply not there any more.
                Err(rustix::io::Errno::NOENT) => continue,
                // A kernel without statx (before 4.11): what std falls back to.
                Err(rustix::io::Errno::NOSYS) => {
                    match std::fs::symlink_metadata(Path::new(OsStr::from_bytes(&abs))) {
                        Ok(meta) => Stat::of(&meta),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => {
                            let reason = format!("cannot stat: {e}");
                            result.skips.push(WalkSkip { rel: rel(), reason });
                            continue;
                        }
                    }
                }
                Err(e) => {
                    result.skips.push(WalkSkip {
                        rel: rel(),
                        reason: format!("cannot stat: {}", std::io::Error::from(e)),
                    });
                    continue;
                }
            };
            let is_dir = stat.mode & KIND == KIND_DIR;
            if !is_dir && is_litter(name_bytes) {
                result.litter.push(rel());
                continue;
            }
            let abs_path = Path::new(OsStr::from_bytes(&abs));
            if self.is_excluded(abs_path, name_bytes, is_dir, rules) {
                continue;
            }
            if is_dir {
                let child_rules = rules.enter(abs_path);
                out.subdirs
                    .push((abs_path.to_path_buf(), rel(), child_rules));
            } else {
                files.push(name_bytes, stat);
            }
        }
        out
    }
}

/// Whether opening a folder failed because it is not there as a folder any more.
fn is_gone(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let gone = [Errno::NOENT, Errno::NOTDIR, Errno::LOOP];
    e.raw_os_error()
        .is_some_and(|code| gone.iter().any(|g| g.raw_os_error() == code))
}

/// The bits of a mode that tell the kind of file, and a folder's value.
const KIND: u32 = 0o170_000;
const KIND_DIR: u32 = 0o040_000;

/// Gathers what a listing met into `into`; returns its files and its subfolders still to list.
fn gather(into: &mut WalkResult, listing: Listing) -> (Listed, Vec<Folder>) {
    let Listing {
        files,
        result: from,
        subdirs,
    } = listing;
    into.dirs.extend(from.dirs);
    into.repos.extend(from.repos);
    into.skips.extend(from.skips);
    into.litter.extend(from.litter);
    (files, subdirs)
}

/// Shows `subdirs` to `on_dir`, [`SHOWN_AT_ONCE`] at a time, and passes each batch on to
/// `then` once shown.
fn show(subdirs: Vec<Folder>, on_dir: &mut dyn FnMut(&[&Path]), then: &mut dyn FnMut(Folder)) {
    let mut subdirs = subdirs.into_iter().peekable();
    while subdirs.peek().is_some() {
        let batch: Vec<Folder> = subdirs.by_ref().take(SHOWN_AT_ONCE).collect();
        let paths: Vec<&Path> = batch.iter().map(|sub| sub.0.as_path()).collect();
        on_dir(&paths);
        batch.into_iter().for_each(&mut *then);
    }
}

/// Hands a folder's files to `on_files`, where it has any.
fn hand_over(files: Listed, on_files: &mut dyn FnMut(Listed)) {
    if !files.is_empty() {
        on_files(files);
    }
}

#[cfg(test)]
mod tests;
