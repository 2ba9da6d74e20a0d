//! What changed in the stores' folders, as the kernel tells it: the check every operation makes
//! of its store ([`Store::damage`](super::Store::damage)) looks again only at the packs that
//! changed since it last looked, instead of listing and stat-ing every pack each time.
//!
//! One inotify instance serves the whole process (instances are few, and each watched
//! project's watcher holds one). Each open store has an [`Inbox`]: watches on the store's folder
//! and on its pack folder put there the names of the packs that changed, and ask for a full
//! check when anything of the store's layout (`HEAD`, `config`, `objects`, `refs`) is created,
//! removed or renamed, when a watched folder goes away or is moved, or when the kernel's queue
//! overflows. The kernel queues an event before the call that caused it returns, so whatever
//! changed before a check began is in the inbox when the check reads it.
//!
//! What inotify does not report: writes through a shared memory mapping. Packs are read-only
//! files (0400) that ckpt never writes in place; such a write by another program is found by
//! the checks that read everything (a store's first use in a process, `ckpt fsck`).

use std::collections::{BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// The names in a store's folder whose creation, removal or renaming asks for a full check.
const LAYOUT: [&str; 4] = ["HEAD", "config", "objects", "refs"];

/// What a store's checks have to look at again.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Everything: the sentinel cannot vouch for the names alone.
    pub all: bool,
    /// Files of the pack folder that changed (any kind of change).
    pub names: BTreeSet<String>,
}

/// Where one store's changes collect.
#[derive(Debug)]
pub(crate) struct Inbox {
    seen: Mutex<Seen>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Folder {
    Store,
    Packs,
}

/// The inboxes a watch reports to, and which of the store's folders it watches there (two
/// stores of one folder share a watch).
type Listeners = Vec<(Weak<Inbox>, Folder)>;

struct Sentinel {
    fd: OwnedFd,
    /// Each watch's listeners.
    watches: Mutex<HashMap<i32, Listeners>>,
}

static SENTINEL: OnceLock<Option<Sentinel>> = OnceLock::new();

fn sentinel() -> Option<&'static Sentinel> {
    SENTINEL
        .get_or_init(|| match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => Some(Sentinel {
                fd,
                watches: Mutex::default(),
            }),
            Err(e) => {
                tracing::info!(error = %e, "no inotify for the stores: each operation checks every pack");
                None
            }
        })
        .as_ref()
}

impl Inbox {
    /// An inbox for the store at `dir`, watching its folders; None where they cannot be
    /// watched (then every check is a full one). It asks for a full check first.
    pub fn watch(dir: &Path) -> Option<Arc<Inbox>> {
        let inbox = Arc::new(Inbox {
            seen: Mutex::new(Seen {
                all: true,
                names: BTreeSet::new(),
            }),
        });
        inbox.rewatch(dir).then_some(inbox)
    }

    /// Places the watches on the store's folder `dir` and its pack folder again (a folder that
    /// was replaced is a new one to watch): after every full check. False when one cannot be
    /// placed; the inbox then keeps asking for full checks.
    pub fn rewatch(self: &Arc<Self>, dir: &Path) -> bool {
        let Some(sentinel) = sentinel() else {
            return false;
        };
        let common = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::EXCL_UNLINK;
        // A pack is also damaged in place: written, cut short, its times or mode changed.
        let packs = common | WatchFlags::MODIFY | WatchFlags::ATTRIB | WatchFlags::CLOSE_WRITE;
        let pack_dir = dir.join("objects").join("pack");
        let mut watches = sentinel.watches.lock();
        for (path, flags, folder) in [
            (dir, common, Folder::Store),
            (&*pack_dir, packs, Folder::Packs),
        ] {
            let wd = match inotify::add_watch(&sentinel.fd, path, flags) {
                Ok(wd) => wd,
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "cannot watch a store's folder");
                    self.seen.lock().all = true;
                    return false;
                }
            };
            let listeners = watches.entry(wd).or_default();
            let mine = |(w, f): &(Weak<Inbox>, Folder)| {
                *f == folder && std::ptr::eq(w.as_ptr(), Arc::as_ptr(self))
            };
            if !listeners.iter().any(mine) {
                listeners.push((Arc::downgrade(self), folder));
            }
        }
        true
    }

    /// What changed since the last call (a full check is asked for until a call reads it).
    pub fn take(&self) -> Seen {
        if let Some(sentinel) = sentinel() {
            sentinel.drain();
        }
        std::mem::take(&mut *self.seen.lock())
    }

    /// Asks for a full check at the next [`Inbox::take`] (e.g. while damage is known: it is
    /// reported again every time).
    pub fn ask_all(&self) {
        self.seen.lock().all = true;
    }
}

impl Sentinel {
    /// Reads every queued event into the inboxes it concerns.
    fn drain(&self) {
        let mut watches = self.watches.lock();
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::INTR) => continue,
                // Nothing more (EAGAIN), or an error that leaves nothing to read either.
                Err(_) => break,
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were lost: every store checks everything.
                for listeners in watches.values() {
                    for (inbox, _) in listeners {
                        if let Some(inbox) = inbox.upgrade() {
                            inbox.ask_all();
                        }
                    }
                }
                continue;
            }
            let gone = flags.intersects(ReadFlags::IGNORED | ReadFlags::UNMOUNT);
            let moved = flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF);
            let name = event.file_name().map(|n| n.to_string_lossy().into_owned());
            let Some(listeners) = watches.get(&event.wd()) else {
                continue;
            };
            for (inbox, folder) in listeners {
                let Some(inbox) = inbox.upgrade() else {
                    continue;
                };
                let mut seen = inbox.seen.lock();
                match (&name, folder) {
                    _ if gone || moved => seen.all = true,
                    (Some(name), Folder::Packs) => {
                        seen.names.insert(name.clone());
                    }
                    (Some(name), Folder::Store) if LAYOUT.contains(&name.as_str()) => {
                        seen.all = true
                    }
                    _ => {}
                }
            }
        }
        // Watches only closed stores listen to go.
        watches.retain(|wd, listeners| {
            listeners.retain(|(inbox, _)| inbox.strong_count() > 0);
            if listeners.is_empty() {
                let _ = inotify::remove_watch(&self.fd, *wd);
            }
            !listeners.is_empty()
        });
    }
}
