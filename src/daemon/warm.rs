//! The warm-up as ckptd starts: the registered projects it will most likely be asked about (the
//! most recently used first, up to `warm_up`) are opened, watched and verified by stat in the
//! background, one after another, while the socket already serves. Started at login, ckptd has
//! done the restart's stat verify (and paid for the disk reads of a cold cache) before the first
//! prompt comes, which then costs what any checkpoint does. A request for a project being warmed
//! up waits for it as for any operation under way; other projects never wait for it.
//!
//! Projects with automatic checkpoints are always opened (their timer needs the watcher), and
//! verified like the others when they are among the `warm_up` most recent.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::owner::Owner;
use super::{blocking, Daemon};
use crate::index::stat_cache_path;

/// Opens and verifies the projects (see the module's doc); returns when all are done.
pub async fn warm_up(daemon: Arc<Daemon>) {
    let config = daemon.config();
    let owners: Vec<Arc<Owner>> = daemon.projects.read().await.values().cloned().collect();
    // Recency: when the project's stat cache was last written (at its checkpoints' upkeep and
    // at every shutdown); a project never opened has none and comes last.
    let Ok(mut ranked) = blocking(move || {
        owners
            .into_iter()
            .map(|o| {
                let used = std::fs::metadata(stat_cache_path(&o.store_dir))
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let available = o.root.is_dir();
                (used, available, o)
            })
            .collect::<Vec<_>>()
    })
    .await
    else {
        return;
    };
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut verified = 0;
    for (_, available, owner) in ranked {
        let auto = config.auto_checkpoint_for(&owner.root).is_some();
        let verify = available && verified < config.warm_up();
        if !verify && !auto {
            continue;
        }
        verified += usize::from(verify);
        let started = Instant::now();
        let result = owner
            .run(move |project, opened| {
                if verify {
                    // The tree too: the verify leaves every folder's to be computed again.
                    opened.current_tree(project)?;
                }
                Ok(())
            })
            .await;
        match result {
            Ok(()) if verify => {
                tracing::info!(root = %owner.root.display(), ms = started.elapsed().as_millis() as u64, "warmed up")
            }
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(root = %owner.root.display(), error = %e, "cannot open the project")
            }
        }
    }
}
