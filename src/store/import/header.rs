//! A git bundle's header (v2, or v3 with the sha1 object format): the commits it builds on and
//! its refs, read up to the blank line before its pack; and what can go wrong importing one.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::store::error::StoreError;

/// Longest header accepted (git writes a line per ref; this allows ~100,000 refs).
const MAX_HEADER_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a git bundle: {reason}")]
    NotABundle { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Unsupported { path: PathBuf, reason: String },
    #[error("the bundle's pack cannot be read: {0}")]
    Pack(String),
    #[error(
        "the bundle builds on {} commit(s) this store does not have ({}); import the bundle it \
         builds on first: {message}", missing.len(), short_list(missing)
    )]
    MissingPrerequisites {
        missing: Vec<ObjectId>,
        message: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub(crate) fn short_list(ids: &[ObjectId]) -> String {
    let mut out: Vec<String> = ids.iter().take(3).map(|id| id.to_string()).collect();
    if ids.len() > 3 {
        out.push(format!("and {} more", ids.len() - 3));
    }
    out.join(", ")
}

/// The header of a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleHeader {
    /// Commits the bundle builds on but does not contain.
    pub prerequisites: Vec<ObjectId>,
    /// The bundle's refs, in file order.
    pub refs: Vec<(ObjectId, String)>,
}

/// Reads a bundle header (v2, or v3 with the sha1 object format) up to the blank line, leaving
/// `r` at the start of the pack.
// A line parser of git's bundle header format, one case per line kind: kept in one piece.
pub fn read_header(r: &mut impl BufRead, path: &Path) -> Result<BundleHeader, ImportError> {
    let not_bundle = |reason: String| ImportError::NotABundle {
        path: path.to_path_buf(),
        reason,
    };
    let mut header = BundleHeader::default();
    let mut line = Vec::new();
    let mut total = 0usize;
    let mut first = true;
    loop {
        line.clear();
        let n = std::io::Read::take(&mut *r, (MAX_HEADER_BYTES - total + 1) as u64)
            .read_until(b'\n', &mut line)
            .map_err(|source| ImportError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        total += n;
        if total > MAX_HEADER_BYTES {
            return Err(not_bundle(format!(
                "its header is longer than {MAX_HEADER_BYTES} bytes"
            )));
        }
        if n == 0 || line.last() != Some(&b'\n') {
            return Err(not_bundle(match (first, n) {
                (true, 0) => "the file is empty".into(),
                (true, _) => "it does not start with `# v2 git bundle`".into(),
                (false, _) => "the header ends before the pack starts".into(),
            }));
        }
        line.pop();
        let text =
            std::str::from_utf8(&line).map_err(|_| not_bundle("its header is not text".into()))?;
        if first {
            first = false;
            match text {
                "# v2 git bundle" | "# v3 git bundle" => continue,
                _ => {
                    return Err(not_bundle(
                        "it does not start with `# v2 git bundle`".into(),
                    ))
                }
            }
        }
        if text.is_empty() {
            return Ok(header);
        }
        if let Some(capability) = text.strip_prefix('@') {
            match capability.split_once('=') {
                Some(("object-format", "sha1")) => {}
                Some(("object-format", other)) => {
                    return Err(ImportError::Unsupported {
                        path: path.to_path_buf(),
                        reason: format!(
                            "object format {other} is not supported; ckpt stores use sha1"
                        ),
                    })
                }
                // `filter` means a partial pack: objects would be missing.
                _ => {
                    return Err(ImportError::Unsupported {
                        path: path.to_path_buf(),
                        reason: format!("bundle capability `{capability}` is not supported"),
                    })
                }
            }
            continue;
        }
        let (prerequisite, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (hex, name) = rest.split_once(' ').unwrap_or((rest, ""));
        let id = ObjectId::from_hex(hex.as_bytes())
            .map_err(|_| not_bundle(format!("bad header line `{}`", truncate(text))))?;
        if prerequisite {
            header.prerequisites.push(id);
        } else if name.is_empty() {
            return Err(not_bundle(format!(
                "ref line `{}` names no ref",
                truncate(text)
            )));
        } else {
            header.refs.push((id, name.to_string()));
        }
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(100).collect()
}
