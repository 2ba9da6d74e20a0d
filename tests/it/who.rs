//! Who changed what, as `ckpt show` and `ckpt blame` tell it from the turns: a prompt's turn
//! path by path (not what the folder did meanwhile), each change of a checkpoint with the turn
//! or the user who made it, and a line written between turns as the user's.

use serde_json::{json, Value};

use crate::harness::*;

/// Session A edits line 2 and writes a.txt; the user then edits line 5 and writes user.txt;
/// session B writes b.txt by a shell: A's and B's prompts.
fn two_turns_and_the_user(env: &TestEnv) -> (String, String) {
    let p = env.proj();
    write(&p, "shared.txt", "1\n2\n3\n4\n5\n");
    env.watch();
    claude_prompt_with(env, &p, "A", "A edits", json!({}));
    write(&p, "shared.txt", "1\nTWO\n3\n4\n5\n");
    claude_tool(env, &p, "A", "Edit", Some(&p.join("shared.txt")));
    write(&p, "a.txt", "a\n");
    claude_tool(env, &p, "A", "Write", Some(&p.join("a.txt")));
    claude_stop(env, &p, "A");
    write(&p, "shared.txt", "1\nTWO\n3\n4\nfive (user)\n");
    write(&p, "user.txt", "mine\n");
    claude_prompt_with(env, &p, "B", "B writes", json!({}));
    write(&p, "b.txt", "b\n");
    claude_tool(env, &p, "B", "Bash", None);
    claude_stop(env, &p, "B");
    let id = |d: &str| {
        env.json(&["log", "--dialog", d, "-n", "1"])["prompts"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    (id("A"), id("B"))
}

fn changed_by(shown: &Value) -> Vec<(String, String, String)> {
    shown["changed_by"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["change"].as_str().unwrap().to_string(),
                        c["path"].as_str().unwrap().to_string(),
                        c["by"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn show_names_a_turns_own_paths_and_who_made_each_change() {
    let env = TestEnv::new();
    let (a, b) = two_turns_and_the_user(&env);
    let shown = env.json(&["show", &a]);
    assert_eq!(
        shown["turn_changes"]["files"],
        json!([{"path": "a.txt", "change": "A"}, {"path": "shared.txt", "change": "M"}]),
        "{shown}"
    );
    // Every change, with who made it, over every checkpoint of both sessions.
    let mut all = Vec::new();
    for c in env
        .json(&["list", "--steps", "--all-sessions"])
        .as_array()
        .unwrap()
    {
        let shown = env.json(&["show", c["id"].as_str().unwrap()]);
        for (how, path, by) in changed_by(&shown) {
            all.push((how, path, by, shown["changed_by"].clone()));
        }
    }
    let who = |path: &str, how: &str| -> Vec<String> {
        all.iter()
            .filter(|(h, p, _, _)| p == path && h == how)
            .map(|(_, _, by, _)| by.clone())
            .collect()
    };
    assert_eq!(who("a.txt", "A"), ["turn"], "{all:?}");
    assert_eq!(who("shared.txt", "M"), ["user", "turn"], "{all:?}");
    assert_eq!(who("user.txt", "A"), ["user"], "{all:?}");
    assert_eq!(who("b.txt", "A"), ["turn"], "{all:?}");
    let b_by = all.iter().find(|(_, p, _, _)| p == "b.txt").unwrap();
    assert!(b_by.3.to_string().contains(&b), "{all:?}");
    let shown = env.json(&["show", &b]);
    assert_eq!(
        shown["turn_changes"]["files"],
        json!([{"path": "b.txt", "change": "A"}])
    );
    // For a person, too.
    let out = env.ckpt(&["show", &a]);
    let text = stdout(&out);
    assert!(
        text.contains("its turn changed") && text.contains("A  a.txt"),
        "{text}"
    );
    env.fsck();
}

#[test]
fn blame_gives_a_line_written_between_turns_to_the_user() {
    let env = TestEnv::new();
    let p = env.proj();
    let (a, _) = two_turns_and_the_user(&env);
    // A line the user writes after the last turn ended, not checkpointed yet.
    write(&p, "shared.txt", "one (user)\nTWO\n3\n4\nfive (user)\n");
    let blamed = env.json(&["blame", "--dialog", "A", "shared.txt"]);
    let who: Vec<(String, Value)> = blamed["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["origin"].as_str().unwrap().to_string(),
                l["checkpoint"].clone(),
            )
        })
        .collect();
    assert_eq!(who[0].0, "user", "{blamed}");
    assert_eq!(
        (who[1].0.as_str(), &who[1].1),
        ("prompt", &json!(a)),
        "{blamed}"
    );
    assert_eq!(who[2].0, "before_first_checkpoint", "{blamed}");
    assert_eq!(who[4].0, "user", "{blamed}");
    let out = env.ckpt(&["blame", "--dialog", "A", "shared.txt"]);
    assert!(
        stdout(&out).contains("between agents' turns"),
        "{}",
        stdout(&out)
    );
}
