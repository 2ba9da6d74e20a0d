//! The session readers against damaged input: real sessions of the pinned agents
//! (`tests/fixtures/sessions/`, two turns each), truncated at every line and at random bytes,
//! with lines replaced by or added as garbage, with bytes flipped. A reader never panics, and a
//! fork it plans is never partial: whole lines of the input, each a JSON object, none of them the
//! rewound prompt's, and (for Codex and Gemini CLI) a prefix of the input.

use std::path::{Path, PathBuf};

use super::*;

/// A small deterministic generator (xorshift), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

struct Case {
    agent: Agent,
    file: &'static str,
    session: &'static str,
    message_id: Option<&'static str>,
    hook_time: Option<&'static str>,
}

const CASES: [Case; 3] = [
    Case {
        agent: Agent::ClaudeCode,
        file: "claude-code.jsonl",
        session: "193241d3-a622-4f2c-a4b6-ad4873cf4d61",
        message_id: Some("5f04f98c-11b6-41f5-b3f1-b7385b164174"),
        hook_time: None,
    },
    Case {
        agent: Agent::Codex,
        file: "codex.jsonl",
        session: "01a21c41-3280-7fc1-8508-0f0b81bbe359",
        message_id: Some("01a21c41-3f09-7962-a151-c38a412c1615"),
        hook_time: None,
    },
    Case {
        agent: Agent::Gemini,
        file: "gemini.jsonl",
        session: "8efd44c8-3113-4287-88b3-978afb7ca8f8",
        message_id: None,
        hook_time: Some("2026-11-27T09:06:24.480Z"),
    },
];

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sessions")
        .join(name);
    std::fs::read(path).unwrap()
}

/// The point of the second prompt ("turn B") of `case`'s session, read from `transcript`.
fn point(case: &Case, transcript: PathBuf) -> Point {
    Point {
        agent: case.agent,
        session: case.session.into(),
        transcript,
        prompt: "turn B".into(),
        message_id: case.message_id.map(String::from),
        hook_time: case.hook_time.map(|t| t.parse().unwrap()),
        occurrence: 0,
        index: None,
        after_tool: None,
    }
}

/// Plans a fork of `data`; checks it is whole when there is one.
fn check(case: &Case, dir: &Path, data: &[u8]) -> Option<Vec<String>> {
    // Where the agent keeps it (a Codex rollout is found by its date folders).
    let path = match case.agent {
        Agent::ClaudeCode => dir.join(format!("projects/-p/{}.jsonl", case.session)),
        Agent::Codex => dir.join(format!(
            "sessions/2026/11/27/rollout-2026-11-27T09-06-04-{}.jsonl",
            case.session
        )),
        _ => dir.join(format!(
            "tmp/p/chats/session-2026-11-27T09-06-{}.jsonl",
            &case.session[..8]
        )),
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, data).unwrap();
    let root = match case.agent {
        Agent::ClaudeCode => dir.join("projects"),
        Agent::Codex => dir.join("sessions"),
        _ => dir.join("tmp"),
    };
    let point = point(case, path.clone());
    let located = place::Located::within(root, case.agent, &path, case.session).ok()?;
    let fork = plan_located(&point, &Place::Beside, located).ok()?;
    let session = fork.session?;
    let text = String::from_utf8(session.bytes).expect("a fork is text");
    assert!(text.ends_with('\n'), "a fork ends with a whole line");
    let input = String::from_utf8_lossy(data);
    let input: Vec<&str> = input.split('\n').collect();
    let mut forked = Vec::new();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("each line is JSON");
        assert!(value.is_object(), "{line}");
        let original = line.replace(&session.id, case.session);
        assert!(
            input.contains(&original.as_str()),
            "not a line of the input: {line}"
        );
        assert!(
            !original.contains("\"turn B\""),
            "the rewound prompt is in the fork: {line}"
        );
        forked.push(original);
    }
    if case.agent != Agent::ClaudeCode {
        assert_eq!(forked, input[..forked.len()], "a prefix of the session");
    }
    Some(forked)
}

#[test]
fn a_damaged_session_never_makes_a_partial_fork() {
    let dir = tempfile::tempdir().unwrap();
    for case in &CASES {
        let data = fixture(case.file);
        let whole = check(case, dir.path(), &data)
            .unwrap_or_else(|| panic!("{}: the real session forks", case.file));
        assert!(!whole.is_empty());
        // Cut after every line: before the prompt's record there is nothing to fork; after it,
        // the same fork.
        let ends: Vec<usize> = data
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        for &end in &ends {
            if let Some(fork) = check(case, dir.path(), &data[..end]) {
                assert_eq!(fork, whole, "{}: cut at {end}", case.file);
            }
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ data.len() as u64);
        for round in 0..150 {
            let mut damaged = data.clone();
            match round % 4 {
                0 => damaged.truncate(rng.below(data.len())),
                1 => {
                    let at = rng.below(data.len());
                    damaged[at] ^= 1 << rng.below(8);
                }
                2 => {
                    let start = ends[rng.below(ends.len() - 1)];
                    let end = ends.iter().copied().find(|e| *e > start).unwrap();
                    let garbage: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
                    damaged.splice(start..end - 1, garbage);
                }
                _ => {
                    let at = ends[rng.below(ends.len())];
                    let line = [br#"{"type":"user","#.as_slice(), b"\n"].concat();
                    damaged.splice(at..at, line);
                }
            }
            check(case, dir.path(), &damaged);
        }
    }
}
