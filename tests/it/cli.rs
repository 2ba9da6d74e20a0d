//! The command line: global options anywhere, human output, -C, exit codes.

use std::path::PathBuf;

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
    assert_eq!(out.status.code(), Some(64), "a usage error");
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
    assert_eq!(env.json(&["list"]), serde_json::json!([]));
    // Unknown flags are usage errors from clap.
    let out = env.ckpt(&["list", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(64));
}

/// Runs `ckpt ARGS` on a pseudo-terminal (via `script`), typing `input`.
fn on_terminal(env: &TestEnv, args: &str, input: &str) -> std::process::Output {
    let mut cmd = std::process::Command::new("script");
    env.env(&mut cmd);
    let client = ckpt_bin();
    let line = format!("{client} --no-spawn {args}");
    let mut child = cmd
        .current_dir(env.proj())
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn restore_on_a_terminal_shows_the_plan_and_asks() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "v1");
    env.watch();
    let first = env.checkpoint("v1");
    write(&p, "a.txt", "v2");
    write(&p, "extra.txt", "new");

    let out = on_terminal(&env, &format!("restore {first}"), "n\n");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("write   a.txt")
            && text.contains("delete  extra.txt")
            && text.contains("Restore? [y/N]"),
        "{text}"
    );
    assert!(text.contains("restore cancelled"), "{text}");
    assert_eq!(
        std::fs::read_to_string(p.join("a.txt")).unwrap(),
        "v2",
        "a declined restore changed files"
    );
    assert_eq!(
        env.json(&["list"]).as_array().unwrap().len(),
        1,
        "a declined restore recorded a checkpoint"
    );

    let out = on_terminal(&env, &format!("restore {first}"), "y\n");
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "v1");
    assert!(!p.join("extra.txt").exists());
    assert!(
        stdout(&out).contains("undo with: ckpt undo"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn without_a_runtime_dir_the_socket_falls_back_to_the_data_dir() {
    let env = TestEnv::without_daemon("");
    let mut cmd = std::process::Command::new(CKPTD);
    env.env(&mut cmd);
    cmd.env_remove("XDG_RUNTIME_DIR")
        .stderr(std::process::Stdio::null());
    let mut daemon = cmd.spawn().unwrap();
    let fallback = env.data_dir().join("run/ckptd.sock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&fallback).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "no socket at {}",
            fallback.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut client = std::process::Command::new(ckpt_bin());
    env.env(&mut client);
    let out = client
        .env_remove("XDG_RUNTIME_DIR")
        .args(["--no-spawn", "--json", "status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["socket"], fallback.to_str().unwrap());
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn a_long_checkpoint_shows_progress() {
    let env = TestEnv::new();
    let p = env.proj();
    for i in 0..20_000 {
        if i % 500 == 0 {
            std::fs::create_dir_all(p.join(format!("d{}", i / 500))).unwrap();
        }
        std::fs::write(
            p.join(format!("d{}/f{i}.txt", i / 500)),
            format!("{i}\n").repeat(100),
        )
        .unwrap();
    }
    env.watch();
    let started = std::time::Instant::now();
    let mut cmd = std::process::Command::new("script");
    env.env(&mut cmd);
    let client = ckpt_bin();
    let line = format!("{client} --no-spawn checkpoint -m big");
    let child = cmd
        .current_dir(&p)
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Meanwhile `status` answers (it never waits for the busy project) and shows how far it got.
    let mut rpc = Rpc::connect(&env);
    let mut seen = None;
    while seen.is_none() && started.elapsed() < std::time::Duration::from_secs(60) {
        let status = rpc.call("status", serde_json::json!({}));
        let progress = &status["projects"][0]["progress"];
        if progress["phase"] == "reading" && progress["total"].as_u64() == Some(20_000) {
            seen = Some(progress.clone());
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        seen.is_some(),
        "status never showed the checkpoint's progress"
    );
    if elapsed > std::time::Duration::from_millis(1500) {
        assert!(
            stdout(&out).contains("reading files"),
            "no progress bar after {elapsed:?}: {}",
            stdout(&out)
        );
    }
    assert!(
        stdout(&out).contains("20000 files (+20000"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        env.json(&["status"])["projects"][0]["progress"],
        serde_json::Value::Null
    );
}

/// `/`, the home folder and a folder holding it need --force; a mistyped watch is refused
/// with a reason and registers nothing.
#[test]
fn dangerous_roots_need_force() {
    let env = TestEnv::new();
    let home = env.home.join("home");
    write(&home, "notes.txt", "n\n");
    for dir in [PathBuf::from("/"), home.clone(), env.home.clone()] {
        let out = env.ckpt(&["watch", dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", dir.display());
        assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    }
    assert_eq!(env.json(&["projects"]), serde_json::json!([]));
    let watched = env.json(&["watch", home.to_str().unwrap(), "--force"]);
    assert_eq!(watched["root"], home.to_str().unwrap());
}

/// A relative DIR is resolved once, against the current directory (or -C).
#[test]
fn watch_resolves_a_relative_dir_once() {
    let env = TestEnv::new();
    let proj = env.proj();
    std::fs::create_dir_all(proj.join("rel/a/b")).unwrap();
    std::fs::create_dir_all(proj.join("other/sub")).unwrap();
    let out = env.ckpt_in(&proj.join("rel/a/b"), &["--json", "watch", ".."]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["root"], proj.join("rel/a").to_str().unwrap());
    let out = env.ckpt_in(&proj.join("other"), &["--json", "watch", "sub"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["root"], proj.join("other/sub").to_str().unwrap());
    let out = env.ckpt_in(&proj.join("other"), &["--json", "unwatch", "sub"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Usage errors exit 64, never 2 (a restore that skipped files), and `--json` prints them in
/// the same `{error: {code, message, data: {kind}}}` shape as the daemon's errors.
#[test]
fn usage_errors_have_their_own_exit_code_and_json_shape() {
    let env = TestEnv::new();
    for args in [&["--frobnicate"][..], &["restore"][..], &["show"][..]] {
        let out = env.ckpt(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        let mut json = vec!["--json"];
        json.extend_from_slice(args);
        let out = env.ckpt(&json);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&out)));
        assert_eq!(v["error"]["data"]["kind"], "usage_error", "{v}");
        assert_eq!(v["error"]["code"], -32100, "{v}");
    }
    let out = env.ckpt(&["--json", "--socket", "/nonexistent/ckptd.sock", "status"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["data"]["kind"], "no_daemon", "{v}");
    assert_eq!(env.ckpt(&["--help"]).status.code(), Some(0));
}

/// `ckpt diff | head`, `ckpt show --files | head`, `ckpt export --patch | head`: the client
/// ends quietly when its reader goes away.
#[test]
fn a_closed_pipe_ends_the_client_quietly() {
    let env = TestEnv::new();
    let p = env.proj();
    let long: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    for i in 0..300 {
        write(&p, &format!("f{i}.txt"), "a\n");
    }
    write(&p, "long.txt", "");
    env.watch();
    let a = env.checkpoint("a");
    write(&p, "long.txt", &long);
    let b = env.checkpoint("b");
    for cmd in [
        format!("diff {a} {b}"),
        format!("show {b} --files"),
        format!("export {b} --patch"),
    ] {
        let client = ckpt_bin();
        let mut sh = std::process::Command::new("bash");
        env.env(&mut sh);
        let out = sh
            .current_dir(&p)
            .arg("-c")
            .arg(format!(
                "{client} --no-spawn {cmd} | head -n 1 >/dev/null; echo \"status ${{PIPESTATUS[0]}}\""
            ))
            .output()
            .unwrap();
        assert_eq!(stdout(&out).trim(), "status 0", "{cmd}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{cmd}: {}",
            stderr(&out)
        );
    }
}

/// A file whose name is not UTF-8 is named on the command line, sent exactly, diffed and
/// restored; JSON output carries its exact bytes beside the lossy text; and a name with a
/// newline stays on one line of human output.
#[test]
fn paths_that_are_not_utf8_work_end_to_end() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let p = env.proj();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(p.join(name), "v1\n").unwrap();
    write(&p, "other.txt", "o1\n");
    write(&p, "two\nlines.txt", "n1\n");
    env.watch();
    let id = env.checkpoint("v1");
    std::fs::write(p.join(name), "v2\n").unwrap();
    write(&p, "other.txt", "o2\n");
    write(&p, "two\nlines.txt", "n2\n");
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(ckpt_bin());
        env.env(&mut cmd);
        cmd.current_dir(&p)
            .args(["--no-spawn"])
            .args(args)
            .arg("--")
            .arg(name);
        cmd.output().unwrap()
    };
    let out = run(&["diff", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("-v1") && text.contains("+v2"), "{text}");
    assert!(!text.contains("o2"), "only the named file: {text}");
    let out = run(&["--json", "diff", &id]);
    let diff: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes: Vec<u8> = b"caf\xe9.txt".to_vec();
    assert_eq!(
        diff["files"][0]["path_bytes"],
        serde_json::json!(bytes),
        "{diff}"
    );
    let out = run(&["--json", "restore", "-y", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let restored: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        restored["written_bytes"],
        serde_json::json!([bytes]),
        "{restored}"
    );
    assert_eq!(std::fs::read(p.join(name)).unwrap(), b"v1\n");
    assert_eq!(
        std::fs::read(p.join("other.txt")).unwrap(),
        b"o2\n",
        "only the named file"
    );
    // A newline in a name is escaped: one entry, one line.
    let out = env.ckpt(&["diff", &id, "--name-only"]);
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert!(lines.contains(&"two\\nlines.txt".to_string()), "{lines:?}");
    assert!(!stderr(&out).contains("panicked"));
    env.assert_serving();
}

/// Runs `script` with python3: a stand-in daemon that prints `ready` once it listens.
fn python_server(script: &str) -> std::process::Child {
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    child
}

/// A daemon that accepts connections but never answers: the client gives up after its
/// handshake timeout with a clear message, instead of waiting forever.
#[test]
fn an_unresponsive_daemon_is_given_up_on() {
    let env = TestEnv::without_daemon("");
    let socket = env.home.join("silent.sock");
    let server = format!(
        "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind({:?})\ns.listen(8)\n\
         print('ready', flush=True)\nc, _ = s.accept()\ntime.sleep(60)\n",
        socket.to_str().unwrap()
    );
    let mut silent = python_server(&server);
    let started = std::time::Instant::now();
    let out = env.ckpt(&["--socket", socket.to_str().unwrap(), "status"]);
    let _ = silent.kill();
    let _ = silent.wait();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did not answer"), "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

/// `ckpt checkpoint` sends its request with the handshake, not after it: a daemon of another
/// protocol is still reported as that (whichever reply comes first), and one that never
/// answers is given up on within the handshake's bound.
#[test]
fn a_checkpoint_sent_with_the_handshake_still_checks_the_protocol() {
    let env = TestEnv::without_daemon("");
    let p = env.proj();
    // Answers `hello` with protocol 999; `checkpoint` before or after it; `silent` never.
    let fake = |name: &str, mode: &str| {
        let socket = env.home.join(format!("{name}.sock"));
        let server = format!(
            "import json, socket, time\n\
             s = socket.socket(socket.AF_UNIX)\ns.bind({socket:?})\ns.listen(8)\n\
             print('ready', flush=True)\nc, _ = s.accept()\nf = c.makefile('rb')\n\
             mode = {mode:?}\nif mode == 'silent':\n    time.sleep(60)\n\
             reqs = [json.loads(f.readline()) for _ in range(2)]\n\
             hello = {{'jsonrpc': '2.0', 'id': reqs[0]['id'], 'result': \
             {{'protocol': 999, 'daemon': 'x', 'pid': 1}}}}\n\
             ckpt = {{'jsonrpc': '2.0', 'id': reqs[1]['id'], 'error': \
             {{'code': -32000, 'message': 'recorded nothing'}}}}\n\
             order = [hello, ckpt] if mode == 'hello-first' else [ckpt, hello]\n\
             c.sendall(b''.join(json.dumps(m).encode() + b'\\n' for m in order))\n\
             time.sleep(60)\n",
            socket = socket.to_str().unwrap(),
        );
        let mut child = python_server(&server);
        let started = std::time::Instant::now();
        let out = env.ckpt(&[
            "--socket",
            socket.to_str().unwrap(),
            "checkpoint",
            "-C",
            p.to_str().unwrap(),
        ]);
        let _ = child.kill();
        let _ = child.wait();
        assert!(started.elapsed() < std::time::Duration::from_secs(15));
        assert_eq!(out.status.code(), Some(1), "{mode}: {}", stderr(&out));
        stderr(&out)
    };
    for mode in ["hello-first", "checkpoint-first"] {
        let err = fake(mode, mode);
        assert!(err.contains("daemon speaks protocol 999"), "{mode}: {err}");
    }
    let err = fake("silent", "silent");
    assert!(err.contains("did not answer"), "{err}");
}

/// Restoring paths that match nothing (a typo) is an error that names them and records no
/// checkpoint at all.
#[test]
fn a_restore_of_paths_that_match_nothing_is_refused() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/a.txt", "a\n");
    env.watch();
    let id = env.checkpoint("a");
    let before = env.json(&["list"]).as_array().unwrap().len();
    let out = env.ckpt(&["restore", "--yes", &id, "--", "src/nope.txt", "srcx"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("src/nope.txt") && err.contains("srcx"),
        "{err}"
    );
    assert!(err.contains("matches nothing"), "{err}");
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), before);
    // A path that exists on one side only is fine.
    write(&p, "src/new.txt", "n\n");
    let r = env.json(&["restore", "--yes", &id, "--", "src/new.txt"]);
    assert_eq!(r["deleted"], serde_json::json!(["src/new.txt"]), "{r}");
}

/// `--stat` bars scale to the largest change; a dry run speaks in the conditional; a restore
/// of many files prints the first lines on a terminal (all of them with --verbose).
#[test]
fn human_output_scales_and_speaks_plainly() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "big.txt", "");
    write(&p, "small.txt", "");
    for i in 0..120 {
        write(&p, &format!("many/f{i:03}.txt"), "old\n");
    }
    env.watch();
    let a = env.checkpoint("a");
    let big: String = (0..400).map(|i| format!("{i}\n")).collect();
    write(&p, "big.txt", &big);
    write(&p, "small.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    for i in 0..120 {
        write(&p, &format!("many/f{i:03}.txt"), "new\n");
    }
    let b = env.checkpoint("b");
    let stat = stdout(&env.ckpt(&["diff", &a, &b, "--stat"]));
    let bar = |name: &str| {
        let line = stat.lines().find(|l| l.contains(name)).unwrap();
        line.chars().filter(|c| *c == '+').count()
    };
    assert_eq!(bar("big.txt"), 40, "{stat}");
    assert!(bar("small.txt") <= 2, "{stat}");

    let dry = stdout(&env.ckpt(&["restore", "--dry-run", &a]));
    assert!(dry.starts_with("would restore"), "{dry}");
    assert!(
        dry.contains("would write") && !dry.contains(" wrote "),
        "{dry}"
    );

    let shown = on_terminal(&env, &format!("restore --yes {a}"), "");
    let text = stdout(&shown);
    assert!(text.contains("and 72 more"), "{text}");
    assert!(text.lines().count() < 60, "{text}");
    let all = on_terminal(&env, &format!("restore --yes --verbose {b}"), "");
    assert!(stdout(&all).lines().count() > 120, "{}", stdout(&all));
}

/// Checkpoints by name: a tag, `@`/`latest`, `@~N`, `#SEQ` (in --dialog or the newest
/// dialog); the human output says what a name stood for; an ambiguous prefix lists its
/// candidates.
#[test]
fn checkpoints_can_be_named() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "1\n");
    env.watch();
    let one = env.checkpoint("one");
    write(&p, "a.txt", "2\n");
    let two = env.checkpoint("two");
    write(&p, "a.txt", "3\n");
    let three = env.checkpoint("three");
    env.json(&["tag", &one, "before-agent"]);
    for (name, want) in [
        ("@", &three),
        ("latest", &three),
        ("@~1", &two),
        ("@~2", &one),
        ("#2", &two),
        ("before-agent", &one),
    ] {
        assert_eq!(env.json(&["show", name])["id"], want.as_str(), "{name}");
    }
    let diff = env.json(&["diff", "@~1", "@"]);
    assert_eq!(
        (diff["from"].as_str(), diff["to"].as_str()),
        (Some(two.as_str()), Some(three.as_str()))
    );
    let out = env.ckpt(&["diff", "@~1", "--stat"]);
    assert!(
        stderr(&out).contains(&format!("@~1 is {}", &two[..12])),
        "{}",
        stderr(&out)
    );
    // In another dialog, names count there.
    env.json(&["checkpoint", "--dialog", "work", "-m", "w"]);
    assert_eq!(
        env.json(&["show", "#1", "--dialog", "work"])["kind"],
        "initial"
    );
    assert_eq!(
        env.json(&["show", "@~1", "--dialog", "default"])["id"],
        two.as_str()
    );
    let r = env.json(&["restore", "--yes", "before-agent"]);
    assert_eq!(r["restored_to"], one.as_str());
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "1\n");
    for bad in ["@~9", "#99", "no-such-tag", "@~x"] {
        let out = env.ckpt(&["show", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
    }
}

/// An ambiguous prefix lists its candidates, as git does.
#[test]
fn an_ambiguous_prefix_lists_the_candidates() {
    let env = TestEnv::with_config("[retention]\nkeep = 100000\n");
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let mut rpc = Rpc::connect(&env);
    let mut seen: std::collections::HashMap<String, String> = Default::default();
    let (first, second) = loop {
        let c = rpc.call("checkpoint", serde_json::json!({ "project": env.proj() }));
        let id = c["id"].as_str().unwrap().to_string();
        if let Some(other) = seen.insert(id[..4].to_string(), id.clone()) {
            break (other, id);
        }
        assert!(seen.len() < 5000, "no two ids shared a prefix");
    };
    let out = env.ckpt(&["--json", "show", &first[..4]]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["data"]["kind"], "ambiguous_checkpoint", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&first[..12]) && message.contains(&second[..12]),
        "{message}"
    );
}

/// An exported patch names a file that is not UTF-8, or that holds a tab, the way git does
/// (quoted, with octal escapes), so `git apply` recreates exactly that file.
#[test]
fn exported_patches_quote_odd_names_for_git_apply() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let p = env.proj();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9\tx.txt");
    std::fs::write(p.join(odd), "v1\n").unwrap();
    env.watch();
    env.checkpoint("v1");
    std::fs::write(p.join(odd), "v2\n").unwrap();
    let id = env.checkpoint("v2");
    let out = env.ckpt(&["export", &id, "--patch"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let patch = stdout(&out);
    assert!(patch.contains(r#""a/caf\351\tx.txt""#), "{patch}");
    let copy = env.home.join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::write(copy.join(odd), "v1\n").unwrap();
    let mut apply = std::process::Command::new("git")
        .args(["apply", "-"])
        .current_dir(&copy)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(apply.stdin.as_mut().unwrap(), patch.as_bytes()).unwrap();
    drop(apply.stdin.take());
    assert!(apply.wait().unwrap().success());
    assert_eq!(std::fs::read(copy.join(odd)).unwrap(), b"v2\n");
}

/// On a terminal the diff is coloured and goes through the pager; piped, neither; `NO_COLOR`
/// and an empty `PAGER` turn them off; `--quiet` leaves out confirmations.
#[test]
fn colours_and_the_pager_only_for_a_person_and_quiet_is_quiet() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    env.checkpoint("one");
    write(&p, "a.txt", "two\n");
    // `script` runs the line through a shell: set the pager and colour there.
    let run = |prefix: &str| {
        let mut cmd = std::process::Command::new("script");
        env.env(&mut cmd);
        let client = ckpt_bin();
        let line = format!("{prefix} {client} --no-spawn diff @");
        let out = cmd
            .current_dir(&p)
            .args(["-qec", &line, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let paged = run("PAGER=\"sed s/^/PAGED:/\"");
    assert!(paged.contains("PAGED:"), "{paged:?}");
    assert!(paged.contains("\u{1b}[32m+two"), "{paged:?}");
    let plain = run("NO_COLOR=1 PAGER=");
    assert!(
        !plain.contains('\u{1b}') && !plain.contains("PAGED:"),
        "{plain:?}"
    );
    assert!(plain.contains("+two"), "{plain:?}");
    let piped = env.ckpt(&["diff", "@"]);
    assert!(!stdout(&piped).contains('\u{1b}'));
    // Quiet: no confirmation, but data and skips still.
    let out = env.ckpt(&["-q", "checkpoint", "-m", "quiet"]);
    assert_eq!((out.status.code(), stdout(&out).as_str()), (Some(0), ""));
    let out = env.ckpt(&["--quiet", "restore", "--yes", "@~1"]);
    assert_eq!((out.status.code(), stdout(&out).as_str()), (Some(0), ""));
    assert!(stdout(&env.ckpt(&["-q", "list"])).contains("quiet"));
}
