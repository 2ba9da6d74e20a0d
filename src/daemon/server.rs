//! The accept loop and the connections.
//!
//! Each connection has a reader task that reads one line at a time (capped in size, and a
//! started line must finish within [`LINE_TIMEOUT`]) and a serve loop that spawns a task per
//! request and sends replies through a writer task, so requests pipeline. A connection with
//! nothing in flight and no subscription is closed after [`IDLE_TIMEOUT`]; when
//! [`MAX_CONNECTIONS`] are open, the one idle longest makes room for a new one, so stalled
//! or idle clients can never lock a well-behaved one out. Subscribed connections (event
//! streams) have slots of their own, at most [`handlers::MAX_SUBSCRIBERS`], so requests always have
//! room; a subscription ends when its client closes the connection (EOF), not at the
//! project's next event. On shutdown the loop stops
//! accepting, each connection stops reading, and every request already started runs to
//! completion (within [`SHUTDOWN_GRACE`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::tokio::Listener as _;
use interprocess::local_socket::traits::StreamCommon as _;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tokio::task::JoinSet;

use super::{handlers, Daemon};
use crate::protocol::{error_line, read_frame, ErrorCode, FrameError, RpcError};

/// Requests one connection may have in flight at once.
const MAX_IN_FLIGHT_PER_CONNECTION: usize = 32;
/// Connections open at once (event streams not counted); past this, the connection idle
/// longest is closed to make room.
pub const MAX_CONNECTIONS: usize = 256;
/// A connection with nothing in flight and no subscription is closed after this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Once a request line has started, the rest of it must arrive within this long.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for in-flight requests before it gives up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Handles one request in a task of its own, so that a handler that panics (a bug) costs only
/// that request: the client gets an `internal_error` reply, the panic is logged, and the
/// connection and the daemon keep serving.
async fn handle_guarded(
    daemon: Arc<Daemon>,
    line: Vec<u8>,
    conn: Arc<handlers::Conn>,
) -> (Option<Vec<u8>>, bool) {
    let line = Arc::new(line);
    let shared = line.clone();
    let task = tokio::spawn(async move { handlers::handle_line(&daemon, &shared, &conn).await });
    match task.await {
        Ok(outcome) => outcome,
        Err(e) => {
            // Only now is the line read again, for the id to answer with.
            let id = serde_json::from_slice::<Value>(&line)
                .ok()
                .and_then(|v| v.get("id").cloned());
            let why = if e.is_panic() {
                "panicked"
            } else {
                "was cancelled"
            };
            tracing::error!(error = %e, "a request handler {why}");
            let err = RpcError::new(
                ErrorCode::Internal,
                format!("the daemon failed while handling this request (its handler {why}; see the daemon log)"),
            );
            (id.map(|id| error_line(&id, &err)), false)
        }
    }
}

/// The open connections, which of them are idle (and since when), and the permits of the
/// event streams.
struct Connections {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Slot>>,
    subscribers: Arc<Semaphore>,
}

impl Default for Connections {
    fn default() -> Connections {
        Connections {
            next: AtomicU64::new(0),
            open: Mutex::default(),
            subscribers: Arc::new(Semaphore::new(handlers::MAX_SUBSCRIBERS)),
        }
    }
}

struct Slot {
    idle_since: Option<Instant>,
    /// Streams events: counted among the subscribers, not the request slots.
    subscribed: bool,
    evict: Arc<Notify>,
}

impl Connections {
    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<u64, Slot>> {
        self.open.lock()
    }

    fn register(&self) -> (u64, Arc<Notify>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let evict = Arc::new(Notify::new());
        self.lock().insert(
            id,
            Slot {
                idle_since: None,
                subscribed: false,
                evict: evict.clone(),
            },
        );
        (id, evict)
    }

    fn set_state(&self, id: u64, idle: bool, subscribed: bool) {
        if let Some(slot) = self.lock().get_mut(&id) {
            slot.subscribed = subscribed;
            match (idle, slot.idle_since) {
                (true, None) => slot.idle_since = Some(Instant::now()),
                (false, Some(_)) => slot.idle_since = None,
                _ => {}
            }
        }
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Makes room for one more connection: false when all are busy.
    fn make_room(&self) -> bool {
        let mut open = self.lock();
        if open.values().filter(|s| !s.subscribed).count() < MAX_CONNECTIONS {
            return true;
        }
        let oldest = open
            .iter()
            .filter_map(|(id, s)| s.idle_since.map(|t| (t, *id)))
            .min();
        match oldest {
            Some((_, id)) => {
                if let Some(slot) = open.remove(&id) {
                    slot.evict.notify_one();
                }
                true
            }
            None => false,
        }
    }
}

/// Serves `listener` until `shutdown` resolves (or a client calls `shutdown`), then waits for
/// in-flight work and returns. Dropping the listener removes the socket file.
pub async fn run(daemon: Arc<Daemon>, listener: Listener, shutdown: impl Future<Output = ()>) {
    // The projects likely to be asked about are opened and verified now, in the background.
    let warming = tokio::spawn(super::warm::warm_up(daemon.clone()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let connections = Arc::new(Connections::default());
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    let mut client_stop = stop_rx.clone();
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            _ = client_stop.changed() => break,
            accepted = listener.accept() => accepted,
        };
        match stream {
            Ok(stream) if connections.make_room() => {
                let daemon = daemon.clone();
                let stop_rx = stop_rx.clone();
                let stop_tx = stop_tx.clone();
                let connections = connections.clone();
                tasks.spawn(async move {
                    serve(daemon, stream, stop_rx, stop_tx, connections).await;
                });
            }
            Ok(stream) => {
                tracing::warn!(
                    limit = MAX_CONNECTIONS,
                    "refusing a connection: every open one is busy"
                );
                tasks.spawn(refuse(stream));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Reap finished connections so the set does not grow without bound.
        while tasks.try_join_next().is_some() {}
    }
    tracing::info!("shutting down: no new connections; finishing in-flight requests");
    // A warm-up still under way stops at the project it is on (which finishes like a request).
    warming.abort();
    let _ = stop_tx.send(true);
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::error!(grace = ?SHUTDOWN_GRACE, "in-flight requests did not finish in time; stopping anyway");
        tasks.abort_all();
    }
    for project in daemon.projects.read().await.values() {
        let saved = tokio::time::timeout(SHUTDOWN_GRACE, project.close()).await;
        if saved.is_err() {
            tracing::warn!(root = %project.root.display(), "the project is still busy; its stat cache is not saved, its journal not settled");
        }
    }
    tracing::info!("shutdown complete");
}

/// Tells a client there is no room (every connection is busy) and closes.
async fn refuse(stream: Stream) {
    let err = RpcError::new(
        ErrorCode::ShuttingDown,
        format!("ckptd is busy: {MAX_CONNECTIONS} connections are in use; try again"),
    );
    let (_, mut write_half) = tokio::io::split(stream);
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        write_half.write_all(&error_line(&Value::Null, &err)),
    )
    .await;
}

// One select loop over a connection's whole life (reading, idle, in flight, subscribed,
// closing): its states share the loop's locals, so it stays one function.
async fn serve(
    daemon: Arc<Daemon>,
    stream: Stream,
    mut stop: watch::Receiver<bool>,
    stop_tx: watch::Sender<bool>,
    connections: Arc<Connections>,
) {
    let peer = stream.peer_creds().ok().and_then(|c| c.euid());
    let (read_half, write_half) = tokio::io::split(stream);
    let (tx, writer) = spawn_writer(write_half);

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

    let (slot, evicted) = connections.register();
    let (closed_tx, closed_rx) = watch::channel(false);
    let conn = Arc::new(handlers::Conn {
        tx: tx.clone(),
        closed: closed_rx,
        subscribed: Default::default(),
        subscribers: connections.subscribers.clone(),
    });
    let (mut frames, reader) = spawn_reader(read_half, daemon.config().max_request_bytes());
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION));
    let mut requests = JoinSet::new();
    let fail = |err: RpcError| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(error_line(&Value::Null, &err)).await;
        }
    };
    loop {
        while requests.try_join_next().is_some() {}
        let subscribed = conn.subscribed.load(Ordering::Relaxed);
        let idle = requests.is_empty() && !subscribed;
        connections.set_state(slot, idle, subscribed);
        let idle_timer = async {
            match idle {
                true => tokio::time::sleep(IDLE_TIMEOUT).await,
                false => std::future::pending().await,
            }
        };
        let frame = tokio::select! {
            _ = stop.changed() => break,
            _ = evicted.notified(), if idle => {
                tracing::debug!("closing the connection idle longest to make room for a new one");
                fail(RpcError::new(ErrorCode::ShuttingDown, "closed: idle while every connection was in use")).await;
                break;
            }
            _ = idle_timer => {
                tracing::debug!(timeout = ?IDLE_TIMEOUT, "closing an idle connection");
                break;
            }
            Some(_) = requests.join_next(), if !requests.is_empty() => continue,
            frame = frames.recv() => frame,
        };
        match frame {
            // The client closed the connection: its subscriptions end with it (a dead
            // subscriber must not hold a socket until the project's next event).
            None | Some(Ok(None)) => break,
            Some(Ok(Some(line))) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Some(Ok(Some(line))) => {
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
                    let (reply, shutdown) = handle_guarded(daemon, line, conn).await;
                    if let Some(reply) = reply {
                        let _ = tx.send(reply).await;
                    }
                    if shutdown {
                        let _ = stop_tx.send(true);
                    }
                    drop(permit);
                });
            }
            Some(Err(e)) => {
                if let Some(err) = closing_error(e) {
                    fail(err).await;
                }
                break;
            }
        }
    }
    // Whatever ended the connection ends its subscriptions (the client closed it, or it was
    // closed for a framing error or a shutdown): none outlives it, waiting for an event.
    let _ = closed_tx.send(true);
    connections.remove(slot);
    reader.abort();
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

/// The task that writes a connection's lines, in order, until every sender is gone or a write
/// fails; and the sender of those lines.
fn spawn_writer<W>(mut write_half: W) -> (mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<()>)
where
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if write_half.write_all(&line).await.is_err() || write_half.flush().await.is_err() {
                break;
            }
        }
        let _ = write_half.shutdown().await;
    });
    (tx, writer)
}

/// One request line read from a connection (None: the connection ended), or why none could be.
type Frame = Result<Option<Vec<u8>>, FrameError>;

/// The task that reads a connection's request lines (at most `limit` bytes each, each finished
/// within [`LINE_TIMEOUT`]), never cancelled in the middle of one; it ends with the connection
/// or its first error, which it passes on too.
fn spawn_reader<R>(read_half: R, limit: u64) -> (mpsc::Receiver<Frame>, tokio::task::JoinHandle<()>)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let (frames_tx, frames) = mpsc::channel(1);
    let reader = tokio::spawn(async move {
        let mut reader = BufReader::new(read_half);
        loop {
            let frame = read_frame(&mut reader, limit, LINE_TIMEOUT).await;
            let last = !matches!(frame, Ok(Some(_)));
            if frames_tx.send(frame).await.is_err() || last {
                break;
            }
        }
    });
    (frames, reader)
}

/// What a client is told when its connection is closed for a read error, if anything.
fn closing_error(e: FrameError) -> Option<RpcError> {
    match e {
        FrameError::TooLarge { limit } => Some(RpcError::new(
            ErrorCode::RequestTooLarge,
            format!("request line exceeds {limit} bytes; the connection is closed"),
        )),
        e @ FrameError::Stalled(_) => {
            tracing::debug!(error = %e, "closing a stalled connection");
            Some(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("{e}; the connection is closed"),
            ))
        }
        FrameError::Io(e) => {
            tracing::debug!(error = %e, "connection read failed");
            None
        }
    }
}
