//! Running as systemd runs it: a listening socket handed over as fd 3 with `LISTEN_FDS` and
//! `LISTEN_PID`, readiness, watchdog pings and stopping reported on `NOTIFY_SOCKET`.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::*;

/// Reads notifications until one contains `what` (or fails after 20 s).
fn expect(notify: &UnixDatagram, what: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = notify.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            seen.push(text.clone());
            if text.lines().any(|l| l == what) {
                return;
            }
        }
    }
    panic!("no {what} from ckptd; got {seen:?}");
}

#[test]
fn socket_activation_readiness_watchdog_and_stopping() {
    let mut env = TestEnv::without_daemon("");
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    let dir = env.socket.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let notify_path = env.home.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // What systemd does: bind and listen, pass the socket as fd 3, name this process in
    // LISTEN_PID (and WATCHDOG_PID), then exec the daemon.
    let launcher = format!(
        "import os, socket\n\
         s = socket.socket(socket.AF_UNIX)\ns.bind({:?})\ns.listen(16)\n\
         os.dup2(s.fileno(), 3)\nos.set_inheritable(3, True)\n\
         os.environ['LISTEN_FDS'] = '1'\nos.environ['LISTEN_PID'] = str(os.getpid())\n\
         os.environ['WATCHDOG_PID'] = str(os.getpid())\n\
         os.execv({:?}, ['ckptd'])\n",
        env.socket.to_str().unwrap(),
        CKPTD
    );
    let log = std::fs::File::create(env.home.join("ckptd.log")).unwrap();
    let mut cmd = Command::new("/usr/bin/python3");
    env.env(&mut cmd);
    cmd.args(["-c", &launcher])
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "400000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    env.daemon = Some(cmd.spawn().unwrap());
    let mut seen = Vec::new();
    expect(&notify, "READY=1", &mut seen);
    // It serves on the socket it was handed.
    env.watch();
    env.checkpoint("through the activated socket");
    assert!(env.log().contains("activated=true"), "{}", env.log());
    expect(&notify, "WATCHDOG=1", &mut seen);
    let pid = env.daemon.as_ref().unwrap().id();
    signal(pid, "TERM");
    expect(&notify, "STOPPING=1", &mut seen);
    let status = wait_timeout(env.daemon.as_mut().unwrap(), Duration::from_secs(20)).unwrap();
    assert!(status.success(), "{status:?}");
    env.daemon = None;
    // The socket is systemd's: the daemon leaves it for the next activation.
    assert!(env.socket.exists());
}

/// A notification socket whose queue is full (systemd busy, or a stuck listener) never keeps
/// ckptd from serving: readiness goes through once there is room, watchdog pings that cannot
/// be sent are skipped and logged.
#[test]
fn a_full_notification_socket_never_blocks_the_daemon() {
    let mut env = TestEnv::without_daemon("");
    let notify_path = env.home.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    // Filled until the kernel refuses one more datagram.
    let filler = UnixDatagram::unbound().unwrap();
    filler.set_nonblocking(true).unwrap();
    let mut queued = 0;
    while filler.send_to(b"FILLER=1\n", &notify_path).is_ok() {
        queued += 1;
    }
    assert!(queued > 0);
    let log = std::fs::File::create(env.home.join("ckptd.log")).unwrap();
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    cmd.env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "200000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    env.daemon = Some(cmd.spawn().unwrap());
    // It serves although the readiness notice could not be sent.
    env.wait_for_socket();
    env.assert_serving();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !env.log().contains("cannot send systemd a watchdog ping") {
        assert!(Instant::now() < deadline, "{}", env.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Room again: the readiness notice arrives (the queue read to its end).
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut seen = Vec::new();
    expect(&notify, "READY=1", &mut seen);
    env.assert_serving();
}
