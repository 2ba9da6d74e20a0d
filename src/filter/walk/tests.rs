//! The walk of a project: ignore rules, exclusions, what it skips and why.

use super::*;
use gix::bstr::ByteSlice;

fn sorted(mut v: Vec<BString>) -> Vec<BString> {
    v.sort();
    v
}

/// The parallel walk finds exactly what the sequential one finds, and shows every folder to
/// `on_dir` (before listing it: the listing threads only get folders it has seen).
#[test]
fn parallel_and_sequential_walks_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    for i in 0..300 {
        let dir = root.join(format!("d{}/e{}/f{}", i % 7, i % 13, i % 5));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("x{i}.txt")), "x").unwrap();
        std::fs::write(dir.join(format!("y{i}.log")), "y").unwrap();
    }
    std::fs::write(root.join(".gitignore"), "*.log\nd3/\n").unwrap();
    std::fs::write(root.join("d1/.gitignore"), "!keep.log\n").unwrap();
    std::fs::write(root.join("d1/keep.log"), "k").unwrap();
    std::fs::create_dir_all(root.join("node_modules/m")).unwrap();
    std::fs::write(root.join("node_modules/m/i.js"), "i").unwrap();
    let filter = Filter::new(&root, &Default::default(), Vec::new()).unwrap();
    let walk = |threads| {
        let mut seen = Vec::new();
        let mut files = Vec::new();
        let start = (root.clone(), BString::default(), filter.root_rules());
        let mut result = filter.walk_with(
            start,
            &mut |dirs: &[&Path]| {
                assert!(!dirs.is_empty() && dirs.len() <= SHOWN_AT_ONCE);
                seen.extend(dirs.iter().map(|d| d.to_path_buf()))
            },
            &mut |found: Listed| {
                // Each hand-over is one folder's files, each once, by name.
                assert!(!found.is_empty());
                assert!(found.iter().all(|(name, _)| !name.contains(&b'/')));
                let parent = |f: &WalkEntry| f.rel.rsplit_once_str("/").map(|(p, _)| p.to_vec());
                let dir = (!found.dir.is_empty()).then(|| found.dir.to_vec());
                assert!(found.entries().all(|f| parent(&f) == dir));
                assert_eq!(found.entries().count(), found.len());
                files.extend(found.entries())
            },
            threads,
        );
        result.files = files;
        (result, seen)
    };
    let (one, seen_one) = walk(1);
    let (many, seen_many) = walk(4);
    let files = |r: &WalkResult| sorted(r.files.iter().map(|f| f.rel.clone()).collect());
    assert_eq!(files(&one), files(&many));
    assert_eq!(sorted(one.dirs.clone()), sorted(many.dirs.clone()));
    assert_eq!(many.dirs[0], BString::default(), "the start folder first");
    assert_eq!(seen_one.len(), one.dirs.len());
    assert_eq!(seen_many.len(), many.dirs.len());
    let all = files(&many);
    assert!(all.contains(&"d1/keep.log".into()));
    assert!(!all
        .iter()
        .any(|f| f.ends_with(b".log") && f != "d1/keep.log"));
    assert!(!all
        .iter()
        .any(|f| f.starts_with(b"d3/") || f.starts_with(b"node_modules")));
    // 257 text files outside d3/, d1/keep.log, and the two .gitignore files.
    assert_eq!(all.len(), 257 + 3);
}

/// Each entry's stat is what `lstat` says of it, its kind comes from the stat's mode, a
/// symlink to a folder is an entry and is not followed, and a folder holding `.git` is
/// reported as a repository root (the `.git` itself never an entry).
#[test]
fn entries_carry_their_lstat_and_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    std::fs::create_dir_all(root.join("nested/.git")).unwrap();
    std::fs::create_dir_all(root.join("real")).unwrap();
    std::fs::write(root.join("real/file.txt"), "x").unwrap();
    std::fs::write(root.join("nested/inside.txt"), "y").unwrap();
    std::os::unix::fs::symlink("real", root.join("to-dir")).unwrap();
    std::os::unix::fs::symlink("real/file.txt", root.join("to-file")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let filter = Filter::new(&root, &Default::default(), Vec::new()).unwrap();
    for threads in [1, 2] {
        let mut files = Vec::new();
        let start = (root.clone(), BString::default(), filter.root_rules());
        let result = filter.walk_with(
            start,
            &mut |_| {},
            &mut |found| files.extend(found.entries()),
            threads,
        );
        let mut names: Vec<&[u8]> = files.iter().map(|f| f.rel.as_slice()).collect();
        names.sort();
        let want: [&[u8]; 5] = [
            b"fifo",
            b"nested/inside.txt",
            b"real/file.txt",
            b"to-dir",
            b"to-file",
        ];
        assert_eq!(names, want);
        for f in &files {
            let path = root.join(f.rel.to_str().unwrap());
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(f.stat, Stat::of(&meta), "{}", f.rel);
            assert_eq!(f.is_symlink(), meta.file_type().is_symlink(), "{}", f.rel);
            assert_eq!(f.is_file(), meta.file_type().is_file(), "{}", f.rel);
        }
        assert_eq!(result.repos, vec![BString::from("nested")]);
    }
}

/// A folder swapped for a symlink (or a file) after its parent was listed is not listed:
/// nothing of the symlink's target is taken for the project's, and it is no skip either
/// (the watcher reports the swap, which the next checkpoint looks at).
#[test]
fn a_folder_swapped_for_a_symlink_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "s").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("was-a-folder")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("now-a-file"), "f").unwrap();
    let filter = Filter::new(&root, &Default::default(), Vec::new()).unwrap();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(&root, flags, Mode::empty()).unwrap();
    for rel in ["was-a-folder", "now-a-file", "sub/deeper", "sub/deeper/x"] {
        let rules = filter.root_rules();
        let listing = filter.list_dir(fd.as_fd(), &root.join(rel), rel.into(), &rules);
        assert!(listing.files.is_empty(), "{rel}");
        assert!(listing.result.dirs.is_empty(), "{rel}");
        assert!(listing.result.skips.is_empty(), "{rel}");
        assert!(listing.subdirs.is_empty(), "{rel}");
    }
    // A subtree walk starting there finds nothing either.
    let walked = filter.walk_from("was-a-folder".into(), filter.root_rules(), &mut |_| {});
    assert!(walked.files.is_empty() && walked.skips.is_empty());
}
