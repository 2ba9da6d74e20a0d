//! `ckpt blame`: each line of a file named by the prompt whose turn wrote it, through the real
//! hook, the real daemon and the real store; and `ckpt log -- PATH`.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::harness::*;

/// `(text, prompt or origin)` of each line of `ckpt blame path`.
fn blamed(env: &TestEnv, project: &Path, path: &str) -> Vec<(String, String)> {
    let b = env.json_in(project, &["blame", path]);
    b["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("{b}"))
        .iter()
        .map(|l| {
            let who = match l["origin"].as_str().unwrap() {
                "prompt" => l["prompt"].as_str().unwrap().to_string(),
                other => other.to_string(),
            };
            (l["text"].as_str().unwrap().to_string(), who)
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn logged(env: &TestEnv, project: &Path, path: &str) -> Vec<String> {
    let log = env.json_in(project, &["log", "--", path]);
    log["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_line_names_the_prompt_whose_turn_wrote_it() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "keep\nbase\n");
    write(&p, "h.txt", "h line\n");
    write(&p, "d.txt", "d old\n");
    write(&p, "b.bin", "\0\u{1}binary\n");
    claude_prompt(&env, &p, "one");
    // Turn one: a line added, a file deleted, a line added to the file renamed later.
    write(&p, "f.txt", "keep\nbase\nline by one\n");
    write(&p, "h.txt", "h line\nh by one\n");
    std::fs::remove_file(p.join("d.txt")).unwrap();
    claude_prompt(&env, &p, "two");
    // Turn two: a line changed, a line added, the file renamed, the deleted file made again.
    write(
        &p,
        "f.txt",
        "keep\nbase changed by two\nline by one\nline by two\n",
    );
    std::fs::rename(p.join("h.txt"), p.join("h2.txt")).unwrap();
    write(&p, "d.txt", "d new\n");
    claude_prompt(&env, &p, "three");
    // Turn three, not checkpointed yet.
    write(
        &p,
        "f.txt",
        "keep\nbase changed by two\nline by one\nline by two\nline by three\n",
    );

    assert_eq!(
        blamed(&env, &p, "f.txt"),
        pairs(&[
            ("keep", "before_first_checkpoint"),
            ("base changed by two", "two"),
            ("line by one", "one"),
            ("line by two", "two"),
            ("line by three", "three"),
        ])
    );
    assert_eq!(
        blamed(&env, &p, "h2.txt"),
        pairs(&[("h line", "before_first_checkpoint"), ("h by one", "one")]),
        "followed across the rename"
    );
    assert_eq!(blamed(&env, &p, "d.txt"), pairs(&[("d new", "two")]));
    let b = env.json_in(&p, &["blame", "f.txt"]);
    let line = &b["lines"][1];
    assert_eq!(line["line"], 2);
    assert_eq!(line["dialog"], "s1");
    assert!(line["checkpoint"].as_str().unwrap().len() == 40, "{line}");
    assert!(line["created_at"].is_string(), "{line}");
    let text = stdout(&env.ckpt_in(&p, &["blame", "f.txt"]));
    assert!(
        text.contains("two") && text.contains("2) base changed by two"),
        "{text}"
    );

    // A rewind's restored lines keep the prompt that first wrote them.
    let out = env.ckpt_in(&p, &["rewind", "--yes", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        blamed(&env, &p, "f.txt"),
        pairs(&[
            ("keep", "before_first_checkpoint"),
            ("base", "before_first_checkpoint"),
            ("line by one", "one")
        ])
    );

    // `log -- PATH`: the prompts whose turns changed it.
    let out = env.ckpt_in(&p, &["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(logged(&env, &p, "h2.txt"), ["two"]);
    assert_eq!(logged(&env, &p, "f.txt"), ["three", "two", "one"]);
    assert_eq!(logged(&env, &p, "b.bin"), Vec::<String>::new());

    // What cannot be blamed: a clear error, and the daemon goes on.
    for (path, why) in [
        ("b.bin", "binary"),
        ("missing.txt", "not a file ckpt captures"),
        (".", "not a file ckpt captures"),
        ("../outside.txt", "outside the project"),
    ] {
        let out = env.ckpt_in(&p, &["blame", path]);
        assert_eq!(out.status.code(), Some(1), "{path}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{path}: {}", stderr(&out));
        // Only what an older daemon refuses gets the hint to restart it.
        assert!(
            !stderr(&out).contains("upgraded"),
            "{path}: {}",
            stderr(&out)
        );
    }
    let out = env.ckpt_in(&p, &["--json", "blame", "b.bin"]);
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["data"]["kind"], "invalid_params", "{err}");
    env.assert_serving();
}

/// A walk that reads more than one handle may hold (a 220 KB file rewritten in each of 40
/// turns: about 14 MB of versions, commits and trees) names every line's prompt across the
/// handles it makes anew, and once it has replied the daemon maps no pack of the store.
#[test]
fn a_long_walk_is_exact_and_lets_go_of_what_it_mapped() {
    let env = TestEnv::new();
    let p = env.proj();
    let mut lines: Vec<String> = (0..4000)
        .map(|i| format!("line {i} as it was first written, padded to some fifty bytes"))
        .collect();
    let text = |lines: &[String]| lines.join("\n") + "\n";
    write(&p, "big.txt", &text(&lines));
    for turn in 0..40 {
        claude_prompt(&env, &p, &format!("p{turn}"));
        lines[turn * 100] = format!("line {} rewritten in the turn of p{turn}", turn * 100);
        write(&p, "big.txt", &text(&lines));
    }
    claude_prompt(&env, &p, "last");
    let pid = env.daemon.as_ref().unwrap().id();
    let store = env.store();

    let blame = blamed(&env, &p, "big.txt");
    assert_eq!(blame.len(), 4000);
    for (i, (text, who)) in blame.iter().enumerate() {
        assert_eq!(text, &lines[i]);
        let expected = match i % 100 == 0 && i / 100 < 40 {
            true => format!("p{}", i / 100),
            false => "before_first_checkpoint".to_string(),
        };
        assert_eq!(who, &expected, "line {}", i + 1);
    }
    // The handles are made anew before the walk and after the reply, with the project's lock
    // held: an operation that reads no object (`rescan`) finds no pack's data mapped (finding
    // the blamed checkpoint read a commit from every pack).
    let out = env.ckpt_in(&p, &["rescan"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mapped_packs(pid, &store), BTreeSet::new());
    // The next operations read through the new handles.
    assert_eq!(blamed(&env, &p, "big.txt"), blame);
    write(&p, "big.txt", "one line\n");
    claude_prompt(&env, &p, "after");
    env.fsck();
    env.assert_serving();
}
