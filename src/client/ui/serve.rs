//! The page's accept loop: which TCP connections are served, and for how long.
//!
//! A connection from another user's process is closed at once ([`peer`]), before a byte of it
//! is read. A connection that sends no complete request head within [`HEADER_TIMEOUT`] (a
//! slow or silent client, or one kept open between requests) is closed. At most
//! [`MAX_CONNECTIONS`] are served at once; past that, the one idle longest (no request in
//! flight, no event stream open) is closed to make room, and a new one is refused only when
//! every open one is busy. A connection whose event stream the page dropped is closed with it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::Router;
use futures_util::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::peer;

/// How long a connection may take to send a request's head (and may wait between requests).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The open connections: how many requests each has in flight, and since when it is idle.
#[derive(Default)]
struct Slots {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Slot>>,
}

struct Slot {
    busy: Arc<AtomicUsize>,
    idle_since: Arc<Mutex<Instant>>,
    evict: Arc<Notify>,
}

/// A request in flight on a connection: its slot is busy until the answer's body has been
/// sent (or dropped: the page went away).
struct InFlight {
    busy: Arc<AtomicUsize>,
    idle_since: Arc<Mutex<Instant>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self.idle_since.lock() = Instant::now();
        }
    }
}

impl Slots {
    /// A slot for a new connection, closing the one idle longest when all are taken; None when
    /// every open connection is busy.
    fn admit(&self) -> Option<(u64, Slot)> {
        let mut open = self.open.lock();
        if open.len() >= MAX_CONNECTIONS {
            let oldest = open
                .iter()
                .filter(|(_, s)| s.busy.load(Ordering::SeqCst) == 0)
                .min_by_key(|(_, s)| *s.idle_since.lock())
                .map(|(id, _)| *id)?;
            if let Some(slot) = open.remove(&oldest) {
                slot.evict.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Slot {
            busy: Arc::default(),
            idle_since: Arc::new(Mutex::new(Instant::now())),
            evict: Arc::new(Notify::new()),
        };
        let handle = Slot {
            busy: slot.busy.clone(),
            idle_since: slot.idle_since.clone(),
            evict: slot.evict.clone(),
        };
        open.insert(id, slot);
        Some((id, handle))
    }

    fn remove(&self, id: u64) {
        self.open.lock().remove(&id);
    }
}

/// Serves `app` on `listener` to this user's connections until `stop` resolves; then every
/// open connection is closed (after its answer in flight), within a second.
pub async fn serve(listener: TcpListener, app: Router, stop: impl Future<Output = ()>) {
    let me = rustix::process::geteuid().as_raw();
    let slots = Arc::new(Slots::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer_addr) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to close.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (app, slots, stop_rx) = (app.clone(), slots.clone(), stop_rx.clone());
        tasks.spawn(async move {
            let Ok(local) = stream.local_addr() else {
                return;
            };
            let owner = tokio::task::spawn_blocking(move || peer::owner(local, peer_addr)).await;
            match owner {
                Ok(Ok(uid)) if uid == me => {}
                Ok(Ok(uid)) => {
                    say_once(&format!(
                        "refused a connection from another user (uid {uid})"
                    ));
                    return;
                }
                Ok(Err(e)) => {
                    say_once(&format!("refused a connection: {e}"));
                    return;
                }
                Err(_) => return,
            }
            let Some((id, slot)) = slots.admit() else {
                return;
            };
            connection(stream, app, &slot, stop_rx).await;
            slots.remove(id);
        });
        while tasks.try_join_next().is_some() {}
    }
    let _ = stop_tx.send(true);
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
}

/// Says why a connection was refused, the first time only (another user opening a thousand
/// connections must not flood the terminal).
fn say_once(why: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("ckpt ui: {why} (said once)");
    }
}

/// Serves one connection (HTTP/1.1) until the client closes it, it idles past
/// [`HEADER_TIMEOUT`], it is evicted, or the page stops.
async fn connection(
    stream: tokio::net::TcpStream,
    app: Router,
    slot: &Slot,
    mut stop: watch::Receiver<bool>,
) {
    let (busy, idle_since) = (slot.busy.clone(), slot.idle_since.clone());
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        busy.fetch_add(1, Ordering::SeqCst);
        let in_flight = InFlight {
            busy: busy.clone(),
            idle_since: idle_since.clone(),
        };
        let app = app.clone();
        async move {
            let response = app.oneshot(req.map(Body::new)).await?;
            // The slot stays busy while the body streams (an event stream: until the page
            // drops it), and the body's end frees it.
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                let stream = body.into_data_stream().map(move |chunk| {
                    let _held = &in_flight;
                    chunk
                });
                Body::from_stream(stream)
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = slot.evict.notified() => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
}
