//! The bundle reader: any file given to `import --bundle` is read into a store or refused
//! with an error; never a panic, never a hang.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Scratch {
    _dir: tempfile::TempDir,
    store: ckpt::store::Store,
    bundle: std::path::PathBuf,
}

fn scratch() -> &'static Scratch {
    static SCRATCH: OnceLock<Scratch> = OnceLock::new();
    SCRATCH.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = ckpt::store::Store::open_or_init(&dir.path().join("store"), dir.path())
            .expect("a store");
        let bundle = dir.path().join("input.bundle");
        Scratch { _dir: dir, store, bundle }
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = ckpt::store::import::read_header(&mut &data[..], std::path::Path::new("input"));
    let s = scratch();
    std::fs::write(&s.bundle, data).expect("write the input");
    if let Ok(objects) = s.store.import_bundle_objects(&s.bundle) {
        let repo = s.store.repo();
        let _ = s.store.import_candidates(&repo, &objects.header);
        objects.discard();
    }
});
