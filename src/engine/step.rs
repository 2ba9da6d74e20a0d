//! `step`: an agent's after-tool or turn-end hook, recorded as a point of the dialog's running
//! turn (see [`super::turns`]).

use gix::bstr::ByteSlice;

use super::record::record;
use super::{Error, Opened, Project, Result};
use crate::model::Kind;
use crate::protocol::events::EventKind;
use crate::protocol::turns::{StepParams, Stepped};
use crate::store::checkpoint::validate_dialog;
use crate::store::span::TurnPoint;
use crate::store::NewCheckpoint;

/// Longest tool name and tool-use id kept with a step.
const MAX_NAME: usize = 200;
/// Most paths kept of one tool call.
const MAX_PATHS: usize = 1_000;

/// `step`: an agent's after-tool hook (a step of the dialog's running turn, recorded when a
/// file changed or the tool is a point to come back to) or turn-end hook (the turn's end,
/// always recorded).
pub fn step(p: &Project, o: &mut Opened, params: StepParams) -> Result<Stepped> {
    validate_dialog(&params.dialog)?;
    let name = |what: &str, s: &Option<String>| match s {
        Some(s) if s.len() > MAX_NAME || s.contains('\n') => Err(Error::invalid(format!(
            "{what} must be one line of at most {MAX_NAME} bytes"
        ))),
        _ => Ok(()),
    };
    name("tool", &params.tool)?;
    name("tool_use_id", &params.tool_use_id)?;
    if params.paths.len() > MAX_PATHS {
        return Err(Error::invalid(format!(
            "a step names at most {MAX_PATHS} paths"
        )));
    }
    // A path outside the project is no change of it: dropped, not refused (a tool may write
    // anywhere).
    let paths: Vec<String> = params
        .paths
        .iter()
        .filter_map(|path| p.tree_paths(std::slice::from_ref(path)).ok())
        .flatten()
        .filter(|rel| !rel.is_empty())
        .map(|rel| rel.to_str_lossy().into_owned())
        .collect();
    o.turns.load(&o.store)?;
    let now = jiff::Timestamp::now();
    let Some(turn) = o.turns.of(&params.dialog, now).cloned() else {
        // No prompt of this dialog was recorded (the prompt hook is missing or failed): its
        // changes are left to the next checkpoint's span.
        return Ok(Stepped {
            recorded: None,
            turn: None,
        });
    };
    let tree = o.tree_to_record(p)?;
    let unchanged = o.turns.previous.is_some_and(|(_, t, _)| t == tree);
    if unchanged && !params.end && !params.point {
        // Nothing to come back to: nothing written.
        return Ok(Stepped {
            recorded: None,
            turn: Some(turn.prompt),
        });
    }
    let seq = (!params.end).then_some(turn.steps + 1);
    let label = match (&params.tool, params.end) {
        (_, true) => "turn ended".to_string(),
        (Some(tool), false) if paths.is_empty() => tool.clone(),
        (Some(tool), false) => format!("{tool} {}", paths.join(" ")),
        (None, false) => "tool call".to_string(),
    };
    let kind = if params.end {
        Kind::TurnEnd
    } else {
        Kind::Step
    };
    let new = NewCheckpoint {
        point: Some(TurnPoint {
            turn: turn.prompt,
            seq,
            tool: params.tool,
            paths,
            declared: params.declared,
            tool_use_id: params.tool_use_id,
        }),
        ..NewCheckpoint::new(params.dialog.clone(), kind, label)
    };
    let c = record(p, o, tree, new)?;
    o.save_index(false);
    p.events.emit(match seq {
        Some(step) => EventKind::Step {
            id: c.id,
            dialog: c.dialog.clone(),
            turn: turn.prompt,
            step,
            tool: c.point.as_ref().and_then(|t| t.tool.clone()),
        },
        None => EventKind::TurnEnded {
            id: c.id,
            dialog: c.dialog.clone(),
            turn: turn.prompt,
        },
    });
    Ok(Stepped {
        recorded: Some(c.into()),
        turn: Some(turn.prompt),
    })
}
