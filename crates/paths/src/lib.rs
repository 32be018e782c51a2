//! Where xrunbench's files are on this machine, in one place for the
//! product and its tests: the checkout a binary was built in, cargo's
//! target directory, and the cache that every checkout and the installed
//! binary share.

use std::path::{Path, PathBuf};

/// The workspace root of the checkout this was built in (this crate's
/// manifest lives two levels below it, in `crates/paths`). An installed
/// binary's checkout may since have moved on or gone: see
/// [`built_in_place`].
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/paths lives inside the workspace")
        .to_path_buf()
}

/// Cargo's target directory (honours CARGO_TARGET_DIR).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Whether the running program is one cargo built in its checkout
/// (`cargo xtask`, `cargo run`, a test): its executable lies in that
/// checkout's target directory. An installed one (`cargo install`) does
/// not, and must not build from a checkout that may have moved on.
pub fn built_in_place() -> bool {
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let under = |dir: PathBuf| dir.canonicalize().is_ok_and(|d| exe.starts_with(d));
    under(target_dir()) || under(workspace_root().join("target"))
}

/// The cache of what xrunbench fetches and makes once (kernels, kernel
/// trees, sysroots, LAVA): `$XRUNBENCH_CACHE` when set (as `CARGO_HOME`
/// moves cargo's), else `$XDG_CACHE_HOME/xrunbench`, by default
/// `~/.cache/xrunbench`, as the XDG base directories say.
pub fn cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    cache_dir_from(var(CACHE_VAR), var("XDG_CACHE_HOME"), var("HOME"))
}

/// The variable that puts the cache somewhere of its own.
pub const CACHE_VAR: &str = "XRUNBENCH_CACHE";

/// [`cache_dir`] from the three variables: a relative one is ignored (the
/// XDG specification asks so of its own); with no home either, the
/// machine's temporary directory.
fn cache_dir_from(
    own: Option<PathBuf>,
    xdg_cache_home: Option<PathBuf>,
    home: Option<PathBuf>,
) -> PathBuf {
    if let Some(own) = own.filter(|p| p.is_absolute()) {
        return own;
    }
    let base = xdg_cache_home
        .filter(|p| p.is_absolute())
        .or_else(|| home.filter(|h| h.is_absolute()).map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("xrunbench")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_follows_its_own_variable_then_xdg_then_home() {
        let at = |x: Option<&str>, h: Option<&str>| {
            cache_dir_from(None, x.map(PathBuf::from), h.map(PathBuf::from))
        };
        assert_eq!(
            at(Some("/x/cache"), Some("/home/u")),
            Path::new("/x/cache/xrunbench")
        );
        assert_eq!(
            at(Some("rel"), Some("/home/u")),
            Path::new("/home/u/.cache/xrunbench")
        );
        assert_eq!(at(None, Some("/root")), Path::new("/root/.cache/xrunbench"));
        assert_eq!(at(None, None), std::env::temp_dir().join("xrunbench"));
        let own = |o: &str| cache_dir_from(Some(o.into()), Some("/x".into()), Some("/h".into()));
        assert_eq!(own("/c/own"), Path::new("/c/own"));
        assert_eq!(own("rel"), Path::new("/x/xrunbench"));
    }

    #[test]
    fn a_test_binary_is_built_in_place() {
        assert!(built_in_place());
    }
}
