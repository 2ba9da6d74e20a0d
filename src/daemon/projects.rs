//! The daemon-wide methods: `status`, `projects`, `watch` and `unwatch` (the registry of
//! projects, saved in `projects.json`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::blocking;
use super::owner::Owner;
use super::Daemon;
use crate::engine;
use crate::engine::registry::{dangerous_root, home_dir, save_registry};
use crate::protocol::methods::{ForgetParams, NoParams, PathParams, WatchParams};
use crate::protocol::results as r;
use crate::protocol::{ErrorCode, RpcError, PROTOCOL_VERSION};

pub(super) async fn status(daemon: &Arc<Daemon>, _: NoParams) -> Result<r::Status, RpcError> {
    let listed: Vec<Arc<Owner>> = daemon.projects.read().await.values().cloned().collect();
    let infos = project_list(&listed).await?;
    let stores: Vec<PathBuf> = listed.iter().map(|p| p.store_dir.clone()).collect();
    let sizes = blocking(move || {
        stores
            .iter()
            .map(|s| crate::store::gc::dir_size(&s.join("objects")))
            .collect::<Vec<u64>>()
    })
    .await?;
    let projects = infos
        .into_iter()
        .zip(sizes)
        .zip(&listed)
        .map(|((project, store_bytes), p)| r::ProjectStatus {
            project,
            store_bytes,
            busy: p.is_busy(),
            mode: p.mode(),
            progress: p.progress.get().map(|(phase, done, total)| r::Progress {
                phase: phase.to_string(),
                done,
                total,
            }),
        })
        .collect();
    Ok(r::Status {
        daemon: format!("ckptd {}", env!("CARGO_PKG_VERSION")),
        protocol: PROTOCOL_VERSION,
        pid: std::process::id(),
        uptime_seconds: daemon.started.elapsed().as_secs(),
        socket: daemon.paths.socket.clone(),
        data_dir: daemon.paths.data_dir.clone(),
        projects,
    })
}

/// Each project's root, store and whether it is there; the checks run off the async runtime.
async fn project_list(projects: &[Arc<Owner>]) -> Result<Vec<r::ProjectInfo>, RpcError> {
    let listed: Vec<(PathBuf, PathBuf)> = projects
        .iter()
        .map(|p| (p.root.clone(), p.store_dir.clone()))
        .collect();
    blocking(move || {
        listed
            .into_iter()
            .map(|(root, store)| r::ProjectInfo {
                available: root.is_dir(),
                root,
                store,
            })
            .collect()
    })
    .await
}

pub(super) async fn projects(
    daemon: &Arc<Daemon>,
    _: NoParams,
) -> Result<Vec<r::ProjectInfo>, RpcError> {
    let listed: Vec<Arc<Owner>> = daemon.projects.read().await.values().cloned().collect();
    project_list(&listed).await
}

pub(super) async fn watch(
    daemon: &Arc<Daemon>,
    params: WatchParams,
) -> Result<r::Watched, RpcError> {
    let (root, danger) = candidate_root(daemon, &params.path).await?;
    let danger = danger.filter(|_| !params.force);
    let _registry = daemon.registry_lock.lock().await;
    let project = {
        let mut projects = daemon.projects.write().await;
        if let Some(existing) = projects.get(&root) {
            existing.clone()
        } else {
            if let Some(other) = overlapping(&projects, &root)
                .first()
                .filter(|_| !params.nest)
            {
                let how = match root.starts_with(other) {
                    true => "lies inside",
                    false => "holds",
                };
                return Err(RpcError::new(
                    ErrorCode::ProjectOverlap,
                    format!(
                        "{} {how} the watched project {}; pass --nest (`nest`) to watch it \
                         too (each keeps its own history; a file belongs to the innermost \
                         project), or unwatch the other first",
                        root.display(),
                        other.display()
                    ),
                ));
            }
            if let Some(why) = danger {
                return Err(RpcError::invalid(format!(
                    "{} is {why}: its checkpoints would copy everything there (keys, other \
                     projects, the system's files) into the store; `ckpt watch --force` (the \
                     method's `force`) makes it a project if you mean it",
                    root.display()
                )));
            }
            let project = Arc::new(Owner::new(root.clone(), &daemon.config(), &daemon.paths));
            projects.insert(root.clone(), project.clone());
            let roots: Vec<PathBuf> = projects.keys().cloned().collect();
            if let Err(e) = save_roots(daemon, roots).await {
                projects.remove(&root);
                return Err(e);
            }
            tracing::info!(root = %root.display(), "watching a new project");
            project
        }
    };
    let nested = overlapping(&*daemon.projects.read().await, &project.root);
    let dialogs = project
        .run(|_, o| Ok(o.store.dialogs(&o.store.repo())?.len()))
        .await?;
    Ok(r::Watched {
        root: project.root.clone(),
        store: project.store_dir.clone(),
        dialogs,
        nested,
    })
}

/// The folder `path` names, canonical, if it can be a project at all (a folder, not ckpt's
/// data), and why watching it is most likely a slip, if it is (see [`dangerous_root`]).
async fn candidate_root(
    daemon: &Arc<Daemon>,
    path: &Path,
) -> Result<(PathBuf, Option<&'static str>), RpcError> {
    let root = engine::project::absolute(path)?;
    let data_dir = daemon.paths.data_dir.clone();
    let (root, data_dir, danger, is_dir) = blocking(move || {
        let root = std::fs::canonicalize(&root).map_err(|e| (root, e))?;
        let data_dir = std::fs::canonicalize(&data_dir).unwrap_or(data_dir);
        let danger = dangerous_root(&root, home_dir().as_deref());
        let is_dir = root.is_dir();
        Ok((root, data_dir, danger, is_dir))
    })
    .await?
    .map_err(|(root, e): (PathBuf, std::io::Error)| {
        RpcError::invalid(format!("cannot watch {}: {e}", root.display()))
    })?;
    if !is_dir {
        return Err(RpcError::invalid(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    if root.starts_with(&data_dir) {
        return Err(RpcError::invalid("cannot watch ckpt's own data directory"));
    }
    Ok((root, danger))
}

/// The watched projects other than `root` that hold it or lie inside it.
fn overlapping(
    projects: &std::collections::BTreeMap<PathBuf, Arc<Owner>>,
    root: &Path,
) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = projects
        .keys()
        .filter(|r| r.as_path() != root && (root.starts_with(r) || r.starts_with(root)))
        .cloned()
        .collect();
    found.sort();
    found
}

pub(super) async fn unwatch(
    daemon: &Arc<Daemon>,
    params: PathParams,
) -> Result<r::Unwatched, RpcError> {
    let path = engine::project::absolute(&params.path)?;
    let path = blocking(move || std::fs::canonicalize(&path).unwrap_or(path)).await?;
    let _registry = daemon.registry_lock.lock().await;
    let mut projects = daemon.projects.write().await;
    let root = projects
        .keys()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .cloned()
        .ok_or_else(|| RpcError::not_a_project(&path))?;
    let project = projects.remove(&root).expect("found just above");
    let roots: Vec<PathBuf> = projects.keys().cloned().collect();
    if let Err(e) = save_roots(daemon, roots).await {
        projects.insert(root, project);
        return Err(e);
    }
    tracing::info!(root = %root.display(), "no longer watching");
    Ok(r::Unwatched {
        root,
        store: project.store_dir.clone(),
    })
}

/// Deletes the history of the project holding `path` (or of the unwatched project rooted
/// there): it is unwatched, its operations are stopped, and its store is removed. Nothing
/// outside the store is touched; a store that is not a real folder of the data directory's
/// `projects/` is refused.
pub(super) async fn forget(
    daemon: &Arc<Daemon>,
    params: ForgetParams,
) -> Result<r::Forgotten, RpcError> {
    let path = engine::project::absolute(&params.path)?;
    let path = blocking(move || std::fs::canonicalize(&path).unwrap_or(path)).await?;
    let _registry = daemon.registry_lock.lock().await;
    let watched = {
        let projects = daemon.projects.read().await;
        projects
            .keys()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .cloned()
    };
    let root = watched.clone().unwrap_or_else(|| path.clone());
    let store = daemon.paths.store_dir(&root);
    let stores = daemon.paths.data_dir.join("projects");
    let (exists, store_bytes) = {
        let (store, stores) = (store.clone(), stores.clone());
        blocking(move || {
            let real = std::fs::symlink_metadata(&store).is_ok_and(|m| m.is_dir())
                && store.parent() == Some(stores.as_path());
            (real, crate::store::gc::dir_size(&store))
        })
        .await?
    };
    if watched.is_none() && !exists {
        return Err(RpcError::not_a_project(&path));
    }
    if !params.dry_run {
        if let Some(root) = &watched {
            let project = daemon.projects.write().await.remove(root);
            let roots: Vec<PathBuf> = daemon.projects.read().await.keys().cloned().collect();
            if let Err(e) = save_roots(daemon, roots).await {
                if let Some(project) = project {
                    daemon.projects.write().await.insert(root.clone(), project);
                }
                return Err(e);
            }
            if let Some(project) = project {
                project.forget().await;
            }
        }
        if exists {
            let doomed = store.clone();
            blocking(move || std::fs::remove_dir_all(&doomed))
                .await?
                .map_err(|e| {
                    RpcError::new(
                        ErrorCode::IoError,
                        format!("cannot delete {}: {e}", store.display()),
                    )
                })?;
        }
        tracing::warn!(root = %root.display(), store = %store.display(), "forgot a project: its store was deleted");
    }
    Ok(r::Forgotten {
        root,
        store,
        store_bytes,
        was_watched: watched.is_some(),
        dry_run: params.dry_run,
    })
}

async fn save_roots(daemon: &Arc<Daemon>, roots: Vec<PathBuf>) -> Result<(), RpcError> {
    let file = daemon.paths.registry_file();
    blocking(move || save_registry(&file, &roots))
        .await?
        .map_err(|e| {
            RpcError::new(
                ErrorCode::IoError,
                format!("cannot save the project registry: {e}"),
            )
        })
}
