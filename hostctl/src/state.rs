//! What kprofctl remembers between commands in a project directory: `.kprof/state.toml` in the
//! current directory (the last board used, where its agent is, where its captures go).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The state file, relative to the current directory.
pub const STATE_FILE: &str = ".kprof/state.toml";

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
    pub fn load_in(dir: &Path) -> anyhow::Result<State> {
        let path = dir.join(STATE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{} is not valid: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
    }

    pub fn load() -> anyhow::Result<State> {
        Self::load_in(Path::new("."))
    }

    /// Writes atomically (temporary file and rename).
    pub fn save_in(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join(STATE_FILE);
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
        let text = toml::to_string_pretty(self)
            .map_err(|e| anyhow::anyhow!("cannot encode {}: {e}", path.display()))?;
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        Ok(path)
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
