//! A zlib stream for a small object without zlib's per-stream setup: one deflate block with
//! the fixed Huffman codes (RFC 1951, 3.2.6), its repeats found greedily through a table of
//! recent positions sized to the object.
//!
//! zlib's fastest level makes the same kind of block, but every stream clears a 128 KiB table
//! first: for the 2 KB file typical of a project, clearing it cost more than compressing the
//! file (a project's first checkpoint compresses every file it has). Here the table is at most
//! four times the object's size (256 bytes at least), and an object that would grow is left
//! to be stored instead.

use std::cell::RefCell;

/// The largest object written here; larger ones go to zlib, whose setup they repay. Measured
/// against zlib-rs's fastest level (the benchmark's compression section): 1.4× faster on real
/// source files up to 2 KiB and 3.7× on the benchmark tree's 2 KB files, even from 2 KiB on.
pub const SMALL_OBJECT: usize = 4 << 10;
/// The largest object [`small_into`] takes (what the fuzz target and the tests give it).
pub const MAX_OBJECT: usize = 64 << 10;

const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
const WINDOW: usize = 32 << 10;
const END_OF_BLOCK: usize = 256;

/// Lengths 3..=258: the first length of each length code (257 + index), and its extra bits.
const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// Distances 1..=32768: the first distance of each distance code, and its extra bits.
const DISTANCE_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DISTANCE_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// The fixed code of each literal/length symbol, bit-reversed (deflate sends Huffman codes
/// from their first bit, everything else from its lowest), and its length in bits.
const LITERAL_CODES: [(u16, u8); 288] = {
    let mut codes = [(0u16, 0u8); 288];
    let mut symbol = 0;
    while symbol < 288 {
        let (code, len) = match symbol {
            0..=143 => (0x30 + symbol, 8),
            144..=255 => (0x190 + symbol - 144, 9),
            256..=279 => (symbol - 256, 7),
            _ => (0xc0 + symbol - 280, 8),
        };
        codes[symbol] = (reverse(code as u16, len), len as u8);
        symbol += 1;
    }
    codes
};

/// For each match length 0..=258, the index of its length code (lengths below 3 unused).
const LENGTH_CODE: [u8; 259] = {
    let mut table = [0u8; 259];
    let mut code = 0;
    let mut len = 3;
    while len <= MAX_MATCH {
        while code + 1 < LENGTH_BASE.len() && LENGTH_BASE[code + 1] as usize <= len {
            code += 1;
        }
        table[len] = code as u8;
        len += 1;
    }
    table
};

const fn reverse(code: u16, len: u32) -> u16 {
    code.reverse_bits() >> (16 - len)
}

/// The index of the distance code of `distance` (1..=32768).
fn distance_code(distance: usize) -> usize {
    let d = (distance - 1) as u32;
    if d < 4 {
        d as usize
    } else {
        let top = 31 - d.leading_zeros();
        (2 * top + ((d >> (top - 1)) & 1)) as usize
    }
}

/// Bits gathered from their lowest and written out 32 at a time.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    bits: u64,
    count: u32,
}

impl BitWriter<'_> {
    /// Appends the `len` (≤ 32) lowest bits of `value`.
    fn put(&mut self, value: u32, len: u32) {
        self.bits |= u64::from(value) << self.count;
        self.count += len;
        if self.count >= 32 {
            self.out
                .extend_from_slice(&(self.bits as u32).to_le_bytes());
            self.bits >>= 32;
            self.count -= 32;
        }
    }

    fn symbol(&mut self, symbol: usize) {
        let (code, len) = LITERAL_CODES[symbol];
        self.put(u32::from(code), u32::from(len));
    }

    fn literals(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.symbol(usize::from(byte));
        }
    }

    fn repeat(&mut self, len: usize, distance: usize) {
        let code = usize::from(LENGTH_CODE[len]);
        self.symbol(257 + code);
        self.put(
            (len - usize::from(LENGTH_BASE[code])) as u32,
            u32::from(LENGTH_EXTRA[code]),
        );
        let code = distance_code(distance);
        // Distance codes are all five bits long.
        self.put(u32::from(reverse(code as u16, 5)), 5);
        self.put(
            (distance - usize::from(DISTANCE_BASE[code])) as u32,
            u32::from(DISTANCE_EXTRA[code]),
        );
    }

    /// Writes out the last bits, the last byte padded with zeros.
    fn finish(self) {
        let bytes = self.count.div_ceil(8) as usize;
        self.out
            .extend_from_slice(&self.bits.to_le_bytes()[..bytes]);
    }
}

thread_local! {
    /// Each thread's table of positions (plus one; 0 is empty), reused across objects.
    static POSITIONS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

fn read4(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("four bytes"))
}

/// How many bytes from `a` and `b` (`a` < `b`) agree, up to `max`.
fn common(data: &[u8], a: usize, b: usize, max: usize) -> usize {
    let mut len = 0;
    while len + 8 <= max {
        let x = u64::from_le_bytes(data[a + len..a + len + 8].try_into().expect("eight bytes"));
        let y = u64::from_le_bytes(data[b + len..b + len + 8].try_into().expect("eight bytes"));
        let diff = x ^ y;
        if diff != 0 {
            return len + (diff.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    while len < max && data[a + len] == data[b + len] {
        len += 1;
    }
    len
}

/// Appends `data` (at most [`MAX_OBJECT`] bytes) to `out` as a zlib stream; false (`out` as
/// it was) when the stream would be larger than `data` in stored blocks.
pub fn small_into(data: &[u8], out: &mut Vec<u8>) -> bool {
    debug_assert!(data.len() <= MAX_OBJECT);
    let start = out.len();
    out.reserve(data.len() / 2 + 16);
    // Deflate with a 32 KiB window, fastest level; (0x78 << 8 | 0x01) is a multiple of 31.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut bits = BitWriter {
        out,
        bits: 0,
        count: 0,
    };
    // The only block: last (1), fixed codes (01).
    bits.put(0b011, 3);
    POSITIONS.with(|cell| {
        let mut positions = cell.borrow_mut();
        let table_bits = data.len().next_power_of_two().trailing_zeros().clamp(6, 14);
        positions.clear();
        positions.resize(1 << table_bits, 0);
        let mut pending = 0;
        let mut at = 0;
        while at + MIN_MATCH <= data.len() {
            let word = read4(data, at);
            let slot = (word.wrapping_mul(0x9E37_79B1) >> (32 - table_bits)) as usize;
            let earlier = positions[slot] as usize;
            positions[slot] = at as u32 + 1;
            if earlier > 0 && at - (earlier - 1) <= WINDOW && read4(data, earlier - 1) == word {
                let earlier = earlier - 1;
                let max = MAX_MATCH.min(data.len() - at);
                let len = MIN_MATCH + common(data, earlier + MIN_MATCH, at + MIN_MATCH, max - 4);
                bits.literals(&data[pending..at]);
                bits.repeat(len, at - earlier);
                at += len;
                pending = at;
            } else {
                at += 1;
            }
        }
        bits.literals(&data[pending..]);
    });
    bits.symbol(END_OF_BLOCK);
    bits.finish();
    // Stored blocks take 5 bytes each.
    if out.len() - start > data.len() + 5 * (data.len() / 0xffff + 1) + 2 {
        out.truncate(start);
        return false;
    }
    out.extend_from_slice(&zlib_rs::adler32::adler32(1, data).to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflate(stream: &[u8], len: usize) -> Vec<u8> {
        let mut inflated = vec![0u8; len + 1];
        let mut z = gix::zlib::Decompress::new();
        let status = z
            .decompress(stream, &mut inflated, gix::zlib::FlushDecompress::Finish)
            .unwrap();
        assert_eq!(status, gix::zlib::Status::StreamEnd);
        assert_eq!(z.total_in() as usize, stream.len(), "the whole stream read");
        inflated.truncate(z.total_out() as usize);
        inflated
    }

    /// A small generator of bytes with repeats at every distance, runs and noise.
    struct Mixer(u64);

    impl Mixer {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn bytes(&mut self, len: usize) -> Vec<u8> {
            let mut data = Vec::with_capacity(len);
            while data.len() < len {
                let r = self.next();
                match r % 5 {
                    0 | 1 if data.len() > 4 => {
                        // A copy of something earlier, possibly overlapping itself.
                        let back = 1 + (r >> 8) as usize % data.len().min(40_000);
                        let n = 3 + (r >> 24) as usize % 300;
                        for _ in 0..n {
                            data.push(data[data.len() - back]);
                        }
                    }
                    2 => data.extend(std::iter::repeat_n(
                        (r >> 8) as u8,
                        (r >> 16) as usize % 600,
                    )),
                    3 => data.extend_from_slice(b"fn main() { println!(\"hello\"); }\n"),
                    _ => data.extend((0..(r >> 8) as usize % 50).map(|_| self.next() as u8)),
                }
            }
            data.truncate(len);
            data
        }
    }

    #[test]
    fn the_codes_match_their_tables() {
        for (len, &code) in LENGTH_CODE.iter().enumerate().skip(3) {
            let code = usize::from(code);
            let base = usize::from(LENGTH_BASE[code]);
            assert!(base <= len && len - base < 1 << LENGTH_EXTRA[code], "{len}");
            assert!(len == MAX_MATCH || code == 28 || len < usize::from(LENGTH_BASE[code + 1]));
        }
        assert_eq!(LENGTH_CODE[MAX_MATCH], 28);
        for distance in 1..=WINDOW {
            let code = distance_code(distance);
            let base = usize::from(DISTANCE_BASE[code]);
            assert!(base <= distance && distance - base < 1 << DISTANCE_EXTRA[code]);
        }
        // Two literals and the end of block, by hand: 'A' 0x41 -> 0x71 (8 bits), 0xff -> 0x1ff.
        assert_eq!(LITERAL_CODES[0x41], (reverse(0x71, 8), 8));
        assert_eq!(LITERAL_CODES[0xff], (0x1ff, 9));
        assert_eq!(LITERAL_CODES[END_OF_BLOCK], (0, 7));
    }

    #[test]
    fn streams_inflate_to_their_data() {
        let mut mixer = Mixer(0x9e37_79b9_7f4a_7c15);
        let mut sizes: Vec<usize> = (0..70).collect();
        sizes.extend([
            255, 256, 257, 258, 259, 4095, 4096, 32767, 32768, 32769, 65535,
        ]);
        sizes.extend((0..300).map(|_| mixer.next() as usize % (MAX_OBJECT + 1)));
        sizes.push(MAX_OBJECT);
        for len in sizes {
            for data in [
                mixer.bytes(len),
                vec![b'a'; len],
                (0..len).map(|_| mixer.next() as u8).collect(),
                (0..len).map(|i| (i % 251) as u8).collect(),
            ] {
                let mut stream = vec![7u8; 3];
                let written = small_into(&data, &mut stream);
                assert_eq!(&stream[..3], &[7, 7, 7], "appends");
                if !written {
                    // Only what does not repeat itself is left to be stored.
                    assert_eq!(stream.len(), 3);
                    assert!(
                        len < 300 || data[..200].iter().any(|&b| b != data[0]),
                        "{len}"
                    );
                    continue;
                }
                assert_eq!(inflate(&stream[3..], len), data, "{len}");
                assert!(
                    stream.len() - 3 <= len + 5 * (len / 0xffff + 1) + 6,
                    "{len}"
                );
            }
        }
    }

    #[test]
    fn text_compresses_like_zlib_fastest() {
        let mut text = Vec::new();
        for n in 0..400 {
            text.extend_from_slice(
                format!("let value_{n} = compute({n}, \"{}\");\n", n * 7).as_bytes(),
            );
        }
        text.truncate(MAX_OBJECT);
        let mut ours = Vec::new();
        assert!(small_into(&text, &mut ours));
        let mut zlib = Vec::new();
        let mut z = gix::zlib::stream::deflate::Compress::new(gix::zlib::Compression::BEST_SPEED);
        zlib.resize(text.len() * 2, 0);
        z.compress(
            &text,
            &mut zlib,
            gix::zlib::stream::deflate::FlushCompress::Finish,
        )
        .unwrap();
        zlib.truncate(z.total_out() as usize);
        assert!(
            ours.len() < text.len() / 3,
            "{} of {}",
            ours.len(),
            text.len()
        );
        assert!(
            ours.len() * 4 < zlib.len() * 5,
            "{} vs zlib's {}",
            ours.len(),
            zlib.len()
        );
    }
}
