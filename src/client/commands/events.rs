//! `ckpt events`: the project's events, one JSON object a line, until interrupted.

use std::io::Write;

use super::Ctx;
use crate::client::ClientError;
use crate::protocol::events::EventKind;
use crate::protocol::methods::SubscribeParams;
use crate::protocol::rpc;

pub fn run(ctx: &Ctx, diffs: bool) -> Result<i32, ClientError> {
    let mut conn = ctx.connect()?;
    let params = SubscribeParams {
        project: ctx.project(),
        diffs,
    };
    conn.call::<rpc::Subscribe>(&params)?;
    let mut stdout = std::io::stdout().lock();
    while let Some(event) = conn.next_notification()? {
        let line = serde_json::to_string(&event).expect("values serialise");
        if writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return Ok(0); // The reader went away (e.g. `| head`).
        }
        // The stream's last event when this subscriber fell behind; kinds this client does
        // not know are printed like the others.
        let decoded = serde_json::from_value::<EventKind>(event);
        if matches!(decoded, Ok(EventKind::Error { .. })) {
            return Ok(1);
        }
    }
    Ok(0)
}
