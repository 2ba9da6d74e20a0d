//! The store's pack files, in git's formats: the writer of an operation's pack
//! ([`writer::PackWriter`]) and of its entries ([`entry`], compressed by ckpt's own encoder for
//! small objects, [`deflate`]), the version 2 index ([`index`], rebuilt from its pack where a
//! power cut left it unfinished), and the merging of small packs ([`small`], [`merge`]).
//!
//! How a pack becomes durable and visible (journaled, published, redone after a crash) is the
//! transaction's business ([`crate::store::txn`]); what is here only writes and reads bytes.

pub mod deflate;
pub mod entry;
pub mod index;
pub mod merge;
pub mod sealed;
pub mod small;
pub mod writer;
