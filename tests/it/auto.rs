//! Automatic checkpoints: recorded once changes settle, only when something changed, in the
//! `default` dialog, kept by their own retention.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

fn autos(env: &TestEnv) -> Vec<Value> {
    env.json(&["list", "--all-sessions", "--dialog", "default"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "auto")
        .cloned()
        .collect()
}

fn wait_for_autos(env: &TestEnv, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = autos(env);
        if found.len() >= n {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "only {} auto checkpoints: {}",
            found.len(),
            env.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until the newest checkpoint of `default` is an automatic one holding `content` at `path`.
fn wait_for_newest_auto(env: &TestEnv, path: &str, content: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = env.json(&["list", "--all-sessions", "--dialog", "default"]);
        let newest = &list[0];
        let id = newest["id"].as_str().unwrap();
        if newest["kind"] == "auto"
            && env.ls_tree(id).contains(&path.to_string())
            && env.git(&["cat-file", "-p", &format!("{id}:{path}")]) == content
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no auto checkpoint with {path} = {content}: {}",
            env.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn automatic_checkpoints_follow_settled_changes() {
    let mut env = TestEnv::with_config("auto_checkpoint = \"2s\"\n[retention]\nauto_keep = 2\n");
    let p = env.proj();
    write(&p, "a.txt", "one");
    env.watch();
    env.checkpoint("base");

    write(&p, "a.txt", "two");
    let found = wait_for_autos(&env, 1);
    assert_eq!(found[0]["dialog"], "default");
    assert_eq!(found[0]["modified"], 1);
    assert_eq!(
        env.git(&[
            "cat-file",
            "-p",
            &format!("{}:a.txt", found[0]["id"].as_str().unwrap())
        ]),
        "two"
    );

    // Changes in excluded files are not a reason for a checkpoint; nor is nothing.
    std::fs::create_dir_all(p.join("node_modules")).unwrap();
    write(&p, "node_modules/x.js", "x");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(autos(&env).len(), 1);

    // While files keep changing nothing is recorded; once they settle, one checkpoint is.
    let busy_until = Instant::now() + Duration::from_secs(3);
    let mut i = 0;
    while Instant::now() < busy_until {
        write(&p, "b.txt", &i.to_string());
        i += 1;
        std::thread::sleep(Duration::from_millis(150));
    }
    assert_eq!(
        autos(&env).len(),
        1,
        "recorded while files were still changing"
    );
    let found = wait_for_autos(&env, 2);
    assert_eq!(
        env.git(&[
            "cat-file",
            "-p",
            &format!("{}:b.txt", found[0]["id"].as_str().unwrap())
        ]),
        (i - 1).to_string()
    );

    // Their own retention keeps the newest two automatic checkpoints.
    write(&p, "c.txt", "c");
    wait_for_newest_auto(&env, "c.txt", "c");
    write(&p, "c.txt", "cc");
    wait_for_newest_auto(&env, "c.txt", "cc");
    assert_eq!(autos(&env).len(), 2, "auto_keep = 2");
    env.fsck();

    // After a restart the project is watched again without any client request.
    env.stop_daemon();
    env.start_daemon();
    write(&p, "d.txt", "after restart");
    wait_for_newest_auto(&env, "d.txt", "after restart");
}
#[test]
fn automatic_checkpoints_are_off_by_default() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one");
    env.watch();
    env.checkpoint("base");
    write(&p, "a.txt", "two");
    std::thread::sleep(Duration::from_secs(3));
    assert!(autos(&env).is_empty());
    // Not merely slow: no timer was started at all.
    assert!(
        !env.log().contains("automatic checkpoints on"),
        "{}",
        env.log()
    );
}
