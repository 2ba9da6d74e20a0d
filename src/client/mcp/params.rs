//! The parameters of each MCP tool, as types: `tools/list` shows the JSON schema generated
//! from them ([`schema`]) and `tools/call` decodes its arguments into them ([`decode`]), so the
//! schema an agent is shown and what the server reads can never drift apart. Absent fields take
//! the defaults the tools document; unknown ones are ignored.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The most bytes of text (a diff, a file) a result holds at most.
pub const MAX_BYTES: u64 = 100_000;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListCheckpoints {
    /// At most this many (default 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u64>,
    pub cursor: Option<String>,
    /// Only the user's prompts.
    pub prompts_only: Option<bool>,
    /// Only this dialog (agent session).
    pub dialog: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowCheckpoint {
    /// A checkpoint: an id or unique prefix, a tag, `@` (the newest), `@~N`, `#SEQ`.
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Diff {
    /// A checkpoint: an id or unique prefix, a tag, `@` (the newest), `@~N`, `#SEQ`.
    pub from: Option<String>,
    /// A checkpoint: an id or unique prefix, a tag, `@` (the newest), `@~N`, `#SEQ`.
    pub to: Option<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    #[schemars(range(min = 0))]
    pub offset: Option<u64>,
    #[schemars(range(min = 1, max = 100_000))]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Blame {
    /// Relative to the project's root.
    pub path: String,
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FileAt {
    /// A checkpoint: an id or unique prefix, a tag, `@` (the newest), `@~N`, `#SEQ`.
    pub id: String,
    /// Relative to the project's root.
    pub path: String,
    #[schemars(range(min = 0))]
    pub offset: Option<u64>,
    #[schemars(range(min = 1, max = 100_000))]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Restore {
    /// A checkpoint: an id or unique prefix, a tag, `@` (the newest), `@~N`, `#SEQ`.
    pub id: String,
    #[serde(default)]
    pub paths: Vec<String>,
    pub confirm: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Revert {
    /// A prompt's checkpoint (its whole turn) or a step (what its turn did after it): an id
    /// or unique prefix, a tag, `@~N`, `#SEQ`.
    pub id: String,
    /// Only these paths (relative to the project's root).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Also take back changes another turn running at the same time may have made.
    pub force: Option<bool>,
    pub confirm: Option<bool>,
}

/// The input schema of a tool taking `T`: an object schema, as MCP wants it, kept to the
/// keywords every agent's model API takes (no `$schema`, `title` or integer `format`, and an
/// optional field typed as itself rather than "or null": an absent field is the default).
pub fn schema<T: JsonSchema>() -> Map<String, Value> {
    let mut schema = schemars::schema_for!(T).to_value();
    tidy(&mut schema);
    match schema {
        Value::Object(mut map) => {
            map.remove("$schema");
            map.remove("title");
            map.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            map
        }
        _ => Map::new(),
    }
}

fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("format");
            if let Some(Value::Array(types)) = map.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if kept.len() == 1 {
                    map.insert("type".into(), kept[0].clone());
                }
            }
            for v in map.values_mut() {
                tidy(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// The arguments of a call of `tool`, as its parameters; why not, in words an agent can act on.
pub fn decode<T: DeserializeOwned>(tool: &str, args: &Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args.clone()))
        .map_err(|e| format!("the arguments of `{tool}` do not fit its schema: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_are_plain_objects_with_their_constraints() {
        let s = Value::Object(schema::<ListCheckpoints>());
        assert_eq!(s["type"], "object", "{s}");
        assert_eq!(s["properties"]["limit"]["type"], "integer", "{s}");
        assert_eq!(s["properties"]["limit"]["maximum"], 100, "{s}");
        assert!(
            s.get("$schema").is_none() && s.get("title").is_none(),
            "{s}"
        );
        assert!(!s.to_string().contains("\"format\""), "{s}");
        let s = Value::Object(schema::<FileAt>());
        assert_eq!(s["required"], json!(["id", "path"]), "{s}");
        assert!(s["properties"]["id"]["description"]
            .as_str()
            .unwrap()
            .contains("`@~N`"));
    }

    #[test]
    fn arguments_that_do_not_fit_say_so() {
        let args = json!({"id": 7}).as_object().unwrap().clone();
        let err = decode::<ShowCheckpoint>("show_checkpoint", &args).unwrap_err();
        assert!(
            err.contains("show_checkpoint") && err.contains("string"),
            "{err}"
        );
        let args = json!({"path": "a.rs", "extra": 1})
            .as_object()
            .unwrap()
            .clone();
        let b: Blame = decode("blame", &args).unwrap();
        assert_eq!((b.path.as_str(), b.offset), ("a.rs", None));
    }
}
