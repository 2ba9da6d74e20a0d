//! What a walk of a project lists: the entries that belong in a checkpoint, the folders and
//! repositories it entered, what it could not look at, and the litter it found. A leaf.

use gix::bstr::BString;

use crate::fs::Stat;

/// One entry the walk found that belongs in a checkpoint.
#[derive(Debug, Clone)]
pub struct WalkEntry {
    /// Path relative to the root, `/`-separated, as stored in git trees.
    pub rel: BString,
    /// What the walk's `lstat` found (its mode tells the kind of file).
    pub stat: Stat,
}

impl WalkEntry {
    pub fn is_symlink(&self) -> bool {
        self.stat.mode & FILE_KIND == KIND_SYMLINK
    }

    pub fn is_file(&self) -> bool {
        self.stat.mode & FILE_KIND == KIND_FILE
    }
}

/// The bits of a mode that tell the kind of file, and the values of a symlink and a file.
const FILE_KIND: u32 = 0o170_000;
const KIND_SYMLINK: u32 = 0o120_000;
const KIND_FILE: u32 = 0o100_000;

/// Something the walk could not look at (and so could not judge).
#[derive(Debug, Clone)]
pub struct WalkSkip {
    pub rel: BString,
    pub reason: String,
}

/// What a walk found.
#[derive(Debug, Default)]
pub struct WalkResult {
    pub files: Vec<WalkEntry>,
    /// Included folders, the start folder first.
    pub dirs: Vec<BString>,
    /// Included folders that are repository roots (hold a `.git`).
    pub repos: Vec<BString>,
    pub skips: Vec<WalkSkip>,
    /// Temporary files of a ckptd that is gone (killed mid-restore, say): removed by the
    /// caller, since nobody else will.
    pub litter: Vec<BString>,
}
