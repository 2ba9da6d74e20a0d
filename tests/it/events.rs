//! Live events: `ckpt events` (and `subscribe` on a raw socket) see edits made by other
//! processes and what ckpt itself does; a subscriber that does not read is dropped, never waited
//! for.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;

/// How long an event may take to arrive (documented latency is far lower; the machine is
/// shared and noisy).
const PATIENCE: Duration = Duration::from_secs(10);

struct Listener {
    child: std::process::Child,
    events: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Listener {
    fn start(env: &TestEnv, diffs: bool) -> Listener {
        let mut cmd = Command::new(ckpt_bin());
        env.env(&mut cmd);
        cmd.current_dir(env.proj()).arg("events");
        if diffs {
            cmd.arg("--diffs");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).expect("one JSON object a line");
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let mut listener = Listener {
            child,
            events,
            seen: Vec::new(),
        };
        // Edits made before the subscription is live are not reported: poke until one is.
        let deadline = Instant::now() + PATIENCE;
        for n in 0.. {
            assert!(
                Instant::now() < deadline,
                "the subscription never went live"
            );
            let name = format!("probe-{n}.txt");
            write(&env.proj(), &name, "probe");
            let got = listener.wait_until(Duration::from_millis(300), |e| e["path"] == name);
            std::fs::remove_file(env.proj().join(&name)).unwrap();
            if got.is_some() {
                break;
            }
        }
        listener
            .wait(|e| e["kind"] == "deleted" && e["path"].as_str().unwrap().starts_with("probe-"));
        listener
    }

    fn wait_until(&mut self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) => {
                    self.seen.push(e.clone());
                    if pred(&e) {
                        return Some(e);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Like `wait`, also accepting an event that arrived already.
    fn seen_or_wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        match self.seen.iter().rev().find(|e| pred(e)) {
            Some(e) => e.clone(),
            None => self.wait(pred),
        }
    }

    fn wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        match self.wait_until(PATIENCE, pred) {
            Some(e) => e,
            None => panic!("no matching event; seen: {:#?}", self.seen),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn file_event<'a>(path: &'a str, kind: &'a str) -> impl Fn(&Value) -> bool + 'a {
    move |e| e["event"] == "file_changed" && e["path"] == path && e["kind"] == kind
}

fn blob_id(content: &str) -> String {
    let mut child = Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Writes through another process, as an agent's shell command would.
fn sh(env: &TestEnv, script: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(env.proj())
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

#[test]
fn events_report_edits_by_other_processes_and_what_ckpt_does() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    write(&p, ".gitignore", "*.log\n");
    env.watch();
    env.checkpoint("base");
    let mut events = Listener::start(&env, true);

    // A modification of a file the last checkpoint holds, with its diff and blob id.
    sh(&env, "printf 'one\\ntwo\\n' > a.txt");
    let e = events.wait(file_event("a.txt", "modified"));
    assert_eq!(e["id"], blob_id("one\ntwo\n"));
    assert_eq!(e["mode"], "100644");
    let diff = e["diff"].as_str().unwrap();
    assert!(
        diff.contains("--- a/a.txt") && diff.contains("+two"),
        "{diff}"
    );
    assert_eq!(e["project"], p.canonicalize().unwrap().to_str().unwrap());

    // Creation, then deletion; excluded and ignored files are never reported; a rewrite with
    // the same bytes is not a change.
    sh(&env, "echo new > b.txt && mkdir -p node_modules && echo x > node_modules/x.js && echo l > debug.log");
    let e = events.wait(file_event("b.txt", "created"));
    assert_eq!(e["id"], blob_id("new\n"));
    sh(&env, "echo new > b.txt && rm a.txt && echo marker > c.txt");
    events.wait(file_event("a.txt", "deleted"));
    events.wait(file_event("c.txt", "created"));

    // A folder created after the last checkpoint: its files, and later edits inside it.
    sh(&env, "mkdir -p fresh/deep && echo 1 > fresh/deep/f.txt");
    events.wait(file_event("fresh/deep/f.txt", "created"));
    std::thread::sleep(Duration::from_millis(100));
    sh(&env, "echo 2 > fresh/deep/f.txt");
    let e = events.wait(file_event("fresh/deep/f.txt", "modified"));
    assert!(e["diff"].as_str().unwrap().contains("-1\n+2"), "{e}");

    // What ckpt does.
    let c = env.json(&["checkpoint", "-m", "after edits"]);
    let e = events.wait(|e| e["event"] == "checkpoint_created" && e["kind"] == "manual");
    assert_eq!(e["id"], c["id"]);
    assert_eq!(e["label"], "after edits");
    let first = env.json(&["list"]).as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = env.json(&["restore", &first, "--yes"]);
    let e = events.wait(|e| e["event"] == "restored");
    assert_eq!(e["restored_to"], first.as_str());
    assert_eq!(e["undo_checkpoint"], r["undo_checkpoint"]);
    assert_eq!(e["restore_checkpoint"], r["restore_checkpoint"]);
    // The restore's own writes are file changes too (they may come before `restored`).
    events.seen_or_wait(file_event("a.txt", "created"));
    env.json(&["session", "approve", "-m", "fine"]);
    let e = events.wait(|e| e["event"] == "session_approved");
    assert_eq!(e["dialog"], "default");
    write(&p, "a.txt", "scrap");
    env.json(&["session", "reset", "--yes"]);
    let e = events.wait(|e| e["event"] == "session_reset");
    assert_eq!(e["dialog"], "default");

    for e in &events.seen {
        let path = e["path"].as_str().unwrap_or("");
        assert!(
            !path.starts_with("node_modules")
                && !path.ends_with(".log")
                && !path.contains(".ckpt-tmp"),
            "excluded path reported: {e}"
        );
        assert!(
            !(e["path"] == "b.txt" && e["kind"] == "modified"),
            "same bytes reported as a change: {e}"
        );
    }
    env.fsck();
}

#[test]
fn events_without_diffs_leave_them_out() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "one\n");
    env.watch();
    env.checkpoint("base");
    let mut events = Listener::start(&env, false);
    sh(&env, "echo two >> a.txt");
    let e = events.wait(file_event("a.txt", "modified"));
    assert!(e.get("diff").is_none(), "{e}");
}

#[test]
fn a_subscriber_that_does_not_read_is_dropped_and_never_slows_checkpoints() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "x");
    env.watch();
    env.checkpoint("base");
    let mut stream = UnixStream::connect(&env.socket).unwrap();
    let request = json!({ "jsonrpc": "2.0", "id": 1, "method": "subscribe",
        "params": { "project": p, "diffs": true } });
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    // Do not read. Make far more events than the backlog and the socket buffers hold.
    std::thread::sleep(Duration::from_millis(300));
    let dir = p.join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..6000 {
        std::fs::write(
            dir.join(format!("f{i:05}.txt")),
            format!("file number {i}\n"),
        )
        .unwrap();
    }
    // Checkpoints go on meanwhile.
    let c = env.json(&["checkpoint", "-m", "while a subscriber sleeps"]);
    assert_eq!(c["added"], 6000);
    let c = env.json(&["checkpoint", "-m", "and again"]);
    assert_eq!(c["seq"], 3);

    // Now read: the reply, some events, and a final error event.
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.push_str(std::str::from_utf8(&buf[..n]).unwrap()),
            Err(_) if text.contains("\"event\":\"error\"") => break,
            Err(_) => {}
        }
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["id"], 1, "the reply comes first: {}", lines[0]);
    assert!(lines.len() > 2);
    let last = &lines[lines.len() - 1];
    assert_eq!(last["params"]["event"], "error", "{last}");
    assert!(
        last["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("too slow"),
        "{last}"
    );
    env.assert_serving();
}

#[test]
fn a_subscription_is_live_when_its_reply_arrives_even_before_any_checkpoint() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "sub/old.txt", "old\n");
    env.watch();
    let stream = UnixStream::connect(&env.socket).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let request = json!({ "jsonrpc": "2.0", "id": 1, "method": "subscribe",
        "params": { "project": p } });
    writer.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["id"], 1, "{reply}");
    // The very first edits after the reply, at the root and in a folder, are reported.
    write(&p, "first.txt", "one\n");
    write(&p, "sub/old.txt", "changed\n");
    let mut seen = Vec::new();
    while !(seen.contains(&"first.txt".to_string()) && seen.contains(&"sub/old.txt".to_string())) {
        line.clear();
        reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("no event within {PATIENCE:?} ({e}); saw {seen:?}"));
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["params"]["event"] == "file_changed" {
            seen.push(event["params"]["path"].as_str().unwrap().to_string());
        }
    }
}

#[test]
fn bad_subscriptions_are_refused() {
    let env = TestEnv::new();
    env.watch();
    let outside = env.home.join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let replies = env.raw(&[
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{{"project":"{}"}}}}"#,
            outside.display()
        )
        .as_bytes(),
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{{"project":"{}","diff":true}}}}"#,
            env.proj().display()
        )
        .as_bytes(),
        br#"{"jsonrpc":"2.0","id":3,"method":"subscribe"}"#,
    ]);
    assert_eq!(
        replies[0]["error"]["data"]["kind"], "not_a_project",
        "{}",
        replies[0]
    );
    assert_eq!(
        replies[1]["error"]["data"]["kind"], "invalid_params",
        "{}",
        replies[1]
    );
    assert_eq!(
        replies[2]["error"]["data"]["kind"], "invalid_params",
        "{}",
        replies[2]
    );
    env.assert_serving();
}

/// Subscribers that go away (an interrupted `ckpt events`, a closed page) are dropped when
/// their connection ends, not at the project's next event: 1,100 of them come and go under a
/// limit of 1,024 open files, and a checkpoint of another project still succeeds, with the
/// daemon's descriptors back to where they were.
#[test]
fn subscribers_that_go_away_free_their_sockets_at_once() {
    let mut env = TestEnv::without_daemon("");
    // Soft and hard: the daemon cannot raise it, as under a strict service manager.
    env.start_daemon_under(&["prlimit", "--nofile=1024:1024"]);
    let p = env.proj();
    write(&p, "a.txt", "x");
    env.watch();
    env.checkpoint("base");
    let other = env.home.join("other");
    write(&other, "b.txt", "y");
    let out = env.ckpt_in(&other, &["watch"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let daemon = env.daemon.as_ref().unwrap().id();
    let fds = || {
        std::fs::read_dir(format!("/proc/{daemon}/fd"))
            .unwrap()
            .count()
    };
    let before = fds();
    let request = json!({ "jsonrpc": "2.0", "id": 1, "method": "subscribe",
        "params": { "project": p } });
    for round in 0..1100 {
        let stream = UnixStream::connect(&env.socket).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut writer = stream.try_clone().unwrap();
        writer.write_all(format!("{request}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(stream)
            .read_line(&mut reply)
            .unwrap_or_else(|e| panic!("subscriber {round}: no reply ({e})"));
        assert!(
            reply.contains("\"subscribed\""),
            "subscriber {round}: {reply}"
        );
    }
    let out = env.ckpt_in(&other, &["checkpoint", "-m", "after the crowd"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(10);
    while fds() > before + 10 {
        assert!(
            Instant::now() < deadline,
            "{} descriptors, {before} before",
            fds()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    env.assert_serving();
}

/// Starts ckptd in a user namespace of its own whose inotify watch limit is `limit`, so that
/// running out of watches can be shown without touching the machine's limits. None when this
/// machine does not allow unprivileged user namespaces.
fn daemon_with_watch_limit(env: &mut TestEnv, limit: u32) -> Option<()> {
    let probe = Command::new("unshare")
        .args(["-U", "-r", "sh", "-c"])
        .arg("echo 5 > /proc/sys/user/max_inotify_watches")
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return None;
    }
    let log = std::fs::File::create(env.home.join("ckptd.log")).unwrap();
    let mut cmd = Command::new("unshare");
    env.env(&mut cmd);
    cmd.args(["-U", "-r", "sh", "-c"])
        .arg(format!(
            "echo {limit} > /proc/sys/user/max_inotify_watches && exec \"$0\"",
        ))
        .arg(CKPTD)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    env.daemon = Some(cmd.spawn().unwrap());
    env.wait_for_socket();
    Some(())
}

#[test]
fn running_out_of_watches_is_reported_and_checkpoints_stay_exact() {
    let mut env = TestEnv::without_daemon("");
    if daemon_with_watch_limit(&mut env, 8).is_none() {
        eprintln!("skipped: this machine has no unprivileged user namespaces (unshare -U -r)");
        return;
    }
    let p = env.proj();
    write(&p, "a/x.txt", "x\n");
    env.watch();
    env.checkpoint("base");
    let mut events = Listener::start(&env, false);
    // More folders than the namespace allows watches for.
    for i in 0..20 {
        write(&p, &format!("d{i:02}/f.txt"), &format!("{i}\n"));
    }
    let c = env.json(&["checkpoint", "-m", "many folders"]);
    assert_eq!(c["added"], 20, "{c}");
    let e = events.seen_or_wait(|e| e["event"] == "watch_degraded");
    assert!(e["reason"].as_str().unwrap().contains("watch limit"), "{e}");
    let status = env.json(&["status"]);
    let mode = status["projects"][0]["mode"].as_str().unwrap();
    assert!(mode.starts_with("degraded"), "{status}");
    // Without watches every checkpoint verifies by stat: still exact.
    write(&p, "d07/f.txt", "changed\n");
    write(&p, "d19/g.txt", "new\n");
    let c = env.json(&["checkpoint", "-m", "after"]);
    assert_eq!(
        (c["added"].as_u64(), c["modified"].as_u64()),
        (Some(1), Some(1)),
        "{c}"
    );
    let verify = env.json(&["verify"]);
    assert_eq!(verify["equal"], true, "{verify}");
    env.fsck();
}
