//! Running under systemd: the listening socket handed over by socket activation
//! (`LISTEN_FDS`/`LISTEN_PID`), and the `sd_notify` protocol (`READY=1`, `STOPPING=1`,
//! `WATCHDOG=1`). Outside systemd every call here does nothing.

use std::os::fd::OwnedFd;
use std::time::Duration;

use interprocess::local_socket::tokio::Listener;
use interprocess::os::unix::uds_local_socket::tokio::Listener as UdsListener;
use sd_notify::NotifyState;

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
    notify(&[NotifyState::Ready, NotifyState::Status("serving")]);
}

/// Tells systemd the daemon is stopping: in-flight work is finishing.
pub fn stopping() {
    notify(&[
        NotifyState::Stopping,
        NotifyState::Status("finishing in-flight work"),
    ]);
}

fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

/// When the unit sets `WatchdogSec`, pings systemd at half that interval for as long as the
/// runtime runs (a hung runtime stops the pings, and systemd restarts the daemon).
pub fn start_watchdog() {
    let mut usec = 0;
    if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
        return;
    }
    let every = Duration::from_micros(usec / 2);
    tracing::info!(?every, "systemd watchdog on");
    tokio::spawn(async move {
        loop {
            notify(&[NotifyState::Watchdog]);
            tokio::time::sleep(every).await;
        }
    });
}
