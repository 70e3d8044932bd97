//! Shell checks that keep root on the board from following paths other local users control.
//!
//! kprof-agent runs as root (or the login user) on boards other people may log into. Anything
//! kprofctl executes, writes through or reads a pid from must be out of their reach: a file is
//! executed only when it and every directory above it belong to root or the login user and no
//! one else can write them (OpenSSH's rule for `authorized_keys` and `ssh-keysign`); a run
//! directory is used only when it is the real directory kprofctl made, owned by the login
//! user, mode 0700 (the checks `ssh-agent` and `tmux` make of their `/tmp` directories). The
//! checks are plain POSIX shell with `ls -ldn`, `readlink -f`, `cd -P` and `pwd -P`, which
//! busybox, GNU and toybox all have.

use std::io::Read as _;

/// `kprof_safe_path PATH`: resolves PATH (`readlink -f`) into `$KPROF_REAL` and returns 0 when
/// the resolved file and each directory up to `/` is owned by root or the login user and not
/// writable by group or others; otherwise returns 1 with the reason in `$KPROF_WHY`. Callers
/// then use `$KPROF_REAL`, so a symlink swapped after the check does not matter.
pub const SAFE_PATH_FN: &str = r#"kprof_safe_path() {
  KPROF_REAL=$(readlink -f -- "$1" 2>/dev/null || realpath -- "$1" 2>/dev/null)
  # A busybox without either: a path whose last component is no symlink, its directory by cd -P.
  if [ -z "$KPROF_REAL" ] && [ ! -L "$1" ] && kprof_p=$(cd -P "${1%/*}/" 2>/dev/null && pwd -P); then
    KPROF_REAL=${kprof_p%/}/${1##*/}
  fi
  case $KPROF_REAL in /*) ;; *) KPROF_WHY="$1 cannot be resolved (readlink -f)"; return 1;; esac
  kprof_u=$(id -u); kprof_p=$KPROF_REAL
  while :; do
    kprof_l=$(ls -ldn -- "$kprof_p" 2>/dev/null)
    [ -n "$kprof_l" ] || { KPROF_WHY="cannot read the owner and mode of $kprof_p"; return 1; }
    set -f; set -- $kprof_l; set +f
    if [ "$3" != 0 ] && [ "$3" != "$kprof_u" ]; then
      KPROF_WHY="$kprof_p is owned by uid $3, not by root or the login user (uid $kprof_u)"; return 1
    fi
    case $1 in
      l*) KPROF_WHY="$kprof_p is a symbolic link"; return 1;;
      ?????w*|????????w*) KPROF_WHY="$kprof_p is writable by other users (mode $1)"; return 1;;
    esac
    [ "$kprof_p" = / ] && return 0
    kprof_p=${kprof_p%/*}; [ -n "$kprof_p" ] || kprof_p=/
  done
}
"#;

/// `kprof_capture_dir_ok DIR`: the agent's rule for a capture dir (`agent/src/dir_trust.rs`),
/// for the shell steps of `fetch` that read one: DIR resolved (`$KPROF_REAL`) is a directory
/// owned by root or the login user and writable by nobody else, and every directory above
/// it likewise except that a sticky one (`/tmp`) may be shared. Fails with `$KPROF_WHY`.
pub const CAPTURE_DIR_FN: &str = r#"kprof_capture_dir_ok() {
  KPROF_REAL=$(readlink -f -- "$1" 2>/dev/null || realpath -- "$1" 2>/dev/null)
  [ -n "$KPROF_REAL" ] || KPROF_REAL=$(cd -P -- "$1" 2>/dev/null && pwd -P)
  case $KPROF_REAL in /*) ;; *) KPROF_WHY="$1 cannot be resolved"; return 1;; esac
  kprof_u=$(id -u); kprof_p=$KPROF_REAL; kprof_own=1
  while :; do
    kprof_l=$(ls -ldn -- "$kprof_p" 2>/dev/null)
    [ -n "$kprof_l" ] || { KPROF_WHY="cannot read the owner and mode of $kprof_p"; return 1; }
    set -f; set -- $kprof_l; set +f
    case $1 in d*) ;; *) KPROF_WHY="$kprof_p is not a directory"; return 1;; esac
    if [ "$3" != 0 ] && [ "$3" != "$kprof_u" ]; then
      KPROF_WHY="$kprof_p is owned by uid $3, not by root or the login user"; return 1
    fi
    case $1 in
      ?????w*|????????w*)
        case $kprof_own$1 in 0*t|0*T) ;; *)
          KPROF_WHY="$kprof_p is writable by other users (mode $1)"; return 1;; esac;;
    esac
    [ "$kprof_p" = / ] && return 0
    kprof_own=0; kprof_p=${kprof_p%/*}; [ -n "$kprof_p" ] || kprof_p=/
  done
}
"#;

/// `kprof_no_foreign_links PATH`: fails with `$KPROF_WHY` when a component of PATH as
/// written (before any resolving) is a symbolic link owned by someone other than root or the
/// login user: a link another user planted must not choose where root creates directories
/// and files (the kernel's `fs.protected_symlinks` rule, for every component).
pub const NO_FOREIGN_LINKS_FN: &str = r#"kprof_no_foreign_links() {
  kprof_p=$1; kprof_u=$(id -u)
  while [ -n "$kprof_p" ] && [ "$kprof_p" != / ]; do
    if [ -L "$kprof_p" ]; then
      kprof_l=$(ls -ldn -- "$kprof_p" 2>/dev/null); set -f; set -- $kprof_l; set +f
      if [ "$3" != 0 ] && [ "$3" != "$kprof_u" ]; then
        KPROF_WHY="$kprof_p is a symbolic link owned by uid $3"; return 1
      fi
    fi
    case $kprof_p in */*) kprof_p=${kprof_p%/*};; *) kprof_p=;; esac
  done
  return 0
}
"#;

/// `kprof_enter_run_dir DIR`: enters DIR (a physical absolute path) when it is a real
/// directory, not a symlink, reached as DIR by `pwd -P`, owned by the login user, mode 0700.
/// Returns 2 when DIR does not exist, 1 with `$KPROF_WHY` when it is not kprofctl's.
pub const RUN_DIR_FN: &str = r#"kprof_enter_run_dir() {
  kprof_d=$1
  if [ -L "$kprof_d" ]; then KPROF_WHY="$kprof_d is a symbolic link"; return 1; fi
  if [ ! -e "$kprof_d" ]; then KPROF_WHY="$kprof_d does not exist"; return 2; fi
  if [ ! -d "$kprof_d" ]; then KPROF_WHY="$kprof_d is not a directory"; return 1; fi
  cd -P "$kprof_d" 2>/dev/null || { KPROF_WHY="cannot enter $kprof_d"; return 1; }
  [ "$(pwd -P)" = "$kprof_d" ] || { KPROF_WHY="$kprof_d leads to $(pwd -P)"; return 1; }
  kprof_l=$(ls -ldn . 2>/dev/null)
  set -f; set -- $kprof_l; set +f
  if [ "$3" != "$(id -u)" ]; then
    KPROF_WHY="$kprof_d is owned by uid $3, not by the login user (uid $(id -u))"; return 1
  fi
  case $1 in
    drwx------*) ;;
    *) KPROF_WHY="$kprof_d has mode $1, not drwx------"; return 1;;
  esac
}
"#;

/// Shell that enters the run directory `dir` (quoted) or exits: 255 when it is gone, 253
/// with `kprofctl: refusing …` on stderr when it is not the one kprofctl made.
pub fn enter_run_dir(dir: &str) -> String {
    format!(
        "{RUN_DIR_FN}kprof_enter_run_dir {d}; case $? in 0) ;; 2) exit 255;; \
         *) echo \"refusing to use the run directory: $KPROF_WHY\" >&2; exit 253;; esac; ",
        d = super::shell::quote(dir)
    )
}

/// 128 random bits as hex, for a board path no one can guess before kprofctl creates it.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: std's hash keys are seeded from the OS's random source.
        use std::hash::{BuildHasher as _, Hasher as _};
        for half in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    /// Runs `script` with this host's `sh`; returns (stdout, stderr, exit code).
    pub(crate) fn sh(script: &str) -> (String, String, Option<i32>) {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
            out.status.code(),
        )
    }

    fn safe_path(path: &Path) -> (String, String, Option<i32>) {
        sh(&format!(
            "{SAFE_PATH_FN}if kprof_safe_path {p}; then echo \"ok $KPROF_REAL\"; else echo \"no $KPROF_WHY\"; fi",
            p = crate::remote::shell::quote(path.to_str().unwrap())
        ))
    }

    /// A system binary (root's, in root's directories) passes, resolved to its real path.
    #[test]
    fn safe_path_system_binary_accepted() {
        let real = std::fs::canonicalize("/bin/sh").unwrap();
        let (out, err, _) = safe_path(Path::new("/bin/sh"));
        assert_eq!(out.trim(), format!("ok {}", real.display()), "{err}");
    }

    /// On a busybox without `readlink -f` and `realpath` the directory is resolved by `cd -P`
    /// (the checks still apply); a final symlink that cannot be resolved is refused.
    #[test]
    fn safe_path_without_readlink_resolves_directory() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink("/bin/sh", real.join("link")).unwrap();
        let sh_real = std::fs::canonicalize("/bin/sh").unwrap();
        let name = sh_real.file_name().unwrap().to_str().unwrap();
        let via_dir = sh_real.parent().unwrap().to_str().unwrap();
        let check = |p: &str| {
            sh(&format!(
                "{SAFE_PATH_FN}readlink() {{ return 1; }}; realpath() {{ return 1; }}; \
                 if kprof_safe_path {p}; then echo \"ok $KPROF_REAL\"; else echo \"no $KPROF_WHY\"; fi"
            ))
            .0
        };
        assert_eq!(
            check(&format!("{via_dir}/{name}")).trim(),
            format!("ok {}", sh_real.display())
        );
        let link = real.join("link");
        assert_eq!(
            check(link.to_str().unwrap()).trim(),
            format!("no {} cannot be resolved (readlink -f)", link.display())
        );
    }

    /// A file in a world-writable directory (the old `/tmp/kprof-agent`) is refused, naming
    /// the directory and its mode; so is a directory anyone can write.
    #[test]
    fn safe_path_world_writable_dir_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let agent = real.join("kprof-agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (out, _, _) = safe_path(&agent);
        assert_eq!(
            out.trim(),
            format!(
                "no {} is writable by other users (mode drwxrwxrwx)",
                real.display()
            )
        );
        // The file itself group-writable.
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o775)).unwrap();
        let (out, _, _) = safe_path(&agent);
        assert!(
            out.starts_with(&format!(
                "no {} is writable by other users",
                agent.display()
            )),
            "{out}"
        );
    }

    /// A sticky world-writable directory (`/tmp`) is refused too, as OpenSSH does: anyone may
    /// have put the file there before root did.
    #[test]
    fn safe_path_sticky_tmp_refused() {
        let tmp = std::fs::canonicalize("/tmp").unwrap();
        let mode = std::fs::metadata(&tmp).unwrap().permissions().mode();
        assert_eq!(mode & 0o1777, 0o1777, "this host's /tmp is not 1777");
        let file = tempfile::NamedTempFile::new_in(&tmp).unwrap();
        let (out, _, _) = safe_path(file.path());
        assert_eq!(
            out.trim(),
            format!(
                "no {} is writable by other users (mode drwxrwxrwt)",
                tmp.display()
            )
        );
    }

    fn enter(dir: &Path) -> (String, String, Option<i32>) {
        sh(&format!("{}pwd -P", enter_run_dir(dir.to_str().unwrap())))
    }

    /// kprofctl's own run directory (0700, the login user's, reached by its real path) is
    /// entered.
    #[test]
    fn enter_run_dir_private_dir_entered() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (out, err, code) = enter(&real);
        assert_eq!(
            (out.trim(), code),
            (real.to_str().unwrap(), Some(0)),
            "{err}"
        );
    }

    /// A run directory others can write, a symlink to one, or a path through a symlink is
    /// refused (exit 253) with the path and what is wrong; a missing one is exit 255.
    #[test]
    fn enter_run_dir_planted_dirs_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let run = real.join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (_, err, code) = enter(&run);
        assert_eq!(code, Some(253));
        assert_eq!(
            err.trim(),
            format!(
                "refusing to use the run directory: {} has mode drwxrwxrwx, not drwx------",
                run.display()
            )
        );
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = real.join("link");
        std::os::unix::fs::symlink(&run, &link).unwrap();
        let (_, err, code) = enter(&link);
        assert_eq!(code, Some(253));
        assert!(
            err.contains(&format!("{} is a symbolic link", link.display())),
            "{err}"
        );
        std::os::unix::fs::symlink(&real, real.join("up")).unwrap();
        let (_, err, code) = enter(&real.join("up/run"));
        assert_eq!(code, Some(253));
        assert!(
            err.contains(&format!("up/run leads to {}", run.display())),
            "{err}"
        );
        let (_, _, code) = enter(&real.join("gone"));
        assert_eq!(code, Some(255));
    }

    /// Each name is new: 32 hex digits, and two calls differ.
    #[test]
    fn random_hex_names_differ() {
        let (a, b) = (random_hex(), random_hex());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
