//! The daemon's life: registrations across restarts, stale and live sockets, graceful
//! shutdown, auto-start by the client, durability across `kill -9`.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::*;

#[test]
fn registrations_and_checkpoints_survive_a_restart() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "v1");
    env.watch();
    let id = env.checkpoint("before restart");
    assert!(env.stop_daemon().success());
    assert!(
        !env.socket.exists(),
        "a graceful shutdown removes the socket"
    );
    env.start_daemon();
    let projects = env.json(&["projects"]);
    assert_eq!(projects[0]["root"], p.to_str().unwrap());
    assert_eq!(env.json(&["list"])[0]["id"], id.as_str());
    // unwatch forgets the project, but the store stays.
    let store = env.store();
    env.json(&["unwatch"]);
    assert_eq!(env.json(&["projects"]), serde_json::json!([]));
    assert!(store.join("objects").is_dir());
    let out = env.ckpt(&["list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not inside a watched project"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("hint:"));
    // Watching again brings the timeline back.
    env.watch();
    assert_eq!(env.json(&["list"])[0]["id"], id.as_str());
}

#[test]
fn a_checkpoint_survives_kill_9() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "durable");
    env.watch();
    let id = env.checkpoint("then the power went out");
    env.kill_daemon();
    assert!(
        env.socket.exists(),
        "a killed daemon leaves its socket behind"
    );
    // The stale socket is replaced by the next daemon.
    env.start_daemon();
    assert_eq!(env.json(&["list"])[0]["id"], id.as_str());
    env.fsck();
    env.git(&["gc", "--prune=now", "--quiet"]);
    std::fs::remove_file(p.join("a.txt")).unwrap();
    env.json(&["restore", &id, "--yes"]);
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "durable");
}

#[test]
fn a_live_daemon_is_never_displaced() {
    let env = TestEnv::new();
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("another ckptd"), "{err}");
    env.assert_serving();
}

#[test]
fn sigterm_lets_in_flight_work_finish() {
    use std::io::{BufRead, Write};
    let mut env = TestEnv::new();
    let p = env.proj();
    for i in 0..3000 {
        write(
            &p,
            &format!("d{}/f{i}.txt", i % 30),
            &"content ".repeat(200),
        );
    }
    env.watch();
    // The request is sent and the daemon has read it before SIGTERM: it is in flight.
    let stream = std::os::unix::net::UnixStream::connect(&env.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "checkpoint",
        "params": {"project": p, "label": "in flight"}});
    (&stream)
        .write_all(format!("{request}\n").as_bytes())
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let plain = |log: String| {
        let mut out = String::new();
        let mut escape = false;
        for ch in log.chars() {
            match (escape, ch) {
                (false, '\x1b') => escape = true,
                (true, 'm') => escape = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    while !plain(env.log()).contains("request method=checkpoint") {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never arrived"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let daemon = env.daemon.as_ref().unwrap().id();
    signal(daemon, "TERM");
    let mut reply = String::new();
    std::io::BufReader::new(&stream)
        .read_line(&mut reply)
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&reply)
        .unwrap_or_else(|e| panic!("the in-flight request was cut off ({e}): {reply:?}"));
    let id = reply["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the in-flight request failed: {reply}"))
        .to_string();
    let status = env.stop_daemon();
    assert!(status.success(), "ckptd exits 0 on SIGTERM");
    env.wait_for_socket_gone();
    let store = env.data_dir().join("projects");
    let store = std::fs::read_dir(store)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let listed = git_in(&store, &["log", "--all", "--format=%H"]);
    assert!(
        listed.contains(&id),
        "the acknowledged checkpoint is in the store"
    );
    assert!(!env.socket.exists());
}

#[test]
fn the_client_starts_a_daemon_when_none_answers() {
    let env = TestEnv::without_daemon("");
    let p = env.proj();
    write(&p, "a.txt", "a");
    // --no-spawn refuses.
    let out = env.ckpt(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no ckptd answers"),
        "{}",
        stderr(&out)
    );
    // Without it, ckpt starts ckptd (found beside itself) and waits for it.
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let out = cmd
        .current_dir(&p)
        .args(["--json", "watch"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let out = cmd
        .current_dir(&p)
        .args(["--json", "status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pid = status["pid"].as_u64().unwrap() as u32;
    assert!(
        env.data_dir().join("ckptd.log").exists(),
        "the spawned daemon logs to the data dir"
    );
    let out = env.ckpt(&["shutdown"]);
    assert!(out.status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "spawned daemon did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_projects_work_independently() {
    let env = TestEnv::new();
    let a = env.proj();
    let b = env.home.join("second");
    write(&a, "a.txt", "a");
    write(&b, "b.txt", "b");
    env.watch();
    let out = env.ckpt_in(&b, &["watch"]);
    assert!(out.status.success());
    let ca = env.checkpoint("in a");
    let out = env.ckpt_in(&b, &["--json", "checkpoint", "-m", "in b"]);
    let cb: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let projects = env.json(&["projects"]);
    let stores: Vec<&str> = projects
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["store"].as_str().unwrap())
        .collect();
    assert_eq!(stores.len(), 2);
    assert_ne!(stores[0], stores[1], "one store per project");
    assert_eq!(env.ls_tree(&ca), vec!["a.txt".to_string()]);
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
    let list_b: serde_json::Value =
        serde_json::from_slice(&env.ckpt_in(&b, &["--json", "list"]).stdout).unwrap();
    assert_eq!(list_b[0]["id"], cb["id"]);
    // A checkpoint id of one project is unknown in the other.
    let out = env.ckpt_in(&b, &["show", &ca]);
    assert_eq!(out.status.code(), Some(1));
}

impl TestEnv {
    fn wait_for_socket_gone(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.socket.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_corrupt_or_stale_stat_cache_never_changes_a_checkpoint() {
    let mut env = TestEnv::new();
    let p = env.proj();
    for i in 0..50 {
        write(&p, &format!("f{i}.txt"), &format!("v1 {i}"));
    }
    env.watch();
    env.checkpoint("one");
    let cache = env.store().join("ckpt-index");
    assert!(env.stop_daemon().success());
    assert!(cache.exists(), "the stat cache is saved at shutdown");

    // Files changed while no daemon ran, some keeping their size: the next checkpoint sees all.
    write(&p, "f1.txt", "v2 1");
    write(&p, "f2.txt", "changed to another size");
    std::fs::remove_file(p.join("f3.txt")).unwrap();
    env.start_daemon();
    let c = env.json(&["checkpoint", "-m", "after restart"]);
    assert_eq!(
        (
            c["added"].as_u64(),
            c["modified"].as_u64(),
            c["deleted"].as_u64()
        ),
        (Some(0), Some(2), Some(1)),
        "{c}"
    );
    assert_eq!(
        env.git(&["show", &format!("{}:f1.txt", c["id"].as_str().unwrap())]),
        "v2 1"
    );
    assert_eq!(env.json(&["verify"])["equal"], true);

    // A corrupt cache is ignored (and says so in the log); checkpoints stay exact.
    assert!(env.stop_daemon().success());
    let mut bytes = std::fs::read(&cache).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&cache, bytes).unwrap();
    write(&p, "f4.txt", "v3 4");
    env.start_daemon();
    let c = env.json(&["checkpoint", "-m", "after corruption"]);
    assert_eq!(c["modified"], 1, "{c}");
    assert_eq!(env.json(&["verify"])["equal"], true);
    assert!(
        env.log().contains("ignoring an unusable stat cache"),
        "the corrupt cache is reported"
    );
}

/// The stat cache is written soon after the first checkpoint (after its reply, out of its
/// way), so a daemon killed right after still starts from it: only the changed file is read.
#[test]
fn the_stat_cache_is_written_without_a_shutdown_and_survives_a_kill() {
    let mut env = TestEnv::new();
    let p = env.proj();
    // Written an hour ago: files written within the last moments are never cached (racy).
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for i in 0..20 {
        write(&p, &format!("f{i}.txt"), &format!("v1 {i}"));
        let f = std::fs::File::options()
            .write(true)
            .open(p.join(format!("f{i}.txt")))
            .unwrap();
        f.set_modified(old).unwrap();
    }
    env.watch();
    env.checkpoint("one");
    let cache = env.store().join("ckpt-index");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cache.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no stat cache after the reply"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // It appears whole (a temporary file renamed into place).
    env.kill_daemon();
    write(&p, "f1.txt", "v2 1");
    env.start_daemon();
    let c = env.json(&["checkpoint", "-m", "after the kill"]);
    assert_eq!(c["modified"], 1, "{c}");
    let log = env.log();
    let hashed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("verified the whole project"))
        .collect();
    assert!(
        hashed.last().is_some_and(|l| l.contains("hashed=1")),
        "the restart re-read more than the changed file: {hashed:?}"
    );
    assert_eq!(env.json(&["verify"])["equal"], true);
}

/// A second daemon on the same data directory is refused even when its socket path differs
/// (a shell without XDG_RUNTIME_DIR, say), naming the running one; the first keeps serving.
#[test]
fn a_second_daemon_on_the_same_data_is_refused() {
    let env = TestEnv::new();
    let first = env.daemon.as_ref().unwrap().id();
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    cmd.env_remove("XDG_RUNTIME_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut second = cmd.spawn().unwrap();
    let Some(status) = wait_timeout(&mut second, Duration::from_secs(20)) else {
        let _ = second.kill();
        panic!("a second ckptd ran on the same data directory");
    };
    assert!(!status.success());
    let err = stderr(&second.wait_with_output().unwrap());
    assert!(err.contains(&format!("pid {first}")), "{err}");
    assert!(err.contains(env.socket.to_str().unwrap()), "{err}");
    env.assert_serving();
}

/// A client without XDG_RUNTIME_DIR finds the daemon that serves its data directory (which
/// records its socket) instead of starting a second one.
#[test]
fn a_client_without_a_runtime_dir_finds_the_running_daemon() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let out = cmd
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir(env.proj())
        .args(["--json", "checkpoint", "-m", "from ssh"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let status = env.json(&["status"]);
    assert_eq!(status["pid"], env.daemon.as_ref().unwrap().id());
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
}

/// Deleting a watched folder is an expected event: no warning in the log (and the log file of
/// a daemon whose stderr is not a terminal has no colour codes).
#[test]
fn deleting_a_watched_folder_is_not_a_warning() {
    let mut env = TestEnv::without_daemon("");
    let p = env.proj();
    write(&p, "sub/deeper/f.txt", "f\n");
    let log = std::fs::File::create(env.home.join("ckptd.log")).unwrap();
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    cmd.env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    env.daemon = Some(cmd.spawn().unwrap());
    env.wait_for_socket();
    env.watch();
    env.checkpoint("with the folder");
    std::fs::remove_dir_all(p.join("sub")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    env.checkpoint("without it");
    // Still watching: nothing was lost, so nothing needs a full verify.
    let status = env.json(&["status"]);
    assert_eq!(status["projects"][0]["mode"], "watching", "{status}");
    assert!(env.stop_daemon().success());
    let log = env.log();
    assert!(!log.contains("WARN"), "{log}");
    assert!(!log.contains('\x1b'), "colour codes in a log file: {log}");
    assert!(log.contains("checkpoint recorded"), "{log}");
}

/// ckptd runs with its allocator settings (it starts itself again once with them, keeping its
/// pid), and keeps a setting the user chose.
#[test]
fn the_daemon_runs_with_its_allocator_settings() {
    let environ = |env: &TestEnv| {
        let pid = env.daemon.as_ref().unwrap().id();
        let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        raw.split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .filter(|v| v.starts_with("MALLOC_"))
            .collect::<Vec<_>>()
    };
    let env = TestEnv::new();
    let vars = environ(&env);
    for set in [
        "MALLOC_MMAP_THRESHOLD_=131072",
        "MALLOC_ARENA_MAX=2",
        "MALLOC_TOP_PAD_=1048576",
    ] {
        assert!(vars.iter().any(|v| v == set), "{set} missing from {vars:?}");
    }
    // Started again through /proc/self/exe, it still goes by its own name (`pgrep ckptd`).
    let pid = env.daemon.as_ref().unwrap().id();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim_end(), "ckptd");
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("runs");
    let mut own = TestEnv::without_daemon("");
    own.start_daemon_under(&["env", "MALLOC_ARENA_MAX=4"]);
    assert_eq!(environ(&own), vec!["MALLOC_ARENA_MAX=4".to_string()]);
    own.assert_serving();
}
