//! The syntaxes of the configuration's values: sizes (`"50MiB"`) and intervals (`"30s"`,
//! `"off"`). A leaf.

use serde::Deserialize;

/// A duration written as `"500ms"`, `"30s"`, `"5m"`, `"1h"`, or `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Option<std::time::Duration>);

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_interval(&text)
            .map(Interval)
            .map_err(serde::de::Error::custom)
    }
}

/// Parses `"off"`, `"500ms"`, `"30s"`, `"5m"`, `"1h"`; at least one second.
pub fn parse_interval(text: &str) -> Result<Option<std::time::Duration>, String> {
    let t = text.trim();
    if t == "off" {
        return Ok(None);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not an interval (examples: \"30s\", \"5m\", \"off\")"))?;
    let ms = match unit.trim() {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use ms, s, m or h)"
            ))
        }
    }
    .ok_or_else(|| format!("interval `{text}` is too long"))?;
    if ms < 1000 {
        return Err(format!("interval `{text}` is shorter than one second"));
    }
    Ok(Some(std::time::Duration::from_millis(ms)))
}

/// A size in bytes, written as an integer or as a string with a unit (`"50MiB"`, `"2 GB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Text(s) => parse_byte_size(&s)
                .map(ByteSize)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Parses `"123"`, `"10KiB"`, `"50 MiB"`, `"1GB"` (k/M/G are powers of 1024 either way).
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 1048576, \"50MiB\")"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit `{other}` in `{text}`")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size `{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_byte_size("1024").unwrap(), 1024);
        assert_eq!(parse_byte_size("50MiB").unwrap(), 50 << 20);
        assert_eq!(parse_byte_size("2 gb").unwrap(), 2 << 30);
        assert!(parse_byte_size("12 parsecs").is_err());
        assert!(parse_byte_size("MiB").is_err());
    }
}
