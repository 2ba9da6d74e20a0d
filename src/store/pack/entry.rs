//! Pack entries as ckpt writes them: the type-and-size header (gix-pack's), a zlib stream
//! compressed at the fastest level or made of stored blocks (no compression, no table to
//! clear: an operation's few small objects), and reading such a stream back without inflating
//! (merging small packs compresses what an operation stored).

thread_local! {
    /// Each thread's compressor for large objects, reset for every one: setting one up
    /// allocates and clears a few hundred KiB.
    static DEFLATE: std::cell::RefCell<Option<gix::zlib::stream::deflate::Compress>> =
        const { std::cell::RefCell::new(None) };
}

/// Appends `data`, zlib-compressed (fastest level: gc may recompress), to `out`. Small objects
/// skip zlib's setup ([`super::deflate`]), and one that would not shrink may be stored.
pub(crate) fn deflate_into(data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    use gix::zlib::stream::deflate::{Compress, FlushCompress};
    use gix::zlib::Status;
    if data.len() <= super::deflate::SMALL_OBJECT {
        if !super::deflate::small_into(data, out) {
            store_into(data, out);
        }
        return Ok(());
    }
    DEFLATE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let z = cell.get_or_insert_with(|| Compress::new(gix::zlib::Compression::BEST_SPEED));
        z.reset();
        let mut input = data;
        let mut buf = [0u8; 16 * 1024];
        loop {
            let (before_in, before_out) = (z.total_in(), z.total_out());
            let status = z
                .compress(input, &mut buf, FlushCompress::Finish)
                .map_err(std::io::Error::other)?;
            out.extend_from_slice(&buf[..(z.total_out() - before_out) as usize]);
            input = &input[(z.total_in() - before_in) as usize..];
            match status {
                Status::StreamEnd => return Ok(()),
                Status::Ok | Status::BufError => {
                    if z.total_in() == before_in && z.total_out() == before_out {
                        return Err(std::io::Error::other("zlib made no progress"));
                    }
                }
            }
        }
    })
}

/// Appends `data` as a zlib stream of stored blocks: no compression, and no table to clear.
pub(crate) fn store_into(data: &[u8], out: &mut Vec<u8>) {
    out.reserve(data.len() + 2 + 5 * (data.len() / 0xffff + 1) + 4);
    // Deflate with a 32 KiB window, fastest level; (0x78 << 8 | 0x01) is a multiple of 31.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = data.chunks(0xffff).peekable();
    if data.is_empty() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let len = block.len() as u16;
        out.push(u8::from(blocks.peek().is_none()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&zlib_rs::adler32::adler32(1, data).to_be_bytes());
}

/// What a pack entry's zlib stream is, as [`store_into`] writes them.
#[derive(Debug, PartialEq)]
pub(crate) enum Stored {
    /// Stored blocks only, their checksum verified: the data.
    Data(Vec<u8>),
    /// Stored blocks only, whose checksum does not match their data.
    Broken,
    /// Anything else (compressed blocks, another layout): copied as it is.
    No,
}

/// Reads a zlib stream made only of stored blocks.
pub(crate) fn read_stored(stream: &[u8]) -> Stored {
    let Some((header, mut rest)) = stream.split_at_checked(2) else {
        return Stored::No;
    };
    // Deflate, no preset dictionary, a valid header check.
    if header[0] & 0x0f != 8
        || header[1] & 0x20 != 0
        || u16::from_be_bytes([header[0], header[1]]) % 31 != 0
    {
        return Stored::No;
    }
    let mut data = Vec::new();
    loop {
        let Some((&head, after)) = rest.split_first() else {
            return Stored::No;
        };
        if head & !1 != 0 {
            return Stored::No; // A compressed block (or stray bits).
        }
        let Some((lengths, after)) = after.split_at_checked(4) else {
            return Stored::No;
        };
        let len = u16::from_le_bytes([lengths[0], lengths[1]]);
        if !len != u16::from_le_bytes([lengths[2], lengths[3]]) {
            return Stored::No;
        }
        let Some((block, after)) = after.split_at_checked(usize::from(len)) else {
            return Stored::No;
        };
        data.extend_from_slice(block);
        rest = after;
        if head & 1 == 1 {
            break;
        }
    }
    match <[u8; 4]>::try_from(rest) {
        Ok(sum) if u32::from_be_bytes(sum) == zlib_rs::adler32::adler32(1, &data) => {
            Stored::Data(data)
        }
        Ok(_) => Stored::Broken,
        Err(_) => Stored::No,
    }
}

/// Appends the pack entry header of an object of `kind` and `size` bytes to `out` (gix-pack's
/// encoding).
pub(crate) fn entry_header(kind: gix::objs::Kind, size: usize, out: &mut Vec<u8>) {
    use gix_pack::data::entry::Header;
    let header = match kind {
        gix::objs::Kind::Commit => Header::Commit,
        gix::objs::Kind::Tree => Header::Tree,
        gix::objs::Kind::Blob => Header::Blob,
        gix::objs::Kind::Tag => Header::Tag,
    };
    header
        .write_to(size as u64, out)
        .expect("writing into a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored streams read back as written, across block boundaries; compressed, damaged
    /// or cut-short streams are told apart.
    #[test]
    fn stored_streams_read_back_and_others_are_told_apart() {
        for len in [0, 1, 100, 0xffff, 0x10000, 200_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut stream = Vec::new();
            store_into(&data, &mut stream);
            assert_eq!(read_stored(&stream), Stored::Data(data.clone()), "{len}");
            // Any zlib reader agrees.
            let mut inflated = vec![0u8; len + 1];
            let mut z = gix::zlib::Decompress::new();
            z.decompress(&stream, &mut inflated, gix::zlib::FlushDecompress::Finish)
                .unwrap();
            assert_eq!(z.total_out() as usize, len);
            assert_eq!(&inflated[..len], data.as_slice());
            if len > 0 {
                let mut flipped = stream.clone();
                flipped[8] ^= 1;
                assert_eq!(read_stored(&flipped), Stored::Broken, "{len}");
            }
            assert_eq!(read_stored(&stream[..stream.len() - 1]), Stored::No);
            let mut compressed = Vec::new();
            deflate_into(&data, &mut compressed).unwrap();
            // (Too short to repeat itself, 100 bytes are stored: they would grow.)
            if len > 100 {
                assert_eq!(read_stored(&compressed), Stored::No, "{len}");
            }
        }
        assert_eq!(read_stored(b""), Stored::No);
        assert_eq!(read_stored(b"\x78\x9c"), Stored::No);
    }

    #[test]
    fn entry_headers_encode_sizes() {
        let mut out = Vec::new();
        entry_header(gix::objs::Kind::Blob, 15, &mut out);
        assert_eq!(out, vec![0x3f]);
        out.clear();
        entry_header(gix::objs::Kind::Blob, 16, &mut out);
        assert_eq!(out, vec![0xb0, 0x01]);
        out.clear();
        entry_header(gix::objs::Kind::Tree, 2000, &mut out);
        assert_eq!(out, vec![0xa0, 0x7d]);
    }
}
