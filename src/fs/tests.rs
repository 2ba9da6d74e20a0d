//! Opening and reading project files under attack: FIFOs, symlinks, swaps, rewrites.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::Mode;

use super::read::*;
use super::*;

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let err = open_regular(&fifo).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let root = open_dir(dir.path()).unwrap();
    let file = open_beneath(root.as_fd(), b"pipe").unwrap();
    assert!(matches!(
        read_stable(&file, 100).unwrap(),
        StableRead::NotRegular
    ));
    assert!(read_small(&fifo, 100).is_none());
}

/// A walk's stat stands for the stat before the read only while the file is unchanged:
/// rewritten since (even to its size and mtime), it is read as it is now, with its new stat.
#[test]
fn a_walks_stat_holds_only_for_an_unchanged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, "one").unwrap();
    let seen = Stat::of(&std::fs::metadata(&path).unwrap());
    let root = open_dir(dir.path()).unwrap();
    let read = |max| {
        let file = open_beneath(root.as_fd(), b"f").unwrap();
        match read_stable_seen(&file, max, &seen).unwrap() {
            StableRead::Data { data, stat } => (data, stat),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(read(100), (b"one".to_vec(), seen));
    std::fs::write(&path, "uno").unwrap();
    let mtime = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: seen.mtime_ns.div_euclid(1_000_000_000),
            tv_nsec: seen.mtime_ns.rem_euclid(1_000_000_000) as _,
        },
    };
    rustix::fs::utimensat(rustix::fs::CWD, &path, &mtime, rustix::fs::AtFlags::empty()).unwrap();
    let (data, stat) = read(100);
    assert_eq!(data, b"uno");
    assert_eq!((stat.size, stat.mtime_ns), (seen.size, seen.mtime_ns));
    assert_ne!(stat.ctime_ns, seen.ctime_ns);
    std::fs::write(&path, "longer").unwrap();
    assert_eq!(read(100).0, b"longer");
    let file = open_beneath(root.as_fd(), b"f").unwrap();
    let too_large = read_stable_seen(&file, 4, &seen).unwrap();
    assert!(
        matches!(too_large, StableRead::TooLarge(6)),
        "{too_large:?}"
    );
}

#[test]
fn read_small_takes_files_up_to_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, [7u8; 100]).unwrap();
    assert_eq!(read_small(&path, 100).unwrap(), [7u8; 100]);
    assert!(read_small(&path, 99).is_none());
    assert!(read_small(&dir.path().join("absent"), 100).is_none());
    assert!(read_small(dir.path(), 100).is_none());
}

#[test]
fn symlinked_parents_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    std::fs::write(dir.path().join("plain"), "p").unwrap();
    let root = open_dir(dir.path()).unwrap();
    assert!(open_beneath(root.as_fd(), b"link/secret").is_err());
    assert!(open_beneath(root.as_fd(), b"link").is_err());
    assert!(open_beneath(root.as_fd(), b"../x").is_err());
    let file = open_beneath(root.as_fd(), b"plain").unwrap();
    match read_stable(&file, 100).unwrap() {
        StableRead::Data { data, stat } => {
            assert_eq!(data, b"p");
            assert_eq!(stat.size, 1);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        read_link_beneath(root.as_fd(), b"link").unwrap(),
        outside.path().as_os_str().as_bytes()
    );
}

/// Opening folder by folder refuses what `open_beneath` refuses, and a folder swapped for
/// a symlink between two opens is not followed.
#[test]
fn folder_by_folder_opens_refuse_what_open_beneath_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    std::fs::write(dir.path().join("a/b/one"), "1").unwrap();
    std::fs::write(dir.path().join("a/b/two"), "2").unwrap();
    std::fs::write(dir.path().join("top"), "t").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink("one", dir.path().join("a/b/alias")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("a/b/fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let root = open_dir(dir.path()).unwrap();
    let mut files = Beneath::new(root.as_fd());
    let read = |f: File| read_small_from(f);
    assert_eq!(read(files.open(b"a/b/one").unwrap()), b"1");
    assert_eq!(read(files.open(b"a/b/two").unwrap()), b"2");
    assert_eq!(read(files.open(b"top").unwrap()), b"t");
    let loop_err = files.open(b"a/b/alias").unwrap_err();
    assert_eq!(
        loop_err.raw_os_error(),
        Some(rustix::io::Errno::LOOP.raw_os_error())
    );
    // A FIFO opens without blocking; reading it finds no regular file.
    let fifo = files.open(b"a/b/fifo").unwrap();
    assert!(matches!(read_stable(&fifo, 10), Ok(StableRead::NotRegular)));
    // Nor when the walk saw a regular file by that name: `pread` refuses a FIFO.
    let seen = Stat::of(&std::fs::metadata(dir.path().join("top")).unwrap());
    let fifo_read = read_stable_seen(&fifo, 10, &seen);
    assert!(
        matches!(fifo_read, Ok(StableRead::NotRegular)),
        "{fifo_read:?}"
    );
    assert!(files.open(b"link/secret").is_err());
    assert!(files.open(b"../x/y").is_err());
    let gone = files.open(b"a/b/none").unwrap_err();
    assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    // The folder is moved away and a symlink to the outside takes its name: the open
    // folder is still the one it opened (never the symlink's target), and a fresh open of
    // the folder refuses the symlink.
    assert_eq!(read(files.open(b"a/b/one").unwrap()), b"1");
    std::fs::rename(dir.path().join("a/b"), dir.path().join("a/old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("a/b")).unwrap();
    assert_eq!(read(files.open(b"a/b/two").unwrap()), b"2");
    assert!(files.open(b"a/b/secret").is_err());
    let mut fresh = Beneath::new(root.as_fd());
    let refused = fresh.open(b"a/b/secret").unwrap_err();
    assert_eq!(
        refused.raw_os_error(),
        Some(rustix::io::Errno::LOOP.raw_os_error())
    );
}

fn read_small_from(file: File) -> Vec<u8> {
    match read_stable(&file, 100).unwrap() {
        StableRead::Data { data, .. } => data,
        other => panic!("{other:?}"),
    }
}
