//! Worktrees of one git repository share one pool of objects: three worktrees cost about one
//! store on disk, `ckpt log --all-worktrees` is one timeline across them, and no gc — ckpt's in
//! any of them, or `git gc --prune=now` by hand in a store or in the pool — loses a checkpoint
//! any worktree still has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::*;

fn git_work(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "A")
        .env("GIT_AUTHOR_EMAIL", "a@example.com")
        .env("GIT_COMMITTER_NAME", "A")
        .env("GIT_COMMITTER_EMAIL", "a@example.com")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
}

/// The project's files as a checkpoint holds them (everything but git's own).
fn state(root: &Path) -> BTreeMap<String, String> {
    tree_state(root)
        .into_iter()
        .filter(|(path, _)| path != ".git" && !path.starts_with(".git/"))
        .collect()
}

fn objects_bytes(dir: &Path) -> u64 {
    fn walk(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| match e.file_type().unwrap().is_dir() {
                        true => walk(&e.path()),
                        false => e.metadata().unwrap().len(),
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(&dir.join("objects"))
}

fn hook_prompt(env: &TestEnv, dir: &Path, session: &str, prompt: &str) {
    let input = serde_json::json!({"session_id": session, "prompt": prompt,
        "cwd": dir, "hook_event_name": "UserPromptSubmit"});
    let out = run_hook(env, dir, "claude-code", &input.to_string(), &["--no-spawn"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn three_worktrees_share_one_pool_and_every_gc_keeps_every_checkpoint() {
    let env = TestEnv::new();
    let repo = env.home.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    // 1,500 files of text that does not compress away (~3 MB).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..1500 {
        let mut text = String::new();
        for _ in 0..32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            text.push_str(&format!("{x:016x}{:016x}\n", x.rotate_left(29)));
        }
        write(&repo, &format!("src/m{}/f{i}.txt", i % 30), &text);
    }
    git_work(&repo, &["init", "-q"]);
    git_work(&repo, &["add", "-A"]);
    git_work(&repo, &["commit", "-qm", "init"]);
    let wt: Vec<PathBuf> = (1..=2).map(|n| env.home.join(format!("wt{n}"))).collect();
    for w in &wt {
        git_work(&repo, &["worktree", "add", "-q", w.to_str().unwrap()]);
    }
    // One store alone: the repository's, before any worktree is watched.
    env.json_in(&repo, &["watch"]);
    let mut expected: BTreeMap<String, (PathBuf, BTreeMap<String, String>)> = BTreeMap::new();
    let mut record = |dir: &Path, label: &str| {
        let id = env.json_in(dir, &["checkpoint", "-m", label])["id"]
            .as_str()
            .unwrap()
            .to_string();
        expected.insert(id, (dir.to_path_buf(), state(dir)));
    };
    record(&repo, "repo first");
    let one_store = objects_bytes(&env.store_of(&repo));
    for (n, w) in wt.iter().enumerate() {
        env.json_in(w, &["watch"]);
        write(w, &format!("src/m1/own{n}.txt"), &format!("worktree {n}\n"));
        record(w, &format!("wt{n} first"));
    }
    let pool_dir = env.data_dir().join("shared");
    let pools: Vec<PathBuf> = std::fs::read_dir(&pool_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(pools.len(), 1, "one pool for one repository: {pools:?}");
    let pool = pools[0].clone();
    // The last worktree gives its objects to the pool by itself once it is quiet.
    let given = env.store_of(&wt[1]).join("ckpt-pool-given");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !given.exists() {
        assert!(
            Instant::now() < deadline,
            "wt2 never gave its objects to the pool"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for dir in [&repo, &wt[0]] {
        env.json_in(dir, &["gc"]);
    }
    let stores: Vec<PathBuf> = [&repo, &wt[0], &wt[1]]
        .iter()
        .map(|d| env.store_of(d))
        .collect();
    let total: u64 = stores.iter().map(|s| objects_bytes(s)).sum::<u64>() + objects_bytes(&pool);
    println!("one store alone: {one_store} bytes; three worktrees with the pool: {total} bytes");
    assert!(
        (total as f64) < one_store as f64 * 1.3,
        "three worktrees take {total} bytes, one store {one_store}"
    );

    // More history, then every kind of gc, in every order.
    for (n, dir) in [&repo, &wt[0], &wt[1]].into_iter().enumerate() {
        write(dir, "src/m2/f2.txt", &format!("changed in {n}\n"));
        std::fs::remove_file(dir.join("src/m3/f3.txt")).unwrap();
        record(dir, &format!("second {n}"));
    }
    // Retention cuts one worktree's timeline: the pool records the cut, the rest stays whole.
    write(&wt[0], "src/m4/f4.txt", "third\n");
    record(&wt[0], "third 1");
    let pruned = env.json_in(&wt[0], &["prune", "--keep", "1", "--gc"]);
    let pruned: Vec<&str> = pruned["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!pruned.is_empty());
    for id in &pruned {
        expected.remove(*id);
    }
    env.json_in(&wt[0], &["gc"]);
    git_in(&pool, &["gc", "--prune=now", "--quiet"]);
    for s in &stores {
        git_in(s, &["gc", "--prune=now", "--quiet"]);
    }
    env.json_in(&repo, &["gc"]);
    for s in stores.iter().chain([&pool]) {
        git_in(s, &["fsck", "--strict", "--no-progress"]);
    }
    // A gc with nothing new for the pool adds nothing to it.
    let packs = |dir: &Path| std::fs::read_dir(dir.join("objects/pack")).unwrap().count();
    env.json_in(&wt[1], &["gc"]);
    let before = packs(&pool);
    env.json_in(&wt[1], &["gc"]);
    assert_eq!(packs(&pool), before);
    // Every checkpoint of every worktree restores exactly.
    for (id, (dir, files)) in &expected {
        let r = env.json_in(dir, &["restore", id, "--yes"]);
        assert!(r["skipped"].as_array().unwrap().is_empty(), "{r}");
        assert_eq!(&state(dir), files, "{id} in {}", dir.display());
    }

    // One timeline across the worktrees.
    for (n, dir) in [&repo, &wt[0], &wt[1]].into_iter().enumerate() {
        hook_prompt(
            &env,
            dir,
            &format!("session-{n}"),
            &format!("prompt in worktree {n}"),
        );
    }
    let log = env.json_in(&wt[1], &["log", "--all-worktrees"]);
    let prompts = log["prompts"].as_array().unwrap();
    let mut seen: Vec<(String, String)> = prompts
        .iter()
        .map(|p| {
            let w = p["worktree"].as_str().unwrap();
            (
                w.rsplit('/').next().unwrap().to_string(),
                p["label"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("repo".into(), "prompt in worktree 0".into()),
            ("wt1".into(), "prompt in worktree 1".into()),
            ("wt2".into(), "prompt in worktree 2".into()),
        ]
    );
    let own = env.json_in(&wt[1], &["log"]);
    assert_eq!(own["prompts"].as_array().unwrap().len(), 1);
    env.assert_serving();
}

#[test]
fn a_project_that_is_the_only_worktree_of_its_repository_keeps_its_own_store() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    git_work(&p, &["init", "-q"]);
    env.watch();
    env.checkpoint("first");
    env.json(&["gc"]);
    assert!(!env.data_dir().join("shared").exists());
    assert!(!env.store().join("objects/info/alternates").exists());
    let out = env.ckpt(&["log", "--all-worktrees"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Not a repository at all: the option says why it cannot help.
    std::fs::remove_dir_all(p.join(".git")).unwrap();
    let out = env.ckpt(&["log", "--all-worktrees"]);
    assert!(
        stderr(&out).contains("not a git worktree"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_pools_packs_are_merged_as_gifts_accumulate_and_nothing_is_lost() {
    let env = TestEnv::new();
    let repo = env.home.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for i in 0..20 {
        write(&repo, &format!("f{i}.txt"), &format!("file {i}\n"));
    }
    git_work(&repo, &["init", "-q"]);
    git_work(&repo, &["add", "-A"]);
    git_work(&repo, &["commit", "-qm", "init"]);
    let wt = env.home.join("wt");
    git_work(&repo, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    env.json_in(&repo, &["watch"]);
    env.json_in(&wt, &["watch"]);
    let mut expected = Vec::new();
    for round in 0..24 {
        let dir = if round % 2 == 0 { &repo } else { &wt };
        write(
            dir,
            &format!("f{}.txt", round % 20),
            &format!("round {round}\n"),
        );
        let id = env.json_in(dir, &["checkpoint", "-m", &format!("round {round}")])["id"]
            .as_str()
            .unwrap()
            .to_string();
        expected.push((dir.clone(), id, state(dir)));
        env.json_in(dir, &["gc"]);
    }
    let pool = std::fs::read_dir(env.data_dir().join("shared"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let packs = std::fs::read_dir(pool.join("objects/pack"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "pack")
        })
        .count();
    assert!((1..=17).contains(&packs), "{packs} packs in the pool");
    git_in(&pool, &["fsck", "--strict", "--no-progress"]);
    for (dir, id, files) in &expected {
        env.json_in(dir, &["restore", id, "--yes"]);
        assert_eq!(&state(dir), files, "{id}");
    }
}

/// A fork of a git project into a new worktree (made with nothing checked out, the restore
/// writes the files): both stores pass `git fsck --strict`.
#[test]
fn a_forked_worktrees_store_passes_git_fsck() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    git_work(&p, &["init", "-q"]);
    git_work(&p, &["add", "-A"]);
    git_work(
        &p,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "base",
        ],
    );
    env.watch();
    write(&p, "b.txt", "b\n");
    let id = env.checkpoint("one");
    let wt = env.home.join("try-1");
    let out = env.ckpt_in(&p, &["fork", &id, "--worktree", wt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(wt.join("b.txt")).unwrap(), "b\n");
    for root in [&p, &wt] {
        let store = env.store_of(root);
        let out = Command::new("git")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("--git-dir")
            .arg(&store)
            .args(["fsck", "--strict", "--no-progress"])
            .output()
            .unwrap();
        assert!(
            out.status.success() && !stderr(&out).contains("missing"),
            "{}: {}",
            root.display(),
            stderr(&out)
        );
    }
}
