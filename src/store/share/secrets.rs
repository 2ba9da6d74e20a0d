//! The secret scan a prompt goes through before it leaves the machine: high-confidence secrets
//! (private key blocks, cloud, forge, chat and model-provider tokens) become `[redacted]`.
//!
//! Only shapes that are secrets with near certainty are matched (a known prefix and enough
//! characters of the token's alphabet), so prose is never mangled; a token must start where a
//! word starts.

/// What replaces each secret.
pub const REDACTED: &str = "[redacted]";

/// A token shape: its prefix, the characters of its body, and the body's length.
struct Shape {
    kind: &'static str,
    prefix: &'static str,
    body: fn(u8) -> bool,
    min: usize,
    /// Longest body (a fixed-length token: `min == max`).
    max: usize,
}

fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}
fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_us(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
fn alnum_us_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}
fn alnum_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

const SHAPES: &[Shape] = &[
    Shape {
        kind: "AWS access key",
        prefix: "AKIA",
        body: upper_digit,
        min: 16,
        max: 16,
    },
    Shape {
        kind: "AWS access key",
        prefix: "ASIA",
        body: upper_digit,
        min: 16,
        max: 16,
    },
    Shape {
        kind: "GitHub token",
        prefix: "ghp_",
        body: alnum,
        min: 36,
        max: 255,
    },
    Shape {
        kind: "GitHub token",
        prefix: "gho_",
        body: alnum,
        min: 36,
        max: 255,
    },
    Shape {
        kind: "GitHub token",
        prefix: "ghu_",
        body: alnum,
        min: 36,
        max: 255,
    },
    Shape {
        kind: "GitHub token",
        prefix: "ghs_",
        body: alnum,
        min: 36,
        max: 255,
    },
    Shape {
        kind: "GitHub token",
        prefix: "ghr_",
        body: alnum,
        min: 36,
        max: 255,
    },
    Shape {
        kind: "GitHub token",
        prefix: "github_pat_",
        body: alnum_us,
        min: 22,
        max: 255,
    },
    Shape {
        kind: "GitLab token",
        prefix: "glpat-",
        body: alnum_us_dash,
        min: 20,
        max: 255,
    },
    Shape {
        kind: "Slack token",
        prefix: "xoxb-",
        body: alnum_dash,
        min: 10,
        max: 255,
    },
    Shape {
        kind: "Slack token",
        prefix: "xoxp-",
        body: alnum_dash,
        min: 10,
        max: 255,
    },
    Shape {
        kind: "Slack token",
        prefix: "xoxa-",
        body: alnum_dash,
        min: 10,
        max: 255,
    },
    Shape {
        kind: "Slack token",
        prefix: "xoxr-",
        body: alnum_dash,
        min: 10,
        max: 255,
    },
    Shape {
        kind: "Slack token",
        prefix: "xoxs-",
        body: alnum_dash,
        min: 10,
        max: 255,
    },
    Shape {
        kind: "Google API key",
        prefix: "AIza",
        body: alnum_us_dash,
        min: 35,
        max: 35,
    },
    Shape {
        kind: "Anthropic key",
        prefix: "sk-ant-",
        body: alnum_us_dash,
        min: 20,
        max: 255,
    },
    Shape {
        kind: "OpenAI key",
        prefix: "sk-proj-",
        body: alnum_us_dash,
        min: 20,
        max: 255,
    },
    Shape {
        kind: "OpenAI key",
        prefix: "sk-",
        body: alnum_us_dash,
        min: 32,
        max: 255,
    },
    Shape {
        kind: "Stripe key",
        prefix: "sk_live_",
        body: alnum,
        min: 24,
        max: 255,
    },
    Shape {
        kind: "Stripe key",
        prefix: "rk_live_",
        body: alnum,
        min: 24,
        max: 255,
    },
    Shape {
        kind: "npm token",
        prefix: "npm_",
        body: alnum,
        min: 36,
        max: 36,
    },
    Shape {
        kind: "Hugging Face token",
        prefix: "hf_",
        body: alnum,
        min: 34,
        max: 34,
    },
];

const KEY_BEGIN: &str = "-----BEGIN ";
const KEY_LABEL_END: &str = "PRIVATE KEY-----";
const KEY_END: &str = "-----END ";

/// `text` with every high-confidence secret replaced by [`REDACTED`], and the kinds found (one
/// entry per secret, in order).
pub fn redact(text: &str) -> (String, Vec<&'static str>) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut found = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some((end, kind)) = secret_at(text, i) {
            out.push_str(&text[copied..i]);
            out.push_str(REDACTED);
            found.push(kind);
            copied = end;
            i = end;
            continue;
        }
        // Step over a whole character (slices stay on character boundaries).
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    out.push_str(&text[copied..]);
    (out, found)
}

/// The end of the secret starting at byte `i` of `text`, and its kind.
fn secret_at(text: &str, i: usize) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let rest = &text[i..];
    if rest.starts_with(KEY_BEGIN) {
        let line_end = rest.find('\n').unwrap_or(rest.len());
        if rest[..line_end].trim_end().ends_with(KEY_LABEL_END) {
            // To the end of the END line, or of the text when the block was cut short.
            let end = match rest.find(KEY_END) {
                Some(at) => {
                    let after = &rest[at..];
                    at + after.find("-----\n").map_or(after.len(), |e| e + 5)
                }
                None => rest.len(),
            };
            return Some((i + end, "private key"));
        }
        return None;
    }
    if i > 0 && alnum_us(bytes[i - 1]) {
        return None;
    }
    for shape in SHAPES {
        if !rest.starts_with(shape.prefix) {
            continue;
        }
        let body_start = i + shape.prefix.len();
        let body = bytes[body_start..]
            .iter()
            .take_while(|b| (shape.body)(**b))
            .count();
        // The token ends where the alphabet ends: longer than its fixed length is not it.
        if body >= shape.min && body <= shape.max {
            return Some((body_start + body, shape.kind));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_tokens_and_keeps_prose() {
        let ghp = format!("ghp_{}", "a1B2".repeat(9));
        let text = format!("use {ghp} and AKIAIOSFODNN7EXAMPLE, then ask-me later");
        let (out, found) = redact(&text);
        assert_eq!(out, "use [redacted] and [redacted], then ask-me later");
        assert_eq!(found, vec!["GitHub token", "AWS access key"]);
        let prose = "the sk- prefix and AKIA alone, a task-list, ghp_short";
        assert_eq!(redact(prose), (prose.to_string(), vec![]));
    }

    #[test]
    fn redacts_a_private_key_block_whole() {
        let text = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----\nthanks";
        let (out, found) = redact(text);
        assert_eq!(out, "key:\n[redacted]\nthanks");
        assert_eq!(found, vec!["private key"]);
        let cut = "-----BEGIN RSA PRIVATE KEY-----\nMIIE";
        assert_eq!(redact(cut).0, "[redacted]");
        let public = "-----BEGIN PUBLIC KEY-----\nMIIB";
        assert_eq!(redact(public).0, public);
    }

    #[test]
    fn a_token_inside_a_word_is_not_one() {
        let text = format!("xAKIA{}", "B".repeat(16));
        assert_eq!(redact(&text).1.len(), 0);
        let anthropic = format!("key=sk-ant-api03-{}", "x".repeat(40));
        assert_eq!(
            redact(&anthropic),
            ("key=[redacted]".into(), vec!["Anthropic key"])
        );
        let multibyte = "é sk-é ✓";
        assert_eq!(redact(multibyte).0, multibyte);
    }
}
