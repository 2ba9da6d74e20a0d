//! The cases about the machine around ckpt: the hook while another process writes, the first
//! prompt after a start (socket-activated, or a few seconds after), the first checkpoint after a
//! login, and the daemon's CPU while idle and after a burst.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::support::*;

/// Times `args.load_runs` prompts (`ckpt hook` processes) of 10 changed files while a writer creates files of
/// `args.load_mb` MB one after another beside the project (same filesystem), like a build; and
/// five shadow-git snapshots under the same load. Returns (ours, theirs).
pub(crate) fn under_load(
    args: &Args,
    socket: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> (Vec<Duration>, Vec<Duration>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let load_dir = root.parent().unwrap().join("build-output");
    std::fs::create_dir_all(&load_dir).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let dir = load_dir.clone();
        let mb = args.load_mb;
        std::thread::spawn(move || {
            use std::io::Write;
            let chunk = vec![0x5au8; 1 << 20];
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let path = dir.join(format!("artifact-{n}.bin"));
                let mut f = std::fs::File::create(&path).unwrap();
                for _ in 0..mb {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    f.write_all(&chunk).unwrap();
                }
                // Two files at most on disk; their dirty pages stay the kernel's to write back.
                if n >= 2 {
                    let _ = std::fs::remove_file(dir.join(format!("artifact-{}.bin", n - 2)));
                }
                n += 1;
            }
        })
    };
    // Let the load build up dirty pages first.
    std::thread::sleep(Duration::from_secs(2));
    let mut ours = Vec::new();
    for n in 0..args.load_runs {
        *round += 1;
        touch_ten(root, args.files, *round);
        ours.push(time(|| {
            hook(socket, &prompt_payload(root, &format!("load-{n}")))
        }));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut theirs = Vec::new();
    for _ in 0..5 {
        *round += 1;
        touch_ten(root, args.files, *round);
        theirs.push(time(|| shadow_snapshot(shadow, root)));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let _ = std::fs::remove_dir_all(&load_dir);
    (ours, theirs)
}

/// `args.runs` first prompts after a start (see the case in `main`), each with 10 files changed
/// while no daemon ran, against a shadow-git snapshot; and the most peak RSS of those daemons.
/// None (said) when `systemd-socket-activate` is missing.
pub(crate) fn cold_starts(
    args: &Args,
    dir: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> Option<(Vec<Duration>, Vec<Duration>, u64)> {
    if Command::new("systemd-socket-activate")
        .arg("--help")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        println!("# first prompt after start: not measured (no systemd-socket-activate)");
        return None;
    }
    let (mut ours, mut theirs, mut rss) = (Vec::new(), Vec::new(), 0);
    for n in 0..args.runs {
        *round += 1;
        touch_ten(root, args.files, *round);
        let mut daemon = Daemon::start_activated(dir);
        let payload = prompt_payload(root, &format!("cold-{n}"));
        ours.push(time_settled(|| hook(&daemon.socket, &payload)));
        rss = rss.max(daemon.peak_rss_kib());
        daemon.stop();
        theirs.push(time_settled(|| shadow_snapshot(shadow, root)));
    }
    Some((ours, theirs, rss))
}

/// `args.runs` first prompts after ckptd was started at login (by `ckptd.service`): the daemon
/// starts, the user opens the agent and types (3 s here), then the prompt, timed as a process;
/// 10 files changed while no daemon ran.
pub(crate) fn login_starts(
    args: &Args,
    dir: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for n in 0..args.runs {
        *round += 1;
        touch_ten(root, args.files, *round);
        let mut daemon = Daemon::start(dir);
        std::thread::sleep(Duration::from_secs(3));
        let payload = prompt_payload(root, &format!("login-{n}"));
        ours.push(time_settled(|| hook(&daemon.socket, &payload)));
        daemon.stop();
        theirs.push(time_settled(|| shadow_snapshot(shadow, root)));
    }
    (ours, theirs)
}

/// The daemon's CPU seconds: idle over `args.idle_seconds`, over a burst of 1,000 changed
/// files and the 10 s after it, and over the 10 s after that. None when not measured.
pub(crate) fn idle_cpu(args: &Args, daemon: &Daemon, root: &Path) -> Option<(f64, f64, f64)> {
    if args.idle_seconds == 0 {
        return None;
    }
    let cpu = || daemon.cpu_seconds();
    std::thread::sleep(Duration::from_secs(2));
    let start = cpu();
    std::thread::sleep(Duration::from_secs(args.idle_seconds));
    let quiet = cpu() - start;
    let start = cpu();
    for i in 0..1000.min(args.files) {
        std::fs::write(root.join(file_path(i)), content(i, 999_999)).unwrap();
    }
    std::thread::sleep(Duration::from_secs(10));
    let burst = cpu() - start;
    let start = cpu();
    std::thread::sleep(Duration::from_secs(10));
    Some((quiet, burst, cpu() - start))
}
