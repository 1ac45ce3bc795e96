//! Whom a launched command runs as. Under sudo the tracer is root, but the command is
//! the invoking user's: it runs as that user (supplementary groups, group, user, HOME,
//! USER and LOGNAME), unless `--user` names another (`--user root` keeps root). The
//! tracer itself keeps its privileges; the files it writes go to that user too.

use std::ffi::{CStr, CString, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RunAsError {
    #[error("no such user: {0}")]
    NoSuchUser(String),
    #[error("SUDO_UID is {0}, which is no user of this system (give --user USER, or --user root to stay root)")]
    NoSudoUser(String),
    #[error("--user {0}: only root can run a command as another user")]
    NotRoot(String),
}

/// A user to become: ids, supplementary groups, and what HOME, USER and LOGNAME say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

impl RunAs {
    /// The user a command launched now runs as: `user` if given (a name or a numeric
    /// id), else the user who ran sudo when we are root under sudo; None to leave the
    /// command as we are.
    pub fn resolve(user: Option<&str>) -> Result<Option<RunAs>, RunAsError> {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if let Some(user) = user {
            let found = lookup_name(user)
                .or_else(|| user.parse().ok().and_then(lookup_uid))
                .ok_or_else(|| RunAsError::NoSuchUser(user.to_string()))?;
            if euid != 0 && found.uid != euid {
                return Err(RunAsError::NotRoot(user.to_string()));
            }
            return Ok((euid == 0).then_some(found));
        }
        if euid != 0 {
            return Ok(None);
        }
        Self::from_sudo(
            std::env::var("SUDO_UID").ok().as_deref(),
            std::env::var("SUDO_USER").ok().as_deref(),
        )
    }

    /// The user sudo says ran it (SUDO_UID, SUDO_USER), when that is not root.
    fn from_sudo(uid: Option<&str>, name: Option<&str>) -> Result<Option<RunAs>, RunAsError> {
        let Some(uid_text) = uid.filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        let Ok(uid) = uid_text.trim().parse::<u32>() else {
            return Err(RunAsError::NoSudoUser(uid_text.to_string()));
        };
        if uid == 0 {
            return Ok(None);
        }
        // The id is what sudo vouches for; the name only picks among users sharing it.
        let by_name = name.and_then(lookup_name).filter(|u| u.uid == uid);
        by_name
            .or_else(|| lookup_uid(uid))
            .map(Some)
            .ok_or_else(|| RunAsError::NoSudoUser(uid_text.to_string()))
    }

    /// Whether this is root (running as root changes nothing).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// HOME, USER and LOGNAME as the user's login would set them.
    pub fn env(&self) -> [(&'static str, OsString); 3] {
        [
            ("HOME", self.home.clone().into_os_string()),
            ("USER", self.name.clone().into()),
            ("LOGNAME", self.name.clone().into()),
        ]
    }

    /// The environment for the command: ours, with HOME, USER and LOGNAME the user's.
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        let own = self.env();
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !own.iter().any(|(o, _)| k == o))
            .collect();
        vars.extend(own.into_iter().map(|(k, v)| (k.into(), v)));
        vars
    }

    /// Becomes the user: supplementary groups, group, then user (after which the first
    /// two could no longer change). Only async-signal-safe calls: for a forked child.
    ///
    /// # Safety
    /// Changes the credentials of the whole process; call it in a child before exec.
    pub unsafe fn become_user(&self) -> std::io::Result<()> {
        // SAFETY: setgroups reads `groups.len()` ids from a live slice.
        let failed = unsafe {
            libc::setgroups(self.groups.len(), self.groups.as_ptr()) != 0
                || libc::setgid(self.gid) != 0
                || libc::setuid(self.uid) != 0
        };
        if failed {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes `cmd` run as the user, with the user's HOME, USER and LOGNAME.
    pub fn apply(&self, cmd: &mut std::process::Command) {
        cmd.envs(self.env());
        let me = self.clone();
        // SAFETY: the closure only makes the async-signal-safe calls of become_user.
        unsafe {
            cmd.pre_exec(move || me.become_user());
        }
    }

    /// Gives `path` to the user (its group too).
    pub fn chown(&self, path: &Path) -> std::io::Result<()> {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
    }
}

fn lookup_name(name: &str) -> Option<RunAs> {
    let c = CString::new(name).ok()?;
    lookup(|pw, buf, res| {
        // SAFETY: getpwnam_r writes into the entry and buffer it is given.
        unsafe { libc::getpwnam_r(c.as_ptr(), pw, buf.as_mut_ptr(), buf.len(), res) }
    })
}

fn lookup_uid(uid: u32) -> Option<RunAs> {
    lookup(|pw, buf, res| {
        // SAFETY: getpwuid_r writes into the entry and buffer it is given.
        unsafe { libc::getpwuid_r(uid, pw, buf.as_mut_ptr(), buf.len(), res) }
    })
}

/// A password entry by `get` (getpwnam_r or getpwuid_r), with the user's groups.
fn lookup(
    get: impl Fn(&mut libc::passwd, &mut [libc::c_char], &mut *mut libc::passwd) -> libc::c_int,
) -> Option<RunAs> {
    let mut buf: Vec<libc::c_char> = vec![0; 16 * 1024];
    loop {
        // SAFETY: passwd is plain data; all zeros is a valid (empty) value.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = get(&mut pw, &mut buf, &mut res);
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || res.is_null() {
            return None;
        }
        // SAFETY: on success the entry's strings point into `buf`, NUL-terminated.
        let (name, home) = unsafe {
            (
                CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
                PathBuf::from(CStr::from_ptr(pw.pw_dir).to_string_lossy().into_owned()),
            )
        };
        let groups = group_list(pw.pw_name, pw.pw_gid);
        return Some(RunAs {
            name,
            uid: pw.pw_uid,
            gid: pw.pw_gid,
            groups,
            home,
        });
    }
}

/// The groups `name` belongs to, `gid` first (what initgroups would set).
fn group_list(name: *const libc::c_char, gid: u32) -> Vec<u32> {
    let mut n: libc::c_int = 64;
    loop {
        let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
        let asked = n;
        // SAFETY: getgrouplist writes at most `n` ids and sets `n` to how many there are.
        let rc = unsafe { libc::getgrouplist(name, gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n as usize);
            return groups;
        }
        if n <= asked {
            n = asked * 2;
        }
        if n > 65_536 {
            return vec![gid];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_with_its_group() {
        let root = lookup_name("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert_eq!(lookup_uid(0).unwrap().name, "root");
    }

    #[test]
    fn sudo_by_root_or_nobody_changes_nothing() {
        assert_eq!(RunAs::from_sudo(None, None).unwrap(), None);
        assert_eq!(RunAs::from_sudo(Some("0"), Some("root")).unwrap(), None);
        assert!(RunAs::from_sudo(Some("x"), None).is_err());
    }
}
