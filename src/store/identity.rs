//! Who ckpt writes commits and reflog entries as. A leaf.

/// The identity ckpt writes commits and reflogs as.
pub(crate) fn signature() -> gix::actor::Signature {
    let now = jiff::Timestamp::now();
    gix::actor::Signature {
        name: "ckpt".into(),
        email: "ckpt@localhost".into(),
        time: gix::date::Time::new(now.as_second(), 0),
    }
}
