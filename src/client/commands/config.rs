//! `ckpt config check [FILE]`: validate a configuration file and show what it sets.

use std::path::PathBuf;

use serde_json::json;

use super::Ctx;
use crate::client::ClientError;
use crate::config::{Config, Paths, BUILT_IN_EXCLUSIONS};

pub fn check(ctx: &Ctx, file: Option<PathBuf>) -> Result<i32, ClientError> {
    let shown = match &file {
        Some(f) => f.clone(),
        None => Paths::default_config_file().map_err(|e| ClientError::Config(e.to_string()))?,
    };
    if file.is_none() && std::fs::symlink_metadata(&shown).is_err() {
        return Err(ClientError::Config(format!(
            "no configuration file at {}: nothing to check (every key has its default; \
             packaging/config.example.toml shows them all)",
            shown.display()
        )));
    }
    let config = Config::load(file.as_deref()).map_err(|e| ClientError::Config(e.to_string()))?;
    let paths = Paths::resolve(&config, None).map_err(|e| ClientError::Config(e.to_string()))?;
    let mut excluded: Vec<String> = BUILT_IN_EXCLUSIONS
        .iter()
        .filter(|p| !config.exclusions.remove.iter().any(|r| r == *p))
        .map(|p| p.to_string())
        .collect();
    excluded.extend(config.exclusions.add.iter().cloned());
    let retention = config.retention_for(std::path::Path::new("/"));
    let interval = |i: Option<std::time::Duration>| i.map(|d| format!("{}s", d.as_secs()));
    let projects: serde_json::Map<String, serde_json::Value> = config
        .projects
        .keys()
        .map(|root| {
            let r = config.retention_for(root);
            let value = json!({
                "keep": r.keep, "auto_keep": r.auto_keep,
                "max_store_bytes": config.max_store_bytes_for(root),
                "auto_checkpoint": interval(config.auto_checkpoint_for(root)),
            });
            (root.display().to_string(), value)
        })
        .collect();
    let effective = json!({
        "file": shown,
        "socket": paths.socket,
        "data_dir": paths.data_dir,
        "log_level": config.log_level.as_deref().unwrap_or("info"),
        "max_file_size": config.max_file_size(),
        "max_request_bytes": config.max_request_bytes(),
        "warm_up": config.warm_up(),
        "excluded": excluded,
        "allowed": config.exclusions.allow,
        "keep": retention.keep,
        "auto_keep": retention.auto_keep,
        "max_store_bytes": config.retention.max_store_bytes.map(|b| b.0),
        "auto_checkpoint": interval(config.auto_checkpoint.and_then(|i| i.0)),
        "push_as": super::share::who(config.push_as.clone()),
        "push_metadata": config.push_metadata.unwrap_or(false),
        "auto_push": config.auto_push.unwrap_or(false),
        "projects": projects,
    });
    if ctx.out.json(&effective) {
        return Ok(0);
    }
    outln!("{} is valid; in effect:", shown.display());
    for (key, value) in effective.as_object().expect("an object") {
        if key != "file" {
            outln!("  {key:<18} {value}");
        }
    }
    Ok(0)
}
