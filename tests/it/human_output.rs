//! Snapshots of what a person reads: `ckpt list`, `show`, `diff --stat`, `log` and a restore's
//! plan after two real prompts through the hook, compared with `tests/it/snapshots/` (insta).
//! Ids, times and the temporary paths are filtered out; everything else is the output as it is,
//! so a change of wording or layout shows in review. `INSTA_UPDATE=always cargo test --test it
//! human_output` rewrites them after a deliberate change.

use crate::harness::*;

fn settings(env: &TestEnv) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.add_filter(&regex_escape(&env.home.to_string_lossy()), "[tmp]");
    s.add_filter(r"\b[0-9a-f]{7,40}\b", "[id]");
    s.add_filter(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?Z?", "[time]");
    s.add_filter(r"\b\d+[smhd] ago\b", "[ago]");
    // The hook's input, cut at a width: where depends on the temporary path's length.
    s.add_filter(r"(?m)^meta .*$", "meta [the hook's input]");
    // Columns are as wide as their widest cell, which a filtered id or time is not.
    s.add_filter(r" {2,}", "  ");
    s
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '.' | '+' | '*' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' | '\\' => {
                format!("\\{c}")
            }
            c => c.to_string(),
        })
        .collect()
}

fn out(env: &TestEnv, args: &[&str]) -> String {
    let o = env.ckpt_in(&env.proj(), args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn what_a_person_reads_after_two_prompts() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    write(&p, "README.md", "# demo\n");
    claude_prompt(&env, &p, "add a greeting");
    write(
        &p,
        "src/main.rs",
        "fn main() {\n    println!(\"hello, world\");\n}\n",
    );
    write(&p, "src/lib.rs", "pub fn greet() {}\n");
    claude_prompt(&env, &p, "make it a library too");
    std::fs::remove_file(p.join("README.md")).unwrap();
    let s = settings(&env);
    s.bind(|| {
        insta::assert_snapshot!("list", out(&env, &["list"]));
        insta::assert_snapshot!("show_second_prompt", out(&env, &["show", "#3"]));
        insta::assert_snapshot!("diff_stat", out(&env, &["diff", "#2", "#3", "--stat"]));
        insta::assert_snapshot!("log", out(&env, &["log"]));
        insta::assert_snapshot!("restore_plan", out(&env, &["restore", "--dry-run", "#1"]));
    });
}
