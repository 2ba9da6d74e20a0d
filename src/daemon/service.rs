//! Running under systemd: the listening socket handed over by socket activation
//! (`LISTEN_FDS`/`LISTEN_PID`), and the `sd_notify` protocol (`READY=1`, `STOPPING=1`,
//! `WATCHDOG=1`), whose notices never block the daemon (a full queue is retried from a thread
//! with a bound, or skipped and logged). Outside systemd every call here does nothing.

use std::os::fd::OwnedFd;
use std::time::Duration;

use interprocess::local_socket::tokio::Listener;
use interprocess::os::unix::uds_local_socket::tokio::Listener as UdsListener;

/// The listening socket systemd passed (the first of `LISTEN_FDS`), if it passed one to this
/// process. Must run inside the tokio runtime.
pub fn activated_listener() -> std::io::Result<Option<Listener>> {
    let mut fds = listenfd::ListenFd::from_env();
    let Some(listener) = fds.take_unix_listener(0)? else {
        return Ok(None);
    };
    listener.set_nonblocking(true)?;
    let listener = UdsListener::try_from(OwnedFd::from(listener))?;
    Ok(Some(Listener::from(listener)))
}

/// Tells systemd the daemon serves (a no-op without `NOTIFY_SOCKET`).
pub fn ready() {
    notify_until_sent("READY=1\nSTATUS=serving\n");
}

/// Tells systemd the daemon is stopping: in-flight work is finishing.
pub fn stopping() {
    notify_until_sent("STOPPING=1\nSTATUS=finishing in-flight work\n");
}

/// How long a notice that systemd's queue cannot take yet is tried again, in the background.
const NOTIFY_PATIENCE: Duration = Duration::from_secs(10);

/// Sends `state` without ever blocking the daemon: where systemd's queue is full, a thread
/// tries again for [`NOTIFY_PATIENCE`], then gives up (logged).
fn notify_until_sent(state: &'static str) {
    match notify(state) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + NOTIFY_PATIENCE;
                loop {
                    std::thread::sleep(Duration::from_millis(50));
                    match notify(state) {
                        Ok(()) => return,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if std::time::Instant::now() >= deadline {
                                tracing::warn!(
                                    state = state.trim_end(),
                                    "systemd's notification socket stayed full; gave up telling it"
                                );
                                return;
                            }
                        }
                        Err(e) => return tracing::warn!(error = %e, "cannot notify systemd"),
                    }
                }
            });
        }
        Err(e) => tracing::warn!(error = %e, "cannot notify systemd"),
    }
}

/// Sends one `sd_notify` datagram to `NOTIFY_SOCKET` (a path, or `@name` for the abstract
/// namespace), never blocking: a full queue is `WouldBlock`. Nothing to do without it.
fn notify(state: &str) -> std::io::Result<()> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let socket = std::os::unix::net::UnixDatagram::unbound()?;
    socket.set_nonblocking(true)?;
    let bytes = target.as_encoded_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)?
        }
        None => std::os::unix::net::SocketAddr::from_pathname(std::path::Path::new(&target))?,
    };
    let sent = socket.send_to_addr(state.as_bytes(), &addr)?;
    if sent != state.len() {
        return Err(std::io::Error::other("the notice was cut short"));
    }
    Ok(())
}

/// The watchdog interval systemd asks for (`WATCHDOG_USEC`, for this process if
/// `WATCHDOG_PID` names one), if any.
fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// When the unit sets `WatchdogSec`, pings systemd at half that interval for as long as the
/// runtime runs (a hung runtime stops the pings, and systemd restarts the daemon). A ping
/// that cannot be sent at once is skipped (logged); the next one follows.
pub fn start_watchdog() {
    let Some(interval) = watchdog_interval() else {
        return;
    };
    let every = interval / 2;
    tracing::info!(?every, "systemd watchdog on");
    tokio::spawn(async move {
        loop {
            if let Err(e) = notify("WATCHDOG=1\n") {
                tracing::warn!(error = %e, "cannot send systemd a watchdog ping");
            }
            tokio::time::sleep(every).await;
        }
    });
}
