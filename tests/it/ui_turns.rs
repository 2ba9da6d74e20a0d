//! A turn on `ckpt ui`: the page's list carries its steps, `/api/revert` plans and takes back
//! one session's turn (over raw HTTP), and the page does it in a real browser
//! (`tests/ui/revert.py`; ignored by default, `.ci/run` installs what it needs and runs it).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::harness::*;
use crate::ui::{project_query, Ui};

/// Session A's turn (a.txt, line 2 of shared.txt, two steps), the user's line 5, session B's
/// turn (b.txt): A's prompt's checkpoint.
fn two_sessions(env: &TestEnv) -> String {
    let p = env.proj();
    write(&p, "shared.txt", "1\n2\n3\n4\n5\n");
    env.watch();
    claude_prompt_with(env, &p, "A", "A writes a.txt", json!({}));
    write(&p, "a.txt", "from A\n");
    claude_tool(env, &p, "A", "Write", Some(&p.join("a.txt")));
    write(&p, "shared.txt", "1\nTWO\n3\n4\n5\n");
    claude_tool(env, &p, "A", "Edit", Some(&p.join("shared.txt")));
    claude_stop(env, &p, "A");
    write(&p, "shared.txt", "1\nTWO\n3\n4\nfive (user)\n");
    claude_prompt_with(env, &p, "B", "B writes b.txt", json!({}));
    write(&p, "b.txt", "from B\n");
    claude_tool(env, &p, "B", "Bash", None);
    claude_stop(env, &p, "B");
    let log = env.json(&["log", "--dialog", "A", "-n", "1"]);
    log["prompts"][0]["id"].as_str().unwrap().to_string()
}

#[test]
fn the_page_reverts_one_sessions_turn_after_a_plan_and_bad_ids_get_clear_errors() {
    let env = TestEnv::new();
    let p = env.proj();
    let a = two_sessions(&env);
    let ui = Ui::start(&env, &p);

    // The list carries the turn's steps and end, each naming its turn.
    let list = ui.get(&format!("/api/list?{}", project_query(&p))).json();
    let of_a: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["turn"] == json!(a))
        .collect();
    let kinds: Vec<&str> = of_a.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["turn-end", "step", "step"], "{list}");
    assert_eq!(of_a[2]["tool"], "Write");

    // A prompt's own turn, compared with the files now: A's files only, not B's nor the
    // user's; the whole difference without `turn`.
    let diff = |turn: bool| {
        let reply = ui.get(&format!(
            "/api/diff?{}&from={a}&turn={turn}",
            project_query(&p)
        ));
        let files: Vec<String> = reply.json()["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect();
        files
    };
    assert_eq!(diff(true), ["a.txt", "shared.txt"]);
    assert_eq!(diff(false), ["a.txt", "b.txt", "shared.txt"]);

    let before = tree_state(&p);
    let plan = ui
        .post(
            "/api/revert",
            &json!({ "project": p, "id": a, "dry_run": true }),
        )
        .json();
    assert_eq!(plan["reverted"], json!(["a.txt", "shared.txt"]), "{plan}");
    assert_eq!(tree_state(&p), before, "the plan changed files");
    let done = ui
        .post("/api/revert", &json!({ "project": p, "id": a }))
        .json();
    assert!(done["undo_checkpoint"].is_string(), "{done}");
    assert!(!p.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.join("shared.txt")).unwrap(),
        "1\n2\n3\n4\nfive (user)\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("b.txt")).unwrap(),
        "from B\n"
    );
    ui.post("/api/undo", &json!({ "project": p })).json();
    assert_eq!(tree_state(&p), before);

    // A checkpoint that is not a turn, an unknown id, a body that is not the page's: clear
    // errors, nothing changed, and the page's server goes on.
    let step = of_a[0]["id"].as_str().unwrap();
    for (body, says) in [
        (json!({ "project": p, "id": step }), "turn-end"),
        (json!({ "project": p, "id": "0000000" }), "0000000"),
        (json!({ "project": p, "id": a, "force": true }), "force"),
    ] {
        let reply = ui.post("/api/revert", &body);
        assert!(
            reply.status >= 400 && reply.body.contains(says),
            "{body}: {reply:?}"
        );
    }
    assert_eq!(tree_state(&p), before);
    assert_eq!(
        ui.get(&format!("/api/list?{}", project_query(&p))).status,
        200
    );
    env.fsck();
}

#[test]
#[ignore = "needs Chromium and Selenium: tests/ui/install.sh, then --ignored (.ci/run does both)"]
fn a_real_browser_shows_a_turns_steps_and_reverts_it() {
    let env = TestEnv::new();
    let p = env.proj();
    two_sessions(&env);
    let ui = Ui::start(&env, &p);
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-venv/bin/python");
    assert!(
        venv.exists(),
        "{} missing: run tests/ui/install.sh",
        venv.display()
    );
    let mut cmd = Command::new(venv);
    env.env(&mut cmd);
    let out = cmd
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/revert.py"))
        .arg(&ui.url)
        .arg(&p)
        .current_dir(&p)
        .output()
        .unwrap();
    println!("{}", stdout(&out));
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    env.fsck();
}
