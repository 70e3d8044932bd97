//! [`Client`]: the cache first, then each server in turn.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::build_id::{elf_build_id, validate_build_id};
use crate::cache::{Cache, Lookup};
use crate::url::artifact_url;
use crate::{http, Artifact, Config, Error, FetchError, Fetched};

/// A debuginfod client: one per run, shared by the threads that fetch.
#[derive(Debug)]
pub struct Client {
    pub(crate) config: Config,
    agent: ureq::Agent,
    cache: Cache,
    /// Servers that failed for transport reasons, with the first reason, in failure order.
    failures: Mutex<Vec<(String, String)>>,
}

/// What one server said about one file, when it is not an error for the whole fetch.
enum Answer {
    Placed(Fetched),
    Missing,
    Refused(FetchError),
    Failed,
}

impl Client {
    /// A client for `config`; creates the cache directory (0700) and elfutils' settings files
    /// in it when absent, and cleans it as elfutils does when `cache_clean_interval_s` has
    /// passed.
    pub fn new(config: Config) -> Result<Client, Error> {
        let cache = Cache::open(&config.cache_dir).map_err(|source| Error::Cache {
            path: config.cache_dir.clone(),
            source,
        })?;
        // Best effort, as elfutils: a cache that cannot be cleaned still serves.
        let _ = crate::clean::clean_if_due(cache.root());
        Ok(Client {
            agent: http::agent(&config),
            config,
            cache,
            failures: Mutex::default(),
        })
    }

    /// The servers, in the order they are asked.
    pub fn urls(&self) -> &[String] {
        &self.config.urls
    }

    /// The cache directory (elfutils' client cache).
    pub fn cache_dir(&self) -> &std::path::Path {
        self.cache.root()
    }

    /// The configuration the client was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Cache only, never the network (elfutils' negative cache honoured). An ELF file in the
    /// cache whose build-id is not `build_id` (placed by another client) is not returned.
    pub fn cached(&self, build_id: &str, artifact: Artifact<'_>) -> Option<PathBuf> {
        check_request(build_id, artifact).ok()?;
        match self.cache.lookup(build_id, artifact) {
            Ok(Lookup::Hit(path)) if matches_build_id(&path, build_id, artifact) => Some(path),
            _ => None,
        }
    }

    /// Cache, else each server in turn; ELF artifacts checked by GNU build-id before they
    /// enter the cache.
    pub fn fetch(&self, build_id: &str, artifact: Artifact<'_>) -> Result<Fetched, FetchError> {
        self.fetch_reporting(build_id, artifact, &|_, _| {})
    }

    /// Servers that failed for transport reasons (connect refused, timeout, TLS, 5xx) this
    /// run, with the first reason: asked no more this run, so a dead server costs one timeout,
    /// not one per file.
    pub fn server_failures(&self) -> Vec<(String, String)> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// [`Client::fetch`] calling `progress(done, total)` after each chunk received.
    pub(crate) fn fetch_reporting(
        &self,
        build_id: &str,
        artifact: Artifact<'_>,
        progress: &dyn Fn(u64, Option<u64>),
    ) -> Result<Fetched, FetchError> {
        check_request(build_id, artifact)?;
        let target = self.cache.target(build_id, artifact);
        let lookup = self
            .cache
            .lookup(build_id, artifact)
            .map_err(|source| FetchError::Io {
                path: target.clone(),
                source,
            })?;
        match lookup {
            Lookup::Hit(path) if matches_build_id(&path, build_id, artifact) => {
                return Ok(Fetched { path, server: None })
            }
            Lookup::Negative => {
                return Err(FetchError::NotFound {
                    build_id: build_id.to_string(),
                    tried: Vec::new(),
                })
            }
            Lookup::Hit(_) | Lookup::Miss => {}
        }
        self.cache.clear_stale(build_id, artifact);
        self.ask_servers(build_id, artifact, progress)
    }

    fn ask_servers(
        &self,
        build_id: &str,
        artifact: Artifact<'_>,
        progress: &dyn Fn(u64, Option<u64>),
    ) -> Result<Fetched, FetchError> {
        let mut tried = Vec::new();
        let (mut missing, mut unreachable) = (0, false);
        let mut refused = None;
        for server in &self.config.urls {
            if self.has_failed(server) {
                unreachable = true;
                continue;
            }
            tried.push(server.clone());
            match self.ask(server, build_id, artifact, progress)? {
                Answer::Placed(fetched) => return Ok(fetched),
                Answer::Missing => missing += 1,
                // Another server may have the right file: a wrong one only decides at the end.
                Answer::Refused(error) => refused = refused.or(Some(error)),
                Answer::Failed => unreachable = true,
            }
        }
        if let Some(error) = refused {
            return Err(error);
        }
        if missing == 0 && !self.config.urls.is_empty() {
            return Err(FetchError::Offline);
        }
        // A miss is recorded only when every server answered: one that could not be asked
        // may have the file, and must be asked again next run.
        if !unreachable && missing > 0 {
            self.cache
                .record_miss(build_id, artifact)
                .map_err(|source| FetchError::Io {
                    path: self.cache.target(build_id, artifact),
                    source,
                })?;
        }
        Err(FetchError::NotFound {
            build_id: build_id.to_string(),
            tried,
        })
    }

    fn ask(
        &self,
        server: &str,
        build_id: &str,
        artifact: Artifact<'_>,
        progress: &dyn Fn(u64, Option<u64>),
    ) -> Result<Answer, FetchError> {
        let url = artifact_url(server, build_id, artifact);
        let target = self.cache.target(build_id, artifact);
        let io = |source| FetchError::Io {
            path: target.clone(),
            source,
        };
        let mut temp = self.cache.temp_file(build_id, artifact).map_err(io)?;
        let outcome = http::get(
            &self.agent,
            &url,
            &self.config,
            temp.as_file_mut(),
            progress,
        );
        let mtime = match outcome {
            http::Outcome::Got { mtime } => mtime,
            http::Outcome::Missing => return Ok(Answer::Missing),
            http::Outcome::Failed(reason) => {
                self.mark_failed(server, reason);
                return Ok(Answer::Failed);
            }
            http::Outcome::TooLarge { size } => {
                let max = self.config.max_size.unwrap_or(0);
                return Err(FetchError::TooLarge { url, size, max });
            }
            http::Outcome::TooSlow => {
                let max_time = self.config.max_time.unwrap_or_default();
                return Err(FetchError::TooSlow { url, max_time });
            }
            http::Outcome::Local(source) => return Err(io(source)),
        };
        if !matches!(artifact, Artifact::Source(_)) {
            let found = elf_build_id(temp.path()).map_err(io)?;
            if found.as_deref() != Some(build_id) {
                let wanted = build_id.to_string();
                return Ok(Answer::Refused(FetchError::WrongBuildId {
                    url,
                    wanted,
                    found,
                }));
            }
        }
        let path = self
            .cache
            .place(temp, build_id, artifact, mtime)
            .map_err(io)?;
        Ok(Answer::Placed(Fetched {
            path,
            server: Some(server.to_string()),
        }))
    }

    fn has_failed(&self, server: &str) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.iter().any(|(url, _)| url == server)
    }

    fn mark_failed(&self, server: &str, reason: String) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if !failures.iter().any(|(url, _)| url == server) {
            failures.push((server.to_string(), reason));
        }
    }
}

/// The build-id and source path may become a path and a URL.
fn check_request(build_id: &str, artifact: Artifact<'_>) -> Result<(), FetchError> {
    validate_build_id(build_id).map_err(|reason| FetchError::InvalidBuildId {
        build_id: build_id.to_string(),
        reason,
    })?;
    match artifact {
        Artifact::Source(path) if !path.starts_with('/') || path.contains('\0') => {
            Err(FetchError::InvalidSourcePath {
                path: path.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// A cached ELF artifact carries `build_id` (sources cannot be checked).
fn matches_build_id(path: &std::path::Path, build_id: &str, artifact: Artifact<'_>) -> bool {
    match artifact {
        Artifact::Source(_) => true,
        _ => elf_build_id(path).ok().flatten().as_deref() == Some(build_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn client(cache: &std::path::Path) -> Client {
        Client::new(Config {
            urls: vec!["http://127.0.0.1:9".to_string()],
            cache_dir: cache.to_path_buf(),
            timeout: Duration::from_secs(1),
            max_size: None,
            max_time: None,
            jobs: 2,
        })
        .unwrap()
    }

    /// One client is shared by the fetching threads.
    #[test]
    fn client_send_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<Client>();
    }

    /// A build-id that is not lowercase hex, or a relative source path, is refused before
    /// it becomes a path or URL: nothing created, no server asked.
    #[test]
    fn fetch_invalid_request_refused() {
        let dir = tempfile::tempdir().unwrap();
        let client = client(dir.path());
        for id in ["../../etc", "ABCD", "abc", ""] {
            let result = client.fetch(id, Artifact::Debuginfo);
            assert!(
                matches!(result, Err(FetchError::InvalidBuildId { .. })),
                "{id}: {result:?}"
            );
            assert_eq!(client.cached(id, Artifact::Debuginfo), None);
        }
        let result = client.fetch("abcd", Artifact::Source("src/m.c"));
        assert!(
            matches!(result, Err(FetchError::InvalidSourcePath { .. })),
            "{result:?}"
        );
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["cache_clean_interval_s", "cache_miss_s", "max_unused_age_s"]
        );
        assert!(client.server_failures().is_empty());
    }
}
