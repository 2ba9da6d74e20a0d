//! The example clients of docs/service.md, exactly as printed there, against a real daemon: the Python
//! one and the socat one-liner.

use std::process::Command;

use crate::harness::*;

/// The body of the README's first fenced block in `lang` that contains `needle`.
fn readme_block(lang: &str, needle: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/service.md")).unwrap();
    let fence = format!("```{lang}\n");
    readme
        .split(&fence)
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap().to_string())
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("no ```{lang} block with {needle:?} in docs/service.md"))
}

#[test]
fn the_readme_python_and_socat_clients_work() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    env.watch();
    let id = env.checkpoint("from the README test");
    let python = readme_block("python", "ckptd.sock");
    let mut cmd = Command::new("/usr/bin/python3");
    env.env(&mut cmd);
    let out = cmd.current_dir(&p).args(["-c", &python]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&id), "{}", stdout(&out));
    let socat = readme_block("sh", "socat");
    let mut cmd = Command::new("bash");
    env.env(&mut cmd);
    let out = cmd.current_dir(&p).args(["-c", &socat]).output().unwrap();
    assert!(out.status.success(), "is socat installed? {}", stderr(&out));
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        reply["result"]["projects"][0]["root"],
        serde_json::json!(p),
        "{reply}"
    );
}
