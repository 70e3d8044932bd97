//! What kprofctl remembers between commands in a project directory: `.kprof/state.toml` in the
//! current directory (the last board used, where its agent is, where its captures go).

use crate::files::NotOpened;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The state file, relative to the current directory.
pub const STATE_FILE: &str = ".kprof/state.toml";

/// A state file larger than this is refused (a real one is a few hundred bytes per board).
const MAX_STATE_SIZE: u64 = 1 << 20;

/// Everything in `.kprof/state.toml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The target of the last `deploy` or `run`, used by `fetch` without a target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_target: Option<String>,
    /// Per target, keyed by the target as typed.
    #[serde(default)]
    pub targets: BTreeMap<String, TargetState>,
}

/// What is known about one board.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetState {
    /// Where `deploy` installed the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Capture directories used with `run -o`, besides the agent's default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capture_dirs: Vec<String>,
}

impl State {
    /// Reads the state of `dir` (the current directory in use); no file is the empty state.
    /// A `.kprof` that is not the user's own directory, or a state file that is a link, is
    /// refused: its strings would go into what kprofctl does and writes next.
    pub fn load_in(dir: &Path) -> anyhow::Result<State> {
        let path = dir.join(STATE_FILE);
        let parent = path.parent().unwrap_or(dir);
        if std::fs::symlink_metadata(parent).is_err() {
            return Ok(State::default());
        }
        crate::files::own_dir(parent)?;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        let mut file = match crate::files::open_regular(&path, &mut options) {
            Ok((f, _)) => f,
            Err(NotOpened::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(State::default())
            }
            Err(NotOpened::Refused(why)) => {
                anyhow::bail!("refusing to read {}: {why}", path.display())
            }
            Err(NotOpened::Io(e)) => anyhow::bail!("cannot read {}: {e}", path.display()),
        };
        let mut text = String::new();
        file.by_ref()
            .take(MAX_STATE_SIZE)
            .read_to_string(&mut text)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not valid: {e}", path.display()))
    }

    pub fn load() -> anyhow::Result<State> {
        Self::load_in(Path::new("."))
    }

    /// Writes atomically: a new file under a random name in the user's own `.kprof/` (see
    /// [`crate::files::NewFile`]), renamed onto `state.toml`.
    pub fn save_in(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join(STATE_FILE);
        crate::files::own_dir(path.parent().unwrap_or(dir))?;
        let text = toml::to_string_pretty(self)
            .map_err(|e| anyhow::anyhow!("cannot encode {}: {e}", path.display()))?;
        crate::files::write_new(&path, text.as_bytes())
    }

    pub fn save(&self) -> anyhow::Result<PathBuf> {
        self.save_in(Path::new("."))
    }

    /// The entry of `target`, created when missing; also makes it the last target.
    pub fn remember(&mut self, target: &str) -> &mut TargetState {
        self.last_target = Some(target.to_owned());
        self.targets.entry(target.to_owned()).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// State written and read back is the same; a missing file is the empty state.
    #[test]
    fn save_state_toml_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(State::load_in(dir.path()).unwrap(), State::default());
        let mut state = State::default();
        let t = state.remember("root@127.0.0.1:2222");
        t.agent = Some("/tmp/kprof-agent".into());
        t.capture_dirs.push("/data/caps".into());
        state.save_in(dir.path()).unwrap();
        assert_eq!(State::load_in(dir.path()).unwrap(), state);
    }

    /// A link planted as the temporary or the state file (git stores symlinks) is never
    /// written through: the victim stays as it was.
    #[test]
    fn save_state_planted_links_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::fs::create_dir(dir.path().join(".kprof")).unwrap();
        let kprof = dir.path().join(".kprof");
        std::os::unix::fs::symlink(&victim, kprof.join("state.toml.tmp")).unwrap();
        let mut state = State::default();
        state.remember("root@board");
        state.save_in(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(State::load_in(dir.path()).unwrap(), state);
        std::fs::remove_file(kprof.join("state.toml")).unwrap();
        std::os::unix::fs::symlink(&victim, kprof.join("state.toml")).unwrap();
        let err = State::load_in(dir.path()).unwrap_err().to_string();
        assert!(err.contains("state.toml: it is a symbolic link"), "{err}");
        state.save_in(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(kprof.join("state.toml"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    /// A `.kprof` that is a link, writable by others or another user's is refused.
    #[test]
    fn save_state_foreign_kprof_dir_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".kprof")).unwrap();
        let err = State::default()
            .save_in(dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains(".kprof: it is a symbolic link"), "{err}");
        assert!(std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none());
        std::fs::remove_file(dir.path().join(".kprof")).unwrap();
        std::fs::create_dir(dir.path().join(".kprof")).unwrap();
        let kprof = dir.path().join(".kprof");
        std::fs::set_permissions(&kprof, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = State::load_in(dir.path()).unwrap_err().to_string();
        assert!(err.contains("writable by others (mode 777)"), "{err}");
        std::fs::set_permissions(&kprof, std::fs::Permissions::from_mode(0o755)).unwrap();
        if crate::files::effective_uid() == 0 {
            std::os::unix::fs::chown(&kprof, Some(65534), None).unwrap();
            let err = State::default()
                .save_in(dir.path())
                .unwrap_err()
                .to_string();
            assert!(err.contains("owned by uid 65534, not you"), "{err}");
        }
    }

    /// A damaged state file is an error naming it, not a silent reset.
    #[test]
    fn load_state_toml_corrupt_names_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".kprof")).unwrap();
        std::fs::write(dir.path().join(STATE_FILE), "last_target = [").unwrap();
        let err = State::load_in(dir.path()).unwrap_err().to_string();
        assert!(err.contains(".kprof/state.toml is not valid"), "{err}");
    }
}
