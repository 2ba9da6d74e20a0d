//! The accept loop and the connections.
//!
//! A connection reads one line at a time (capped), spawns a task per request and sends replies
//! through a writer task, so requests pipeline. On shutdown the loop stops accepting, each
//! connection stops reading, and every request already started runs to completion.

use std::future::Future;
use std::sync::Arc;

use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::tokio::Listener as _;
use interprocess::local_socket::traits::StreamCommon as _;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::{handlers, Daemon};
use crate::protocol::{error_line, read_frame, ErrorCode, FrameError, RpcError};

/// Requests one connection may have in flight at once.
const MAX_IN_FLIGHT_PER_CONNECTION: usize = 32;
/// Connections served at once; further ones wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 256;

/// Serves `listener` until `shutdown` resolves (or a client calls `shutdown`), then waits for
/// in-flight work and returns. Dropping the listener removes the socket file.
pub async fn run(daemon: Arc<Daemon>, listener: Listener, shutdown: impl Future<Output = ()>) {
    // Projects with automatic checkpoints are opened (and watched) now, not at first use.
    for project in daemon.projects.read().await.values() {
        if daemon.config.auto_checkpoint_for(&project.root).is_some() {
            let project = project.clone();
            tokio::spawn(async move {
                if let Err(e) = project.run(|_, _| Ok(())).await {
                    tracing::warn!(root = %project.root.display(), error = %e.message, "cannot open the project");
                }
            });
        }
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    let mut client_stop = stop_rx.clone();
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            _ = client_stop.changed() => break,
            permit = connections.clone().acquire_owned() => permit.expect("semaphore never closed"),
        };
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            _ = client_stop.changed() => break,
            accepted = listener.accept() => accepted,
        };
        match stream {
            Ok(stream) => {
                let daemon = daemon.clone();
                let stop_rx = stop_rx.clone();
                let stop_tx = stop_tx.clone();
                tasks.spawn(async move {
                    serve(daemon, stream, stop_rx, stop_tx).await;
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        // Reap finished connections so the set does not grow without bound.
        while tasks.try_join_next().is_some() {}
    }
    tracing::info!("shutting down: no new connections; finishing in-flight requests");
    let _ = stop_tx.send(true);
    drop(listener);
    while tasks.join_next().await.is_some() {}
    for project in daemon.projects.read().await.values() {
        project.save_index().await;
    }
    tracing::info!("shutdown complete");
}

async fn serve(
    daemon: Arc<Daemon>,
    stream: Stream,
    mut stop: watch::Receiver<bool>,
    stop_tx: watch::Sender<bool>,
) {
    let peer = stream.peer_creds().ok().and_then(|c| c.euid());
    let (read_half, mut write_half) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if write_half.write_all(&line).await.is_err() || write_half.flush().await.is_err() {
                break;
            }
        }
        let _ = write_half.shutdown().await;
    });

    if peer != Some(daemon.uid) {
        tracing::warn!(peer_uid = ?peer, "refusing a connection from another user");
        let err = RpcError::new(
            ErrorCode::PermissionDenied,
            "ckptd only serves its own user",
        );
        let _ = tx.send(error_line(&Value::Null, &err)).await;
        drop(tx);
        let _ = writer.await;
        return;
    }

    let (closed_tx, closed_rx) = watch::channel(false);
    let conn = Arc::new(handlers::Conn {
        tx: tx.clone(),
        closed: closed_rx,
    });
    let limit = daemon.config.max_request_bytes();
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION));
    let mut requests = JoinSet::new();
    let mut reader = BufReader::new(read_half);
    loop {
        let frame = tokio::select! {
            _ = stop.changed() => {
                let _ = closed_tx.send(true);
                break;
            }
            frame = read_frame(&mut reader, limit) => frame,
        };
        match frame {
            // The client is done sending; subscriptions keep streaming until writes fail.
            Ok(None) => break,
            Ok(Some(line)) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Some(line)) => {
                let permit = in_flight
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore never closed");
                let daemon = daemon.clone();
                let tx = tx.clone();
                let stop_tx = stop_tx.clone();
                let conn = conn.clone();
                requests.spawn(async move {
                    let (reply, shutdown) = handlers::handle_line(&daemon, &line, &conn).await;
                    if let Some(reply) = reply {
                        let _ = tx.send(reply).await;
                    }
                    if shutdown {
                        let _ = stop_tx.send(true);
                    }
                    drop(permit);
                });
            }
            Err(FrameError::TooLarge { limit }) => {
                let err = RpcError::new(
                    ErrorCode::RequestTooLarge,
                    format!("request line exceeds {limit} bytes; the connection is closed"),
                );
                let _ = tx.send(error_line(&Value::Null, &err)).await;
                let _ = closed_tx.send(true);
                break;
            }
            Err(FrameError::Io(e)) => {
                tracing::debug!(error = %e, "connection read failed");
                let _ = closed_tx.send(true);
                break;
            }
        }
        while requests.try_join_next().is_some() {}
    }
    while requests.join_next().await.is_some() {}
    drop(conn);
    drop(tx);
    // Subscriptions hold senders too: the writer ends when they end (or a write fails).
    tokio::select! {
        _ = writer => {}
        _ = stop.wait_for(|s| *s) => {
            let _ = closed_tx.send(true);
        }
    }
}
