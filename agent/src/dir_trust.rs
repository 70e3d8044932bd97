//! Whether a capture dir is safe for root to write archives into and read them back from.
//!
//! The agent runs as root on boards with other local users. A capture dir that another user
//! can write to (`-o /tmp`, a dir they pre-created, one under a dir they own) lets them plant
//! FIFOs that block `list`, swap archives between seal and fetch, or steer the path through a
//! symlink. The rule is OpenSSH's `StrictModes` (`secure_path`): the dir and every dir above it
//! are owned by root or by the agent's user, and none is writable by group or others, except a
//! sticky dir above it (`/tmp`), where others cannot rename or remove what is not theirs.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use crate::Error;

const S_ISVTX: u32 = 0o1000;

/// Checks the canonical capture dir `dir` and its ancestors; refuses with the path at fault,
/// its owner and mode, and what to do.
pub fn check(dir: &Path) -> Result<(), Error> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    match first_fault(dir, euid, true)? {
        None => Ok(()),
        Some((d, md, why)) => Err(Error::Other(format!(
            "capture dir {} is not safe to use as {}: {} {why} (owner uid {}, mode {:04o}); \
             another local user could plant or replace files in it. Use a directory only \
             this user can write, such as the default /var/lib/kprof/captures",
            dir.display(),
            as_whom(euid),
            d.display(),
            md.uid(),
            md.mode() & 0o7777
        ))),
    }
}

/// The first dir of the canonical `target`'s chain (itself, then each one above) that fails
/// [`fault`], with its metadata and why; `own`: `target` is the capture dir itself.
fn first_fault(
    target: &Path,
    euid: u32,
    own: bool,
) -> Result<Option<(&Path, fs::Metadata, &'static str)>, Error> {
    for (i, d) in target.ancestors().enumerate() {
        let md = fs::symlink_metadata(d)
            .map_err(|e| Error::io(format!("cannot check capture dir {}", d.display()), e))?;
        if let Some(why) = fault(&md, euid, own && i == 0) {
            return Ok(Some((d, md, why)));
        }
    }
    Ok(None)
}

fn as_whom(euid: u32) -> &'static str {
    if euid == 0 {
        "root"
    } else {
        "this user"
    }
}

/// Makes the capture dir `dir` (0700, missing parents too) and returns its canonical path,
/// looking at each component before anything is created below it (`mkdir -p` and then a
/// check would already have created root's directories wherever a planted link pointed):
/// an existing directory must pass the rule of [`check`] as a dir above the capture dir; a
/// symbolic link is followed only when root or this user owns it, and where it leads is
/// checked the same way; a missing one is made with `mkdir` (which never follows a link; a
/// name that appears meanwhile is looked at again). The finished dir is then [`check`]ed.
pub fn create_checked(dir: &Path) -> Result<PathBuf, Error> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let absolute = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io("cannot find the current directory", e))?
            .join(dir)
    };
    let mut cur = PathBuf::from("/");
    for c in absolute.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => {
                cur.pop();
                continue;
            }
            Component::Normal(name) => {
                cur = step(&cur.join(name), euid, dir)?;
            }
        }
    }
    check(&cur)?;
    Ok(cur)
}

/// One component: `next` (in a checked canonical directory) made or checked; its canonical
/// path.
fn step(next: &Path, euid: u32, dir: &Path) -> Result<PathBuf, Error> {
    for _ in 0..8 {
        let md = match fs::symlink_metadata(next) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Only below a directory others cannot write (or a sticky one, where they
                // cannot replace what we make): the one holding it was checked as such.
                match fs::DirBuilder::new().mode(0o700).create(next) {
                    Ok(()) => return Ok(next.to_path_buf()),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => {
                        return Err(Error::io(
                            format!("cannot create capture dir {}", next.display()),
                            e,
                        ))
                    }
                }
            }
            Err(e) => {
                return Err(Error::io(
                    format!("cannot check capture dir {}", next.display()),
                    e,
                ))
            }
        };
        if md.file_type().is_symlink() {
            if md.uid() != 0 && md.uid() != euid {
                return Err(unsafe_to_create(
                    dir,
                    next,
                    &md,
                    "is a symbolic link owned by another user",
                    euid,
                ));
            }
            let target = fs::canonicalize(next)
                .map_err(|e| Error::io(format!("cannot use capture dir {}", next.display()), e))?;
            if let Some((d, md, why)) = first_fault(&target, euid, false)? {
                return Err(unsafe_to_create(dir, d, &md, why, euid));
            }
            return Ok(target);
        }
        if let Some(why) = fault(&md, euid, false) {
            return Err(unsafe_to_create(dir, next, &md, why, euid));
        }
        return Ok(next.to_path_buf());
    }
    Err(Error::Other(format!(
        "capture dir {}: {} keeps changing while it is created",
        dir.display(),
        next.display()
    )))
}

/// The refusal of capture dir `dir` because of `at`.
fn unsafe_to_create(dir: &Path, at: &Path, md: &fs::Metadata, why: &str, euid: u32) -> Error {
    Error::Other(format!(
        "capture dir {} is not safe to create as {}: {} {why} (owner uid {}, mode {:04o}); \
         another local user could have planted it. Use a directory only this user can write, \
         such as the default /var/lib/kprof/captures",
        dir.display(),
        as_whom(euid),
        at.display(),
        md.uid(),
        md.mode() & 0o7777
    ))
}

/// What is wrong with one dir of the chain: `own` is the capture dir itself, which must not
/// even be sticky-writable by others.
fn fault(md: &fs::Metadata, euid: u32, own: bool) -> Option<&'static str> {
    let mode = md.mode();
    if !md.file_type().is_dir() {
        return Some("is not a directory");
    }
    if md.uid() != 0 && md.uid() != euid {
        return Some("is owned by another user");
    }
    let shared = mode & 0o022 != 0;
    if shared && (own || mode & S_ISVTX == 0) {
        return Some("is writable by group or others");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A fresh dir for one test, removed on drop (tempfile is not a dependency of the agent).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let d = std::env::temp_dir().join(format!("kprof-trust-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&d);
            fs::create_dir(&d).unwrap();
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
            Scratch(d)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn dir_with_mode(parent: &Path, name: &str, mode: u32) -> PathBuf {
        let d = parent.join(name);
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    /// A private dir under a sticky /tmp-like dir is accepted: others cannot rename it away.
    #[test]
    fn check_dir_private_under_sticky_accepted() {
        let t = Scratch::new("sticky");
        let sticky = dir_with_mode(t.path(), "tmp", 0o1777);
        let caps = dir_with_mode(&sticky, "caps", 0o700);
        check(&caps).unwrap();
    }

    /// A world-writable capture dir (`-o /tmp`) is refused, sticky or not, naming it.
    #[test]
    fn check_dir_world_writable_refused() {
        let t = Scratch::new("world");
        for mode in [0o777, 0o1777, 0o770] {
            let d = dir_with_mode(t.path(), &format!("m{mode:o}"), mode);
            let err = check(&d).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{} is writable by group or others", d.display())),
                "{err}"
            );
        }
    }

    /// A private dir under a non-sticky world-writable dir is refused: anyone can rename it
    /// and put a dir of their own in its place.
    #[test]
    fn check_dir_under_writable_parent_refused() {
        let t = Scratch::new("parent");
        let open = dir_with_mode(t.path(), "open", 0o777);
        let caps = dir_with_mode(&open, "caps", 0o700);
        let err = check(&caps).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "{} is writable by group or others",
                open.display()
            )),
            "{err}"
        );
    }

    /// A dir owned by another user is refused (as root, the test chowns it to `nobody`).
    #[test]
    fn check_dir_other_owner_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: chown needs root");
            return;
        }
        let t = Scratch::new("owner");
        let d = dir_with_mode(t.path(), "theirs", 0o700);
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        let err = check(&d).unwrap_err().to_string();
        assert!(err.contains("is owned by another user"), "{err}");
        assert!(err.contains("owner uid 65534"), "{err}");
    }

    /// A symlink as the last component is refused (the caller passes a canonical path; this
    /// is the check that a swap after canonicalizing is caught).
    #[test]
    fn check_dir_symlink_refused() {
        let t = Scratch::new("symlink");
        let real = dir_with_mode(t.path(), "real", 0o700);
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = check(&link).unwrap_err().to_string();
        assert!(err.contains("is not a directory"), "{err}");
    }
}
