//! What a refresh did, and how far a long one has come (read by `status` while the project is
//! busy).

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// What a refresh did, for logs and status.
#[derive(Debug, Default)]
pub struct RefreshOutcome {
    /// Files read and hashed (the rest were unchanged by stat).
    pub hashed: usize,
    /// Whether the whole project was verified.
    pub full: bool,
}

/// Sees every folder a refresh lists, before it is listed (a few at a time: a folder's
/// subfolders together).
pub type OnDir<'a> = &'a mut dyn FnMut(&[&Path]);

/// How far a long refresh has come; read by `status` while the project is busy.
#[derive(Debug, Default)]
pub struct Progress {
    /// 0 idle, 1 scanning folders, 2 reading files.
    pub(super) phase: AtomicU8,
    pub(super) done: AtomicU64,
    pub(super) total: AtomicU64,
}

impl Progress {
    pub(super) fn start(&self, phase: u8, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
    }

    pub(super) fn step(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// (phase, done, total), or None when idle.
    pub fn get(&self) -> Option<(&'static str, u64, u64)> {
        let phase = match self.phase.load(Ordering::Relaxed) {
            1 => "scanning",
            2 => "reading",
            _ => return None,
        };
        Some((
            phase,
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        ))
    }
}
