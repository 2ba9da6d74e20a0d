//! Small objects compressed three ways, in this run: ckpt's own encoder (`store::pack::deflate`,
//! one fixed-Huffman block, a table sized to the object), miniz_oxide at its fastest level, and
//! zlib-rs at its fastest level (what gix uses, and what ckpt uses above 64 KiB). The objects are
//! the benchmark tree's files (2 KB each) and the files of this repository's `src/` (real source
//! of every size up to 64 KiB). Printed: the median time per object over interleaved rounds, the
//! compressed size against the input, and the ratios against ckpt's encoder.

use std::path::Path;
use std::time::{Duration, Instant};

use ckpt::store::pack::deflate::{small_into, MAX_OBJECT};

use super::support::{content, median, ms};

/// The objects of one case.
fn objects(case: &str) -> Vec<Vec<u8>> {
    let sized = |low: usize, high: usize| -> Vec<Vec<u8>> {
        let all = source().into_iter();
        all.filter(|o| o.len() > low && o.len() <= high).collect()
    };
    match case {
        "tree" => (0..2000).map(|i| content(i, 0).into_bytes()).collect(),
        "src ≤ 2 KiB" => sized(0, 2 << 10),
        "src 2–8 KiB" => sized(2 << 10, 8 << 10),
        _ => sized(8 << 10, MAX_OBJECT),
    }
}

/// This repository's source files up to [`MAX_OBJECT`].
fn source() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(data) = std::fs::read(&path) {
                if data.len() <= MAX_OBJECT {
                    out.push(data);
                }
            }
        }
    }
    out
}

fn ckpt_encoder(data: &[u8], out: &mut Vec<u8>) {
    if !small_into(data, out) {
        out.extend_from_slice(data);
    }
}

fn miniz(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&miniz_oxide::deflate::compress_to_vec_zlib(data, 1));
}

fn zlib_rs(data: &[u8], out: &mut Vec<u8>) {
    use gix::zlib::stream::deflate::{Compress, FlushCompress};
    // A compressor per object, as a zlib stream costs: reset is what ckpt would do per object.
    thread_local! {
        static Z: std::cell::RefCell<Compress> =
            std::cell::RefCell::new(Compress::new(gix::zlib::Compression::BEST_SPEED));
    }
    Z.with(|z| {
        let mut z = z.borrow_mut();
        z.reset();
        let mut buf = vec![0u8; data.len() + 64];
        z.compress(data, &mut buf, FlushCompress::Finish)
            .expect("zlib");
        out.extend_from_slice(&buf[..z.total_out() as usize]);
    });
}

type Encoder = fn(&[u8], &mut Vec<u8>);

/// Prints the section; `rounds` interleaved rounds per case.
pub fn compare(rounds: usize) {
    let encoders: [(&str, Encoder); 3] = [
        ("ckpt", ckpt_encoder),
        ("miniz_oxide 1", miniz),
        ("zlib-rs 1", zlib_rs),
    ];
    println!();
    println!("## small objects: compression (median per object, {rounds} interleaved rounds)");
    println!("| objects | encoder | µs/object | size vs input | time vs ckpt |");
    println!("|---|---|---:|---:|---:|");
    for case in ["tree", "src ≤ 2 KiB", "src 2–8 KiB", "src > 8 KiB"] {
        let objects = objects(case);
        let input: usize = objects.iter().map(Vec::len).sum();
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); encoders.len()];
        let mut sizes = vec![0usize; encoders.len()];
        let mut out = Vec::with_capacity(MAX_OBJECT * 2);
        for round in 0..rounds {
            for k in 0..encoders.len() {
                // Which encoder goes first turns each round.
                let k = (k + round) % encoders.len();
                let (_, encode) = encoders[k];
                let mut size = 0;
                let t = Instant::now();
                for o in &objects {
                    out.clear();
                    encode(o, &mut out);
                    size += out.len();
                }
                times[k].push(t.elapsed() / objects.len() as u32);
                sizes[k] = size;
            }
        }
        let medians: Vec<Duration> = times.into_iter().map(median).collect();
        for (k, (name, _)) in encoders.iter().enumerate() {
            println!(
                "| {case} ({} × {} B) | {name} | {:.2} | {:.1} % | {:.2}× |",
                objects.len(),
                input / objects.len().max(1),
                ms(medians[k]) * 1000.0,
                100.0 * sizes[k] as f64 / input as f64,
                medians[k].as_secs_f64() / medians[0].as_secs_f64()
            );
        }
    }
}
