//! The one owner of each project's state: a lock around its [`Opened`] state, under which every
//! operation runs on a blocking thread, one at a time, while different projects never wait for
//! each other. It also schedules what operations leave for later: after the reply, loading the
//! pack just written, freeing replaced files and making the next publish's files; once their
//! window has passed, settling racy index entries; once the project is quiet, the upkeep
//! (stat cache, merging small packs); and automatic checkpoints: once the watcher has reported
//! no change for `auto_checkpoint`, an `auto` checkpoint in the `default` dialog, unless the
//! files equal the last checkpoint, never more often than the interval. What runs
//! is the engine's plain synchronous code ([`opened::operate`](crate::engine::opened::operate)).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, Paths};
use crate::engine::opened::operate;
use crate::engine::upkeep::Leftovers;
use crate::engine::{Error, Opened, Project, Result};

/// Upkeep (the stat cache, merging small packs) waits until no operation began for this long.
const QUIET: Duration = Duration::from_secs(1);
/// How long after the racy window has passed its entries are settled (clock slack).
const SETTLE_MARGIN: Duration = Duration::from_millis(2);

/// A registered project and the lock its operations take. It reads as its [`Project`].
pub struct Owner {
    project: Project,
    state: Arc<tokio::sync::Mutex<Option<Opened>>>,
    /// Operations begun so far: upkeep waits until this stops moving ([`QUIET`]).
    ops: AtomicU64,
    /// Whether a task already waits for a quiet moment to do the upkeep.
    upkeep_waiting: AtomicBool,
    /// Whether a task already waits to settle the index's racy entries.
    settle_waiting: AtomicBool,
    /// Its history was deleted (`forget`): no operation runs any more.
    forgotten: AtomicBool,
    /// Automatic checkpoints' timer runs.
    auto_started: AtomicBool,
}

impl std::ops::Deref for Owner {
    type Target = Project;

    fn deref(&self) -> &Project {
        &self.project
    }
}

impl Owner {
    pub fn new(root: PathBuf, config: &Config, paths: &Paths) -> Owner {
        Owner {
            project: Project::new(root, config, paths),
            state: Arc::new(tokio::sync::Mutex::new(None)),
            ops: AtomicU64::new(0),
            upkeep_waiting: AtomicBool::new(false),
            settle_waiting: AtomicBool::new(false),
            forgotten: AtomicBool::new(false),
            auto_started: AtomicBool::new(false),
        }
    }

    /// Runs `f` on a blocking thread with this project's lock held; different projects never
    /// wait for each other. The store is opened (or created) on first use.
    pub async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &mut Opened) -> Result<T> + Send + 'static,
    {
        self.run_checked(true, f).await
    }

    /// Like [`Owner::run`], also on a damaged store (for `fsck`, which reports and repairs).
    pub async fn run_on_damaged<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &mut Opened) -> Result<T> + Send + 'static,
    {
        self.run_checked(false, f).await
    }

    async fn run_checked<T, F>(self: &Arc<Self>, refuse_damage: bool, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &mut Opened) -> Result<T> + Send + 'static,
    {
        self.ops.fetch_add(1, Ordering::Relaxed);
        let mut guard = self.state.clone().lock_owned().await;
        let me = self.clone();
        let (reply, replied) = tokio::sync::oneshot::channel();
        let task = tokio::task::spawn_blocking(move || {
            let was_open = guard.is_some();
            let result = match me.forgotten.load(Ordering::SeqCst) {
                true => Err(Error::invalid(format!(
                    "the history of {} was deleted (`ckpt forget`)",
                    me.root.display()
                ))),
                false => operate(&me.project, &mut guard, refuse_damage, f),
            };
            let succeeded = result.is_ok();
            let _ = reply.send(result);
            let opened = guard.as_mut()?;
            if let (Some(dialog), true) = (opened.take_prune_due(), succeeded) {
                // After the reply, under the lock still: the next operation sees the dialog
                // pruned.
                crate::engine::timeline::auto_prune(&me, opened, &dialog);
                if let Err(e) = opened.flush() {
                    tracing::warn!(root = %me.root.display(), error = %e, "automatic prune failed");
                }
            }
            opened.release_if_due();
            Some((succeeded.then(|| opened.leftovers()), !was_open))
        });
        let value = replied
            .await
            .map_err(|_| Error::Internal("the project's operation stopped unexpectedly".into()))?;
        // The rest once the operation's thread is done (it is free again first, so that the
        // reply is not kept waiting for a processor by the work below).
        let me = self.clone();
        tokio::spawn(async move {
            if let Ok(Some((leftovers, opened_now))) = task.await {
                if opened_now {
                    me.start_auto();
                }
                if let Some(leftovers) = leftovers {
                    me.after_reply(leftovers);
                }
            }
        });
        value
    }

    /// Starts automatic checkpoints once, if the configuration asks for them.
    fn start_auto(self: &Arc<Self>) {
        if let Some(interval) = self.config().auto_checkpoint_for(&self.root) {
            if !self.auto_started.swap(true, Ordering::AcqRel) {
                start_auto_timer(self, interval);
            }
        }
    }

    /// What an operation leaves to do once its reply is sent.
    fn after_reply(self: &Arc<Self>, leftovers: Leftovers) {
        let Leftovers {
            urgent,
            later,
            load,
            spares,
            retired,
            settle,
        } = leftovers;
        if let Some(due) = settle {
            self.settle_when_due(due);
        }
        if load.is_some() || !retired.is_empty() || spares.is_some() {
            // Loading the pack the operation wrote, freeing the files it replaced and making
            // the next publish's files wait for no one.
            tokio::task::spawn_blocking(move || {
                if let Some(load) = load {
                    load();
                }
                drop(retired);
                if let Some(make) = spares {
                    make();
                }
            });
        }
        // Upkeep comes after the reply, and when it can wait, after the project falls quiet:
        // a checkpoint never waits behind it while an agent works.
        if urgent {
            tokio::spawn(self.clone().upkeep());
        } else if later && !self.upkeep_waiting.swap(true, Ordering::AcqRel) {
            tokio::spawn(self.clone().upkeep_when_quiet());
        }
    }

    /// Files read (or written by a restore) within a timestamp tick of now are racy: the next
    /// refresh reads them again. Once their window has passed they are read here, after the
    /// reply, so that the next checkpoint reads only what changed (see
    /// [`FileIndex::settle_racy`](crate::index::FileIndex::settle_racy)). One task at a time;
    /// it goes on while new racy entries come due later.
    fn settle_when_due(self: &Arc<Self>, due: i64) {
        if self.settle_waiting.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut due = due;
            loop {
                let wait = due.saturating_sub(crate::fs::now_ns()).max(0) as u64;
                tokio::time::sleep(Duration::from_nanos(wait) + SETTLE_MARGIN).await;
                let mut guard = me.state.clone().lock_owned().await;
                let owner = me.clone();
                // The flag is cleared with the lock held: an operation after this schedules
                // its own task, one before it is seen by `settle_due` here.
                let next = tokio::task::spawn_blocking(move || {
                    let next = guard.as_mut().and_then(|opened| {
                        opened.settle_racy(&owner);
                        opened.index.settle_due()
                    });
                    if next.is_none() {
                        owner.settle_waiting.store(false, Ordering::Release);
                    }
                    next
                })
                .await;
                match next {
                    Ok(Some(later)) => due = later,
                    Ok(None) => return,
                    Err(_) => {
                        me.settle_waiting.store(false, Ordering::Release);
                        return;
                    }
                }
            }
        });
    }

    /// Waits until no operation began for [`QUIET`], then does the upkeep.
    async fn upkeep_when_quiet(self: Arc<Self>) {
        loop {
            let seen = self.ops.load(Ordering::Relaxed);
            tokio::time::sleep(QUIET).await;
            if self.ops.load(Ordering::Relaxed) == seen {
                break;
            }
        }
        self.upkeep_waiting.store(false, Ordering::Release);
        self.upkeep().await;
    }

    /// Runs [`Opened::upkeep`] under the lock.
    async fn upkeep(self: Arc<Self>) {
        let mut guard = self.state.clone().lock_owned().await;
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(opened) = guard.as_mut() {
                opened.upkeep(&me.project);
            }
        })
        .await;
    }

    /// Whether the project's lock is free right now (for status reports that must not wait).
    pub fn is_busy(&self) -> bool {
        self.state.try_lock().is_err()
    }

    /// Applies a reloaded configuration; changed exclusions (or `max_file_size`) make the next
    /// checkpoint verify every file by stat, so the index follows the new rules exactly.
    pub async fn reconfigure(self: &Arc<Self>, config: Config) -> Result<()> {
        if !self.project.set_config(config) || self.state.lock().await.is_none() {
            return Ok(());
        }
        self.run(|p, o| o.follow_rules(p)).await
    }

    /// Stops the project for good before its store is deleted: every operation from now on is
    /// refused, and its opened state (watcher, store handles) is dropped once the running one
    /// is done.
    pub async fn forget(&self) {
        self.forgotten.store(true, Ordering::SeqCst);
        let mut guard = self.state.clone().lock_owned().await;
        let _ = tokio::task::spawn_blocking(move || drop(guard.take())).await;
    }

    /// At shutdown: saves the stat cache and settles the store's journal, if the project is open.
    pub async fn close(&self) {
        let mut guard = self.state.clone().lock_owned().await;
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(opened) = guard.as_mut() {
                opened.close();
            }
        })
        .await;
    }
}

/// Starts the timer task of `project`'s automatic checkpoints; it ends when the project is
/// unwatched.
fn start_auto_timer(project: &Arc<Owner>, interval: Duration) {
    let weak = Arc::downgrade(project);
    let tick = (interval / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    tracing::info!(root = %project.root.display(), ?interval, "automatic checkpoints on");
    // Whatever changed while nobody watched counts as a change now.
    project.events.note_change();
    tokio::runtime::Handle::current().spawn(async move {
        let mut last_auto: Option<Instant> = None;
        let mut considered: Option<Instant> = None;
        loop {
            tokio::time::sleep(tick).await;
            let Some(project) = weak.upgrade() else {
                return;
            };
            let Some(changed) = project.events.last_change() else {
                continue;
            };
            let settled = changed.elapsed() >= interval;
            let due = last_auto.is_none_or(|t| t.elapsed() >= interval);
            if considered == Some(changed) || !settled || !due {
                continue;
            }
            considered = Some(changed);
            match project.run(crate::engine::record::record_auto).await {
                Ok(Some(c)) => {
                    tracing::info!(id = %c.id, "automatic checkpoint recorded");
                    last_auto = Some(Instant::now());
                }
                Ok(None) => tracing::debug!("automatic checkpoint skipped: nothing changed"),
                Err(e) => tracing::warn!(error = %e, "automatic checkpoint failed"),
            }
        }
    });
}
