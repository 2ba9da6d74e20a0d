//! `auto_push`: after a checkpoint, the project's checkpoints are pushed to each of its
//! remotes in the background by `ckpt push` (the client beside ckptd, with the daemon's
//! environment: its ssh agent, its credential helpers). Pushes are coalesced: one runs per
//! project at a time, starting a moment after the checkpoint that asked for it, and the
//! checkpoints recorded meanwhile make it run once more. A checkpoint never waits for any of it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::owner::Owner;
use super::Daemon;

/// How long a push waits after the checkpoint that asked for it (a burst of prompts is one).
const COALESCE: Duration = Duration::from_secs(2);
/// The longest one `ckpt push` may run (its git gives up on a silent remote far sooner).
const LONGEST: Duration = Duration::from_secs(600);

/// Projects with a push running, and whether another was asked for meanwhile.
static RUNNING: parking_lot::Mutex<Option<HashMap<PathBuf, bool>>> = parking_lot::Mutex::new(None);

/// Asks for a push of `owner`'s project to all its remotes, if `auto_push` is on.
pub fn after_checkpoint(daemon: &Arc<Daemon>, owner: Arc<Owner>) {
    if daemon.config().auto_push != Some(true) {
        return;
    }
    let root = owner.root.clone();
    {
        let mut running = RUNNING.lock();
        let running = running.get_or_insert_with(HashMap::new);
        if let Some(again) = running.get_mut(&root) {
            *again = true;
            return;
        }
        running.insert(root.clone(), false);
    }
    let socket = daemon.paths.socket.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(COALESCE).await;
            let remotes = owner
                .run(|_, o| Ok(o.store.remotes()?.into_keys().collect::<Vec<_>>()))
                .await
                .unwrap_or_default();
            for remote in remotes {
                let (root, socket) = (root.clone(), socket.clone());
                let _ = tokio::task::spawn_blocking(move || push(&root, &socket, &remote)).await;
            }
            let mut running = RUNNING.lock();
            let running = running.get_or_insert_with(HashMap::new);
            if running.get(&root) == Some(&true) {
                running.insert(root.clone(), false);
                continue;
            }
            running.remove(&root);
            break;
        }
    });
}

/// Runs `ckpt push REMOTE` for the project at `root`, bounded, and logs how it went.
fn push(root: &std::path::Path, socket: &std::path::Path, remote: &str) {
    let Some(ckpt) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("ckpt")))
        .filter(|p| p.exists())
    else {
        tracing::warn!("auto_push: no `ckpt` beside ckptd to push with");
        return;
    };
    let started = Instant::now();
    let mut command = Command::new(ckpt);
    // A group of its own, stopped whole past the bound: `ckpt push` runs git (and git ssh) in
    // its own group, so none of them outlives it.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command
        .arg("--socket")
        .arg(socket)
        .args(["--no-spawn", "--quiet", "-C"])
        .arg(root)
        .args(["push", remote])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "auto_push: cannot start ckpt push");
            return;
        }
    };
    // Read as it comes, so that a push saying much never blocks on a full pipe.
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
            err
        })
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < LONGEST => {
                std::thread::sleep(Duration::from_millis(100))
            }
            _ => {
                if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let err = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    match status {
        Some(s) if s.success() => {
            tracing::info!(root = %root.display(), remote, ms = started.elapsed().as_millis() as u64, "auto_push: pushed")
        }
        _ => {
            tracing::warn!(root = %root.display(), remote, error = %err.trim(), "auto_push: push failed; the next checkpoint tries again")
        }
    }
}
