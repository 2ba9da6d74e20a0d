//! `ckpt export` (a git bundle, or one checkpoint's patch) and `ckpt import`.

use std::path::PathBuf;

use super::{file_path, Ctx};
use crate::client::output::{one_line, plural, short};
use crate::client::ClientError;
use crate::protocol::methods::{ExportBundleParams, ExportPatchParams, ImportBundleParams};
use crate::protocol::rpc;

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("format").required(true).args(["patch", "bundle"]))]
pub struct ExportArgs {
    /// The checkpoints (any name: id, tag, `@`…).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// Print one checkpoint's changes as a patch (`git apply` takes it).
    #[arg(long)]
    pub patch: bool,
    /// Write a git bundle to FILE (`ckpt import` or `git fetch` read it).
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// With --patch: against this checkpoint instead of the parent.
    #[arg(long, value_name = "ID2")]
    pub against: Option<String>,
    /// With --bundle: replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn export(ctx: &Ctx, args: ExportArgs) -> Result<i32, ClientError> {
    if let Some(file) = args.bundle {
        let params = ExportBundleParams {
            project: ctx.project(),
            ids: args.ids,
            path: file_path(&ctx.base, &file),
            force: args.force,
        };
        let b = ctx.connect()?.call::<rpc::ExportBundle>(&params)?;
        let text = format!(
            "wrote {} ({})",
            b.path.display(),
            plural(b.objects, "object", "objects")
        );
        ctx.out.value_or(&b, &text);
        return Ok(0);
    }
    let [id] = <[String; 1]>::try_from(args.ids)
        .map_err(|_| ClientError::Usage("--patch exports one checkpoint".into()))?;
    debug_assert!(args.patch);
    let params = ExportPatchParams {
        project: ctx.project(),
        id,
        against: args.against,
    };
    let p = ctx.connect()?.call::<rpc::ExportPatch>(&params)?;
    if !ctx.out.json(&p) {
        out!("{}", p.patch);
    }
    Ok(0)
}

pub fn import(ctx: &Ctx, bundle: PathBuf, dialog: Option<String>) -> Result<i32, ClientError> {
    let params = ImportBundleParams {
        project: ctx.project(),
        path: file_path(&ctx.base, &bundle),
        dialog,
    };
    let v = ctx.connect()?.call::<rpc::ImportBundle>(&params)?;
    if ctx.out.json(&v) {
        return Ok(0);
    }
    match v.imported.len() {
        0 => outln!("imported no checkpoints from {}", v.path.display()),
        count => outln!(
            "imported {count} checkpoint{} into dialog {} from {} ({} objects)",
            if count == 1 { "" } else { "s" },
            v.dialog.as_deref().unwrap_or(""),
            v.path.display(),
            v.objects
        ),
    }
    for c in &v.imported {
        let from = c.imported.as_ref().map_or("", |i| i.from.as_str());
        outln!(
            "  {}  from {}  {}",
            c.id.short(),
            short(from),
            one_line(&c.label, 60)
        );
    }
    for left in &v.not_imported {
        outln!(
            "  not imported: {} ({}): {}",
            short(&left.from),
            left.ref_name,
            left.reason
        );
    }
    Ok(0)
}
