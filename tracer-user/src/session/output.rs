//! Files the tracer writes hold command lines, environments, paths and host names: they
//! are made readable by their owner only (0600) and, under sudo or `--user`, given to
//! the user the command ran as rather than left to root.

use std::fs::{File, OpenOptions, Permissions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::RunAs;

/// Mode of every file the tracer writes.
pub const PRIVATE_MODE: u32 = 0o600;

/// Creates (or truncates) `path` with mode 0600, owned by `owner` when given.
pub fn create_private(path: &Path, owner: Option<&RunAs>) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_MODE)
        .open(path)?;
    make_private(path, owner)?;
    Ok(file)
}

/// Writes `bytes` to `path` as [`create_private`] creates it.
pub fn write_private(path: &Path, bytes: &[u8], owner: Option<&RunAs>) -> std::io::Result<()> {
    std::io::Write::write_all(&mut create_private(path, owner)?, bytes)
}

/// Makes what was written to `file` durable, if it is a regular file: a device or a pipe
/// (`-o /dev/null`) has nothing to sync, and `fsync` fails on one (EINVAL).
pub fn sync_if_regular(file: &File) -> std::io::Result<()> {
    if file.metadata()?.is_file() {
        file.sync_all()?;
    }
    Ok(())
}

/// Removes an output that could not be written whole, so that no tool misreads a partial
/// one; only a regular file: `-o /dev/null` or a pipe stays what it was.
pub fn remove_partial(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        let _ = std::fs::remove_file(path);
    }
}

/// Mode 0600 for the file at `path` (it may have existed with another mode), owned by
/// `owner` when given. A special file (/dev/stdout, a pipe) is left as it is.
pub fn make_private(path: &Path, owner: Option<&RunAs>) -> std::io::Result<()> {
    if !std::fs::metadata(path)?.is_file() {
        return Ok(());
    }
    std::fs::set_permissions(path, Permissions::from_mode(PRIVATE_MODE))?;
    if let Some(owner) = owner.filter(|o| !o.is_root()) {
        owner.chown(path)?;
    }
    Ok(())
}

/// Mode of the directories the tracer writes (an OTF2 archive and its subdirectories).
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// [`make_private`] for every file under `dir`, and mode 0700 (and `owner`) for `dir` and
/// the directories in it: for outputs another library writes (an OTF2 archive).
pub fn make_tree_private(dir: &Path, owner: Option<&RunAs>) -> std::io::Result<()> {
    std::fs::set_permissions(dir, Permissions::from_mode(PRIVATE_DIR_MODE))?;
    if let Some(owner) = owner.filter(|o| !o.is_root()) {
        owner.chown(dir)?;
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if std::fs::symlink_metadata(&path)?.is_dir() {
            make_tree_private(&path, owner)?;
        } else {
            make_private(&path, owner)?;
        }
    }
    Ok(())
}

/// The user output files go to when the command names none: the one who ran sudo.
pub fn invoking_user() -> Option<RunAs> {
    RunAs::resolve(None).ok().flatten()
}
