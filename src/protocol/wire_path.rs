//! Paths in requests: a JSON string when the path is UTF-8, else `{"path_bytes": [..]}` with
//! its exact bytes, so a file whose name is not UTF-8 can be named (and is never mangled into
//! another name). Both forms are accepted wherever a path is.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Wire<'a> {
    Text(std::borrow::Cow<'a, str>),
    Bytes { path_bytes: Vec<u8> },
}

fn to_wire(path: &Path) -> Wire<'_> {
    match path.to_str() {
        Some(text) => Wire::Text(text.into()),
        None => Wire::Bytes {
            path_bytes: path.as_os_str().as_bytes().to_vec(),
        },
    }
}

fn from_wire(wire: Wire<'_>) -> PathBuf {
    match wire {
        Wire::Text(text) => PathBuf::from(text.into_owned()),
        Wire::Bytes { path_bytes } => PathBuf::from(OsString::from_vec(path_bytes)),
    }
}

pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    to_wire(path).serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    Wire::deserialize(d).map(from_wire)
}

/// The same for a list of paths.
pub mod list {
    use super::*;

    pub fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        let wire: Vec<Wire<'_>> = paths.iter().map(|p| to_wire(p)).collect();
        wire.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        let wire = Vec::<Wire<'_>>::deserialize(d)?;
        Ok(wire.into_iter().map(from_wire).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct P {
        #[serde(with = "super")]
        path: PathBuf,
        #[serde(with = "super::list", default)]
        paths: Vec<PathBuf>,
    }

    #[test]
    fn paths_cross_the_wire_exactly() {
        let odd = PathBuf::from(OsString::from_vec(b"/p/caf\xe9.txt".to_vec()));
        let p = P {
            path: odd.clone(),
            paths: vec![PathBuf::from("/p/a"), odd],
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(
            json.contains(r#""path":{"path_bytes":[47,112,47,99,97,102,233"#),
            "{json}"
        );
        assert!(json.contains(r#""/p/a""#), "{json}");
        assert_eq!(serde_json::from_str::<P>(&json).unwrap(), p);
        let plain: P = serde_json::from_str(r#"{"path":"/x"}"#).unwrap();
        assert_eq!(plain.path, PathBuf::from("/x"));
        assert!(serde_json::from_str::<P>(r#"{"path":7}"#).is_err());
    }
}
