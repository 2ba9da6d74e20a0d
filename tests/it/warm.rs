//! The warm-up as ckptd starts: registered projects (the most recently used first, up to
//! `warm_up`) are opened, watched and verified in the background; a checkpoint taken during or
//! after it still equals the files, and `warm_up = 0` turns it off.

use std::time::{Duration, Instant};

use crate::harness::*;

/// Waits until the daemon's log has `n` "warmed up" lines.
fn wait_warmed(env: &TestEnv, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while env.log().matches("warmed up").count() < n {
        assert!(Instant::now() < deadline, "no warm-up; log:\n{}", env.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_started_daemon_verifies_its_projects_before_the_first_prompt_and_stays_exact() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    write(&p, "dir/b.txt", "two\n");
    env.watch();
    env.checkpoint("before the stop");
    // A second project, and one whose folder is gone: neither stops the warm-up.
    let other = env.home.join("other");
    write(&other, "o.txt", "other\n");
    env.json_in(&other, &["watch"]);
    let gone = env.home.join("gone");
    write(&gone, "g.txt", "gone\n");
    env.json_in(&gone, &["watch"]);
    env.stop_daemon();
    std::fs::remove_dir_all(&gone).unwrap();

    // Changed while no daemon ran: the warm-up's verify must find them.
    write(&p, "a.txt", "one, changed while stopped\n");
    std::fs::remove_file(p.join("dir/b.txt")).unwrap();
    write(&p, "new.txt", "new while stopped\n");
    env.start_daemon();
    // Changed while the warm-up may be under way, then after it.
    write(&p, "racing.txt", "written as the daemon started\n");
    wait_warmed(&env, 2);
    write(&p, "after.txt", "after the warm-up\n");
    let id = env.checkpoint("first after the start");
    let store = env.store_of(&p);
    let files = git_in(&store, &["ls-tree", "-r", "--name-only", &id]);
    assert_eq!(
        files.lines().collect::<Vec<_>>(),
        ["a.txt", "after.txt", "new.txt", "racing.txt"],
        "{}",
        env.log()
    );
    let a = git_in(&store, &["cat-file", "-p", &format!("{id}:a.txt")]);
    assert_eq!(a, "one, changed while stopped\n");
    env.assert_serving();
    git_in(&store, &["fsck", "--strict"]);
}

#[test]
fn warm_up_zero_opens_nothing_at_start() {
    let mut env = TestEnv::with_config("warm_up = 0\n");
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    env.checkpoint("one");
    env.stop_daemon();
    env.start_daemon();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!env.log().contains("warmed up"), "{}", env.log());
    write(&p, "a.txt", "two\n");
    let id = env.checkpoint("two");
    assert_eq!(
        env.git(&["cat-file", "-p", &format!("{id}:a.txt")]),
        "two\n"
    );
}

/// A project opened at start but never verified (no warm-up, only a `list`) keeps its stat cache
/// as it was at shutdown: the next start still re-reads nothing.
#[test]
fn a_project_opened_and_not_verified_keeps_its_stat_cache() {
    let mut env = TestEnv::with_config("warm_up = 0\n");
    let p = env.proj();
    for i in 0..50 {
        write(&p, &format!("f{i}.txt"), &format!("file {i}\n"));
    }
    // Past the racy window: the files go into the stat cache.
    std::thread::sleep(Duration::from_millis(1500));
    env.watch();
    env.checkpoint("one");
    let cache = env.store_of(&p).join("ckpt-index");
    env.stop_daemon();
    let saved = std::fs::read(&cache).unwrap();
    assert!(saved.len() > 50 * 64, "the stat cache holds the files");

    env.start_daemon();
    env.json(&["list"]);
    env.stop_daemon();
    assert_eq!(std::fs::read(&cache).unwrap(), saved);

    env.start_daemon();
    let log_before = env.log().len();
    env.checkpoint("two");
    let log = &env.log()[log_before..];
    assert!(
        log.contains("verified the whole project") && log.contains("hashed=0"),
        "{log}"
    );
}

/// A `warm_up` that is not a count is refused by `config check` (and by a reload, the running
/// daemon keeping what it had), naming the key.
#[test]
fn a_bad_warm_up_is_a_clear_error_and_the_daemon_keeps_serving() {
    let env = TestEnv::new();
    for bad in ["warm_up = \"eight\"\n", "warm_up = -1\n", "warm_up = 1.5\n"] {
        let file = env.home.join("bad.toml");
        std::fs::write(&file, bad).unwrap();
        let out = env.ckpt(&["config", "check", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(78), "{bad}");
        assert!(stderr(&out).contains("warm_up"), "{bad}: {}", stderr(&out));
        std::fs::write(env.home.join("config/ckpt/config.toml"), bad).unwrap();
        let out = env.ckpt(&["reload"]);
        assert!(!out.status.success(), "{bad}");
        env.assert_serving();
    }
}
