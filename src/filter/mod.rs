//! What belongs in a checkpoint: the built-in exclusions plus every ignore source git honours
//! (nested `.gitignore` files, `.git/info/exclude`, the global excludes file), whether or not the
//! project is a git repository, and the walk that lists the project under those rules.
//!
//! A nested repository is an ordinary folder judged by its own rules, as git would judge it
//! inside that repository: the enclosing project's `.gitignore` files stop at its root. Entries
//! named `.git` are always excluded, whatever the configuration says.

mod listing;
mod names;
mod project;
mod rules;
mod walk;

pub use listing::{WalkEntry, WalkResult, WalkSkip};
pub use names::{is_litter, rel_to_abs, TEMP_PREFIX};
pub(crate) use names::{join_rel, split_parent};
pub use project::{Filter, FilterError};
pub use rules::{git_common_dir, IgnoreRules, RulesCache};
pub use walk::Listed;
