//! A file name as the index keeps it: short names (almost all of them) inside the entry itself,
//! longer ones on the heap. A million files' names then cost no allocation each.

use std::borrow::Borrow;
use std::cmp::Ordering;

use gix::bstr::BStr;

/// Names up to this many bytes are kept inline.
const INLINE: usize = 22;

#[derive(Clone)]
pub(crate) enum Name {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Name {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Name::Heap(b) => b,
        }
    }
}

impl From<&[u8]> for Name {
    fn from(name: &[u8]) -> Name {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..name.len()].copy_from_slice(name);
                Name::Inline { len, bytes }
            }
            _ => Name::Heap(name.into()),
        }
    }
}

impl From<&BStr> for Name {
    fn from(name: &BStr) -> Name {
        let bytes: &[u8] = name;
        Name::from(bytes)
    }
}

impl std::ops::Deref for Name {
    type Target = BStr;

    fn deref(&self) -> &BStr {
        BStr::new(self.as_bytes())
    }
}

impl Borrow<BStr> for Name {
    fn borrow(&self) -> &BStr {
        self
    }
}

// Ordered and compared as their bytes, as `BStr` is (which `Borrow` requires).
impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_as_small_as_a_string_and_keeps_its_bytes() {
        assert_eq!(std::mem::size_of::<Name>(), 24);
        for len in [0, 1, 21, 22, 23, 200] {
            let bytes: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let name = Name::from(&bytes[..]);
            assert_eq!(name.as_bytes(), &bytes[..]);
            assert_eq!(matches!(name, Name::Inline { .. }), len <= INLINE);
        }
        // Ordered as bytes, whichever way each is kept.
        let short = Name::from(&b"b"[..]);
        let long = Name::from(&[b'a'; 40][..]);
        assert!(long < short);
        assert_eq!(short.cmp(&Name::from(&b"b"[..])), Ordering::Equal);
    }
}
