//! New session ids in the agents' own kinds of UUID.

/// A new random UUID (version 4), as Claude Code and Gemini CLI name sessions.
pub(super) fn uuid_v4() -> String {
    let mut b = random16();
    b[6] = 0x40 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    format_uuid(&b)
}

/// A new time-ordered UUID (version 7), as Codex names sessions.
pub(super) fn uuid_v7() -> String {
    let mut b = random16();
    let ms = (jiff::Timestamp::now().as_millisecond().max(0) as u64).to_be_bytes();
    b[..6].copy_from_slice(&ms[2..]);
    b[6] = 0x70 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    format_uuid(&b)
}

pub(super) fn random16() -> [u8; 16] {
    let mut b = [0u8; 16];
    let mut filled = 0;
    while filled < b.len() {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // The kernel's generator does not fail once booted; a clock-based id still differs
            // from every other session's.
            Err(_) => {
                let now = jiff::Timestamp::now().as_nanosecond() as u128;
                b = (now ^ (u128::from(std::process::id()) << 64)).to_be_bytes();
                break;
            }
        }
    }
    b
}

fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
