//! ckpt's small-object encoder (`store::pack::deflate`): whatever the object, the stream it
//! writes is a valid zlib stream that a standard inflater (miniz_oxide, checking the adler-32)
//! turns back into exactly the object, no larger than the same object in stored blocks; and
//! when it declines (the stream would be larger), it leaves its output as it was.
#![no_main]

use ckpt::store::pack::deflate::{small_into, MAX_OBJECT};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte repeats the rest (up to the encoder's limit): long inputs full of
    // repeats, far matches and matches that run to the end come from short fuzz inputs.
    let (times, body) = match data.split_first() {
        Some((n, body)) => (usize::from(*n % 64) + 1, body),
        None => (1, data),
    };
    let mut object = Vec::with_capacity(body.len() * times);
    for _ in 0..times {
        object.extend_from_slice(body);
    }
    object.truncate(MAX_OBJECT);
    let mut out = b"before".to_vec();
    if small_into(&object, &mut out) {
        assert_eq!(&out[..6], b"before", "what was in the output stays");
        let stream = &out[6..];
        let inflated = miniz_oxide::inflate::decompress_to_vec_zlib(stream)
            .expect("a valid zlib stream with a matching adler-32");
        assert_eq!(inflated, object, "the stream inflates to the object");
        let stored = object.len() + 5 * (object.len() / 0xffff + 1) + 2 + 4;
        assert!(stream.len() <= stored, "never larger than stored blocks");
    } else {
        assert_eq!(out, b"before", "a declined object leaves the output as it was");
    }
});
