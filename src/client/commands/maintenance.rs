//! Keeping the store in shape: `prune`, `gc`, `verify`, `fsck`, `rescan`.

use super::Ctx;
use crate::client::output::{human_bytes, one_line, plural, relative_time};
use crate::client::ClientError;
use crate::protocol::methods::{FsckParams, PruneParams};
use crate::protocol::results::GcReport;
use crate::protocol::rpc;

#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Keep this many in each active session (default: the configured retention, 50).
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// Only this dialog (default: every dialog).
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// Also remove the pruned objects from disk (`ckpt gc`).
    #[arg(long)]
    pub gc: bool,
    /// Only list what would be pruned.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn prune(ctx: &Ctx, args: PruneArgs) -> Result<i32, ClientError> {
    let params = PruneParams {
        project: ctx.project(),
        dialog: args.dialog,
        keep: args.keep,
        gc: args.gc,
        dry_run: args.dry_run,
    };
    let mut conn = ctx.connect()?;
    let v = ctx.with_progress(|| conn.call::<rpc::Prune>(&params))?;
    if ctx.out.json(&v) {
        return Ok(0);
    }
    let verb = if v.report.dry_run {
        "would prune"
    } else {
        "pruned"
    };
    outln!(
        "{verb} {}, kept {}",
        plural(v.report.pruned.len(), "checkpoint", "checkpoints"),
        v.report.kept
    );
    for c in &v.report.pruned_checkpoints {
        outln!(
            "  {}  {} #{} {}  {}  {}",
            c.id.short(),
            c.dialog,
            c.seq,
            c.kind,
            relative_time(&c.created_at),
            one_line(&c.label, 60)
        );
    }
    if let Some(gc) = &v.gc {
        print_gc(gc);
    }
    if let Some(b) = &v.budget {
        outln!(
            "over the disk budget ({}): pruned {} more of the oldest; store {} -> {}",
            human_bytes(b.max_store_bytes),
            b.pruned.len(),
            human_bytes(b.bytes_before),
            human_bytes(b.bytes_after)
        );
    }
    Ok(0)
}

pub fn gc(ctx: &Ctx) -> Result<i32, ClientError> {
    let params = ctx.project_params();
    let mut conn = ctx.connect()?;
    let report = ctx.with_progress(|| conn.call::<rpc::Gc>(&params))?;
    if !ctx.out.json(&report) {
        print_gc(&report);
    }
    Ok(0)
}

fn print_gc(v: &GcReport) {
    outln!(
        "gc: {} kept in one pack; removed {} and {}; {} -> {}",
        plural(v.objects, "object", "objects"),
        plural(v.loose_removed, "loose object", "loose objects"),
        plural(v.packs_removed, "pack", "packs"),
        human_bytes(v.bytes_before),
        human_bytes(v.bytes_after)
    );
}

/// Exit status 1 when the index and a full scan disagree.
pub fn verify(ctx: &Ctx) -> Result<i32, ClientError> {
    let v = ctx.connect()?.call::<rpc::Verify>(&ctx.project_params())?;
    if !ctx.out.json(&v) {
        if v.equal {
            outln!(
                "index matches a full scan (tree {}, {})",
                &v.index_tree[..12],
                v.mode
            );
        } else {
            outln!(
                "index tree {} differs from full scan {}: the next checkpoint verifies every file",
                &v.index_tree[..12],
                &v.scan_tree[..12]
            );
        }
    }
    Ok(if v.equal { 0 } else { 1 })
}

/// Exit status 1 when damage was found and not repaired.
pub fn fsck(ctx: &Ctx, repair: bool) -> Result<i32, ClientError> {
    let params = FsckParams {
        project: ctx.project(),
        repair,
    };
    let mut conn = ctx.connect()?;
    let v = ctx.with_progress(|| conn.call::<rpc::Fsck>(&params))?;
    let damaged =
        v.unreadable_count > 0 || !v.damaged_packs.is_empty() || !v.journal_damage.is_empty();
    if ctx.out.json(&v) {
        return Ok(if damaged && !repair { 1 } else { 0 });
    }
    let packs = &v.damaged_packs;
    outln!(
        "{} read; {} unreadable; {}",
        plural(v.objects, "object", "objects"),
        v.unreadable_count,
        plural(packs.len(), "damaged pack", "damaged packs")
    );
    for p in packs {
        outln!("  damaged  objects/pack/{p}.pack");
    }
    for d in &v.journal_damage {
        outln!("  damaged  journal: {d}");
    }
    if v.affected_count > 0 {
        outln!(
            "{} cannot be restored whole:",
            plural(v.affected_count, "checkpoint or ref", "checkpoints or refs")
        );
        for a in &v.affected {
            outln!(
                "  {}  {}  ({} missing)",
                &a.id[..a.id.len().min(12)],
                a.ref_name,
                plural(a.missing, "object", "objects")
            );
        }
    }
    if let Some(r) = &v.repair {
        outln!(
            "repaired: {} salvaged; {} and {} set aside in {}",
            plural(r.salvaged, "object", "objects"),
            plural(r.packs_set_aside.len(), "pack", "packs"),
            plural(r.refs_set_aside.len(), "ref", "refs"),
            r.damaged_dir.display()
        );
    } else if damaged {
        outln!("run `ckpt fsck --repair` to set the damage aside; see the README");
    }
    Ok(if damaged && !repair { 1 } else { 0 })
}

pub fn rescan(ctx: &Ctx) -> Result<i32, ClientError> {
    let r = ctx.connect()?.call::<rpc::Rescan>(&ctx.project_params())?;
    ctx.out
        .value_or(&r, "the next checkpoint verifies every file by stat");
    Ok(0)
}
