//! Pushes and fetches are bounded even by a remote that keeps talking: a server that trickles
//! progress forever and never sends data fails the fetch by its deadline, and whoever stops
//! `ckpt push` by its process group (a terminal, `auto_push`) stops its git too.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::*;
use crate::servers::Trickle;

/// The processes whose command line names `url`.
fn processes_naming(url: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if !zombie && String::from_utf8_lossy(&cmdline).contains(url) {
            found.push(pid);
        }
    }
    found
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_remote_that_trickles_progress_fails_the_fetch_by_its_deadline() {
    let env = TestEnv::new();
    write(&env.proj(), "f.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let trickle = Trickle::start();
    let url = trickle.url();
    let out = env.ckpt(&["remote", "add", "slow", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let started = Instant::now();
    let mut child = cmd
        .current_dir(env.proj())
        .env("CKPT_GIT_DEADLINE_SECONDS", "4")
        .args(["fetch", "slow"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if wait_timeout(&mut child, Duration::from_secs(60)).is_none() {
        let _ = child.kill();
        panic!("the fetch was still waiting on a trickling remote after a minute");
    }
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("fetch from slow") && err.contains("gave up"),
        "{err}"
    );
    assert!(err.contains("Counting objects"), "git's last words: {err}");
    assert!(
        took < Duration::from_secs(10),
        "the fetch gave up after {took:?}"
    );
    wait_until("a git of the fetch outlived it", || {
        processes_naming(&url).is_empty()
    });
    let out = env.ckpt(&["checkpoint", "-m", "after"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.fsck();
    env.assert_serving();
}

/// A `ckpt` running git stopped by its process group, as `auto_push` stops a `ckpt push` past
/// its bound and a terminal's Ctrl-C does: its git goes with it (push and fetch run git the
/// same way; a fetch is what this server holds open).
#[test]
fn stopping_ckpt_by_its_group_stops_its_git() {
    let env = TestEnv::new();
    write(&env.proj(), "f.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let trickle = Trickle::start();
    let url = trickle.url();
    let out = env.ckpt(&["remote", "add", "slow", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .current_dir(env.proj())
        .args(["fetch", "slow"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("git never started", || !processes_naming(&url).is_empty());
    signal_group(child.id(), "KILL");
    let _ = child.wait();
    wait_until("git outlived the ckpt that ran it", || {
        processes_naming(&url).is_empty()
    });
}

fn signal_group(pgid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .status()
        .unwrap();
    assert!(status.success());
}
