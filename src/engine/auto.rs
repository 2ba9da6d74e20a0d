//! Automatic checkpoints for projects without an agent hook: once the watcher has reported no
//! change for `auto_checkpoint`, record an `auto` checkpoint in the `default` dialog, unless
//! the files equal the last checkpoint; never more often than the interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Project;

/// Starts the timer task of `project`; it ends when the project is unwatched.
pub fn start(project: &Arc<Project>, interval: Duration) {
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
            match project.run(super::checkpoint::record_auto).await {
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
