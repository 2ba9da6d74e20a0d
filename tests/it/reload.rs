//! Reloading the configuration: SIGHUP and `ckpt reload` apply a valid file at once and keep
//! the old configuration when the new file is broken; `ckpt config check` says which.

use crate::harness::*;

fn config_file(env: &TestEnv) -> std::path::PathBuf {
    env.home.join("config/ckpt/config.toml")
}

/// The paths checkpoint `id` holds (read with git from `store`).
fn recorded(store: &std::path::Path, id: &str) -> Vec<String> {
    git_in(store, &["ls-tree", "-r", "--name-only", id])
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn sighup_with_a_broken_config_keeps_the_old_one_and_a_fixed_one_applies() {
    let env = TestEnv::with_config("[exclusions]\nadd = [\"*.tmp\"]\n");
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    write(&p, "scratch.tmp", "scratch\n");
    env.watch();
    let store = env.store();
    let first = env.checkpoint("before");
    assert!(!recorded(&store, &first)
        .iter()
        .any(|f| f.contains("scratch.tmp")));
    // A broken file: reported, and the old configuration stays in effect.
    std::fs::write(config_file(&env), "[exclusions\nadd = ").unwrap();
    let pid = env.daemon.as_ref().unwrap().id();
    signal(pid, "HUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !env.log().contains("was not reloaded") {
        assert!(std::time::Instant::now() < deadline, "{}", env.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    env.assert_serving();
    // Over the socket, as any client in any language would.
    write(&p, "a.txt", "a2\n");
    let request = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "checkpoint",
        "params": { "project": p } });
    let reply = &env.raw(&[request.to_string().as_bytes()])[0];
    let second = reply["result"]["id"].as_str().unwrap().to_string();
    assert!(!recorded(&store, &second)
        .iter()
        .any(|f| f.contains("scratch.tmp")));
    let reload = br#"{"jsonrpc":"2.0","id":2,"method":"reload"}"#;
    let reply = &env.raw(&[reload])[0];
    assert_eq!(reply["error"]["data"]["kind"], "config_error", "{reply}");
    let out = env.ckpt(&["config", "check"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("unclosed table"), "{}", stderr(&out));
    // The client needs the file only to find the daemon: it warns and goes on.
    let out = env.ckpt(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: invalid config file"),
        "{}",
        stderr(&out)
    );
    // Fixed: `ckpt reload` applies it, and the next checkpoint follows the new rules exactly.
    std::fs::write(config_file(&env), "[retention]\nkeep = 30\n").unwrap();
    let out = env.ckpt(&["config", "check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("keep"), "{}", stdout(&out));
    let out = env.ckpt(&["reload"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let third = env.checkpoint("after the reload");
    assert!(
        recorded(&store, &third)
            .iter()
            .any(|f| f.contains("scratch.tmp")),
        "the exclusion was dropped"
    );
    assert_eq!(env.json(&["verify"])["equal"], true);
    // SIGHUP applies a valid file too.
    std::fs::write(config_file(&env), "[exclusions]\nadd = [\"*.tmp\"]\n").unwrap();
    signal(pid, "HUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        write(&p, "a.txt", &format!("{:?}\n", std::time::Instant::now()));
        let id = env.checkpoint("after SIGHUP");
        if !recorded(&store, &id)
            .iter()
            .any(|f| f.contains("scratch.tmp"))
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "SIGHUP did not apply");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    env.fsck();
}

/// A FIFO named as the configuration file is refused at once (exit 78), never waited on.
#[test]
fn a_fifo_as_the_configuration_file_is_refused_without_hanging() {
    let env = TestEnv::new();
    let fifo = env.home.join("config.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let started = std::time::Instant::now();
    let out = env.ckpt(&["config", "check", fifo.to_str().unwrap()]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
}
