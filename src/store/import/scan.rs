//! Checking a bundle's pack before gix-pack reads it.

use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

/// Largest object a bundle may hold (ckpt never captures files larger than `max_file_size`;
/// this leaves room for a larger setting). Anything bigger is refused before it is allocated.
pub const MAX_BUNDLE_OBJECT_BYTES: u64 = 1 << 30;

type Reader = BufReader<std::fs::File>;

/// Reads every entry of the pack that starts at `offset` in `path` before gix-pack does:
/// each must declare at most `max` bytes (for a delta, also the object it makes), inflate to
/// exactly what it declares, and there must be as many entries as the pack says, then its
/// checksum. A crafted size can so never make the reader allocate what the file only claims.
pub fn scan_pack(path: &Path, offset: u64, max: u64) -> Result<u32, String> {
    let file = crate::safe_io::open_regular(path).map_err(|e| e.to_string())?;
    let mut r = BufReader::with_capacity(1 << 16, file);
    r.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    r.read_exact(&mut head)
        .map_err(|_| "the pack ends before its header".to_string())?;
    let version = u32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
    if &head[..4] != b"PACK" || !matches!(version, 2 | 3) {
        return Err("the data after the header is not a version 2 or 3 pack".into());
    }
    let count = u32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
    let mut out = vec![0u8; 1 << 16];
    for n in 0..count {
        let (kind, size) = entry_header(&mut r, n)?;
        if size > max {
            return Err(format!(
                "entry {n} declares {size} bytes; the largest object accepted is {max}"
            ));
        }
        let first = inflate(&mut r, n, size, &mut out)?;
        if matches!(kind, 6 | 7) {
            delta_sizes(&first, n, max)?;
        }
    }
    let mut trailer = Vec::new();
    r.take(21)
        .read_to_end(&mut trailer)
        .map_err(|e| e.to_string())?;
    if trailer.len() != 20 {
        return Err(format!(
            "the pack's {count} entries are followed by {} bytes, not its 20-byte checksum",
            trailer.len()
        ));
    }
    Ok(count)
}

fn byte(r: &mut Reader) -> Result<u8, String> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)
        .map_err(|_| "the pack ends in the middle of an entry".to_string())?;
    Ok(b[0])
}

/// An entry's type and declared size; a delta's base reference is read past.
fn entry_header(r: &mut Reader, n: u32) -> Result<(u8, u64), String> {
    let mut b = byte(r)?;
    let kind = (b >> 4) & 7;
    let mut size = u64::from(b & 0x0f);
    let mut shift = 4;
    while b & 0x80 != 0 {
        b = byte(r)?;
        if shift > 56 {
            return Err(format!("entry {n} declares an impossible size"));
        }
        size |= u64::from(b & 0x7f) << shift;
        shift += 7;
    }
    match kind {
        1..=4 => {}
        // An offset delta: a variable-length offset.
        6 => while byte(r)? & 0x80 != 0 {},
        // A ref delta: the base's id.
        7 => {
            let mut base = [0u8; 20];
            r.read_exact(&mut base)
                .map_err(|_| "the pack ends in the middle of an entry".to_string())?;
        }
        other => return Err(format!("entry {n} has unknown type {other}")),
    }
    Ok((kind, size))
}

/// Inflates entry `n` into the scratch buffer `out`, never past `size` bytes; returns the first
/// 20 bytes it made (a delta's sizes).
fn inflate(r: &mut Reader, n: u32, size: u64, out: &mut [u8]) -> Result<Vec<u8>, String> {
    let mut z = gix::zlib::Decompress::new();
    let mut first = Vec::new();
    loop {
        let input = r.fill_buf().map_err(|e| e.to_string())?;
        if input.is_empty() {
            return Err(format!("the pack ends inside entry {n}"));
        }
        let (in_before, out_before) = (z.total_in(), z.total_out());
        let status = z
            .decompress(input, out, gix::zlib::FlushDecompress::None)
            .map_err(|e| format!("entry {n} is not valid zlib data: {e}"))?;
        let consumed = (z.total_in() - in_before) as usize;
        let produced = (z.total_out() - out_before) as usize;
        r.consume(consumed);
        if first.len() < 20 {
            first.extend_from_slice(&out[..produced.min(20 - first.len())]);
        }
        if z.total_out() > size {
            return Err(format!(
                "entry {n} inflates to more than the {size} bytes it declares"
            ));
        }
        if status == gix::zlib::Status::StreamEnd {
            break;
        }
        if consumed == 0 && produced == 0 {
            return Err(format!("entry {n} does not inflate"));
        }
    }
    if z.total_out() != size {
        return Err(format!(
            "entry {n} inflates to {} bytes, not the {size} it declares",
            z.total_out()
        ));
    }
    Ok(first)
}

/// A delta starts with the size of its base and of the object it makes: both at most `max`.
fn delta_sizes(first: &[u8], n: u32, max: u64) -> Result<(), String> {
    let mut rest = first;
    for which in ["base", "result"] {
        let (mut value, mut shift) = (0u64, 0);
        loop {
            let Some((&b, tail)) = rest.split_first() else {
                return Err(format!("entry {n} is a delta without its sizes"));
            };
            rest = tail;
            if shift > 56 {
                return Err(format!("entry {n} is a delta with an impossible size"));
            }
            value |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        if value > max {
            return Err(format!(
                "entry {n} is a delta whose {which} is {value} bytes; the largest object accepted is {max}"
            ));
        }
    }
    Ok(())
}
