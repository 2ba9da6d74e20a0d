//! The command line: global options anywhere, human output, -C, exit codes.

use crate::harness::*;

#[test]
fn global_options_go_before_or_after_the_subcommand() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a");
    env.watch();
    env.checkpoint("one");
    let sock = env.socket.to_str().unwrap();
    let elsewhere = env.home.clone();
    for args in [
        vec![
            "--json",
            "--socket",
            sock,
            "-C",
            p.to_str().unwrap(),
            "list",
        ],
        vec![
            "list",
            "--json",
            "--socket",
            sock,
            "-C",
            p.to_str().unwrap(),
        ],
        vec![
            "-C",
            p.to_str().unwrap(),
            "list",
            "--socket",
            sock,
            "--json",
        ],
    ] {
        let out = env.ckpt_in(&elsewhere, &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 1, "{args:?}");
    }
    // -C may name a subdirectory of the project.
    write(&p, "deep/er/x.txt", "x");
    let out = env.ckpt_in(
        &elsewhere,
        &[
            "-C",
            p.join("deep/er").to_str().unwrap(),
            "--json",
            "checkpoint",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn human_output_is_compact_and_aligned() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a");
    let watched = stdout(&env.ckpt(&["watch"]));
    assert!(watched.starts_with("watching "), "{watched}");
    let out = stdout(&env.ckpt(&["checkpoint", "-m", "first message\nwith a second line"]));
    assert!(
        out.starts_with("checkpoint ") && out.contains("#1 default") && out.contains("+1 ~0 -0"),
        "{out}"
    );
    write(&p, "b.txt", "b");
    env.ckpt(&["checkpoint", "-m", "second"]);
    let list = stdout(&env.ckpt(&["list"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    assert!(lines[0].starts_with("ID") && lines[0].contains("LABEL"));
    // Columns line up: every row's label starts at the header's LABEL column.
    let col = lines[0].find("LABEL").unwrap();
    assert_eq!(&lines[1][col..], "second");
    assert_eq!(&lines[2][col..], "first message…");
    assert!(lines[1].contains("s ago"), "{list}");
    // Ids are shortened to 12 digits.
    assert_eq!(lines[1].split_whitespace().next().unwrap().len(), 12);

    let status = stdout(&env.ckpt(&["status"]));
    assert!(
        status.starts_with("ckptd ") && status.contains(p.to_str().unwrap()),
        "{status}"
    );
    let projects = stdout(&env.ckpt(&["projects"]));
    assert!(
        projects.contains(p.to_str().unwrap()) && projects.contains(" ok "),
        "{projects}"
    );
}

#[test]
fn errors_exit_1_with_a_message_and_json_errors_are_json() {
    let env = TestEnv::new();
    let p = env.proj();
    let out = env.ckpt(&["checkpoint"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("error: "), "{}", stderr(&out));
    let out = env.ckpt(&["--json", "checkpoint"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["data"]["kind"], "not_a_project");
    // Bad metadata is refused before anything is sent.
    env.watch();
    std::fs::write(p.join("meta.json"), "{not json").unwrap();
    let out = env.ckpt(&["checkpoint", "--meta", "meta.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    // Unknown flags are usage errors from clap.
    let out = env.ckpt(&["list", "--frobnicate"]);
    assert_ne!(out.status.code(), Some(0));
}
