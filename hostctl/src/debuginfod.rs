//! kprofctl's debuginfod provider: the symbolizer asks it for the build-ids no local place
//! has, it fetches them from the servers in `DEBUGINFOD_URLS` (in parallel, with a progress
//! bar) into the debuginfod client cache that gdb and perf share, and it says once which
//! servers failed and which build-ids no server had.

use kprof_debuginfod::{Artifact, Client, Config, FetchError, OwnedArtifact, Progress, Request};
use kprof_symbols::provider::{FileKind, Provided, SymbolProvider, Unavailable, Wanted};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The provider for `DEBUGINFOD_URLS`; `None` when it is unset or empty. With `offline`,
/// files already in the cache are used and no server is asked.
pub fn from_env(offline: bool) -> anyhow::Result<Option<Arc<dyn SymbolProvider>>> {
    let Some(config) = Config::from_env()? else {
        return Ok(None);
    };
    let client = Client::new(config)?;
    Ok(Some(Arc::new(Debuginfod {
        client,
        offline,
        outcomes: Mutex::default(),
        budget: Budget::from_env()?,
    })))
}

/// The environment variable that caps the files asked of the servers in one run.
pub const MAX_FILES_ENV: &str = "KPROF_DEBUGINFOD_MAX_FILES";

/// 1000 files: a busy system-wide capture maps a few hundred distinct build-ids; a capture
/// that names thousands (a hostile one picks them) must not become thousands of downloads.
pub const DEFAULT_MAX_FILES: usize = 1000;

/// How many more files this run may ask the servers for.
#[derive(Debug)]
struct Budget {
    max: usize,
    asked: AtomicUsize,
    refused: AtomicUsize,
}

impl Budget {
    fn from_env() -> anyhow::Result<Self> {
        let max = match std::env::var(MAX_FILES_ENV) {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("{MAX_FILES_ENV}={v:?} is not a number of files"))?,
            Err(_) => DEFAULT_MAX_FILES,
        };
        Ok(Self {
            max,
            asked: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        })
    }

    /// Takes up to `n` requests from the budget; returns how many may go.
    fn take(&self, n: usize) -> usize {
        let mut granted = 0;
        let _ = self
            .asked
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |asked| {
                granted = n.min(self.max.saturating_sub(asked));
                Some(asked + granted)
            });
        self.refused.fetch_add(n - granted, Ordering::Relaxed);
        granted
    }

    fn over(&self) -> String {
        format!(
            "not asked: this run already asked the servers for {} files ({MAX_FILES_ENV})",
            self.max
        )
    }

    fn warning(&self) -> Option<String> {
        let refused = self.refused.load(Ordering::Relaxed);
        (refused > 0).then(|| {
            format!(
                "debuginfod: {refused} file(s) not asked: a run asks for at most {} \
                 ({MAX_FILES_ENV}={}; raise it to ask for all)",
                self.max, self.max
            )
        })
    }
}

/// What happened to one request this run.
#[derive(Debug, Clone)]
enum Outcome {
    Got(Provided),
    NoServerHad { image: String },
    Failed(String),
}

#[derive(Debug)]
struct Debuginfod {
    client: Client,
    offline: bool,
    outcomes: Mutex<HashMap<(String, FileKind), Outcome>>,
    budget: Budget,
}

fn artifact(kind: FileKind) -> Artifact<'static> {
    match kind {
        FileKind::Debuginfo => Artifact::Debuginfo,
        FileKind::Executable => Artifact::Executable,
    }
}

fn owned(kind: FileKind) -> OwnedArtifact {
    match kind {
        FileKind::Debuginfo => OwnedArtifact::Debuginfo,
        FileKind::Executable => OwnedArtifact::Executable,
    }
}

impl Debuginfod {
    fn outcome(
        &self,
        image: &str,
        result: Result<kprof_debuginfod::Fetched, FetchError>,
    ) -> Outcome {
        match result {
            Ok(f) => {
                let origin = match &f.server {
                    Some(url) => format!("debuginfod: {url}"),
                    None => "debuginfod cache".to_string(),
                };
                Outcome::Got(Provided {
                    path: f.path,
                    origin,
                })
            }
            Err(FetchError::WrongBuildId { url, wanted, found }) => Outcome::Failed(format!(
                "debuginfod: {url} served build-id {} for {wanted}; refused",
                found.as_deref().unwrap_or("(none)")
            )),
            Err(FetchError::NotFound { .. }) => Outcome::NoServerHad {
                image: image.to_owned(),
            },
            Err(e) => Outcome::Failed(format!("debuginfod: {e}")),
        }
    }

    fn remember(&self, id: &str, kind: FileKind, outcome: Outcome) -> Outcome {
        if let Ok(mut o) = self.outcomes.lock() {
            o.insert((id.to_owned(), kind), outcome.clone());
        }
        outcome
    }

    fn known(&self, id: &str, kind: FileKind) -> Option<Outcome> {
        self.outcomes
            .lock()
            .ok()?
            .get(&(id.to_owned(), kind))
            .cloned()
    }

    fn lookup_file(&self, build_id: &str, kind: FileKind) -> Result<Provided, String> {
        let outcome = match self.known(build_id, kind) {
            Some(o) => o,
            None => {
                let o = match self.client.cached(build_id, artifact(kind)) {
                    Some(path) => Outcome::Got(Provided {
                        origin: "debuginfod cache".into(),
                        path,
                    }),
                    None if self.offline => {
                        return Err("not in the debuginfod cache (--offline)".into())
                    }
                    None if self.budget.take(1) == 0 => Outcome::Failed(self.budget.over()),
                    None => {
                        let r = self.client.fetch(build_id, artifact(kind));
                        self.outcome("", r)
                    }
                };
                self.remember(build_id, kind, o)
            }
        };
        match outcome {
            Outcome::Got(p) => Ok(p),
            Outcome::NoServerHad { .. } => Err(self.no_server_had()),
            Outcome::Failed(why) => Err(why),
        }
    }

    /// Why a file every server answered 404 for is missing, naming the servers.
    fn no_server_had(&self) -> String {
        format!(
            "no debuginfod server had it ({})",
            self.client.urls().join(" ")
        )
    }

    fn lookup_source(&self, build_id: &str, path: &str) -> Result<String, String> {
        let artifact = Artifact::Source(path);
        let file = match self.client.cached(build_id, artifact) {
            Some(p) => p,
            None if self.offline => return Err("not in the debuginfod cache (--offline)".into()),
            None if self.budget.take(1) == 0 => return Err(self.budget.over()),
            None => match self.client.fetch(build_id, Artifact::Source(path)) {
                Ok(f) => f.path,
                Err(FetchError::NotFound { .. }) => return Err(self.no_server_had()),
                Err(e) => return Err(format!("debuginfod: {e}")),
            },
        };
        std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))
    }
}

impl SymbolProvider for Debuginfod {
    fn prefetch(&self, wanted: &[Wanted]) {
        let todo: Vec<&Wanted> = wanted
            .iter()
            .filter(|w| self.known(&w.build_id, w.kind).is_none())
            .filter(|w| self.client.cached(&w.build_id, artifact(w.kind)).is_none())
            .collect();
        if self.offline || todo.is_empty() {
            return;
        }
        let granted = self.budget.take(todo.len());
        for w in &todo[granted..] {
            self.remember(&w.build_id, w.kind, Outcome::Failed(self.budget.over()));
        }
        let todo = &todo[..granted];
        let requests: Vec<Request> = todo
            .iter()
            .map(|w| Request {
                build_id: w.build_id.clone(),
                artifact: owned(w.kind),
            })
            .collect();
        let bar = crate::progress::bar(
            requests.len() as u64,
            "debuginfod",
            crate::progress::Counting::Percent,
        );
        // Bytes so far per request, to show the total received across the parallel downloads.
        let per_file: Vec<AtomicU64> = requests.iter().map(|_| AtomicU64::new(0)).collect();
        let total = AtomicU64::new(0);
        let results = self.client.fetch_all(&requests, &|p| match p {
            Progress::Bytes { file, done, .. } => {
                let before = per_file
                    .get(file)
                    .map_or(0, |b| b.swap(done, Ordering::Relaxed));
                let sum = total.fetch_add(done.saturating_sub(before), Ordering::Relaxed)
                    + done.saturating_sub(before);
                bar.set_message(format!("debuginfod {}", indicatif::HumanBytes(sum)));
            }
            Progress::Finished { .. } => bar.inc(1),
            _ => {}
        });
        bar.finish_and_clear();
        for (w, r) in todo.iter().zip(results) {
            let o = self.outcome(&w.image, r);
            self.remember(&w.build_id, w.kind, o);
        }
    }

    fn file(&self, build_id: &str, kind: FileKind) -> Result<Provided, Unavailable> {
        self.lookup_file(build_id, kind).map_err(Unavailable)
    }

    fn source(&self, build_id: &str, path: &str) -> Result<String, Unavailable> {
        self.lookup_source(build_id, path).map_err(Unavailable)
    }

    fn name(&self) -> String {
        format!("debuginfod ({})", self.client.urls().join(" "))
    }

    fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .client
            .server_failures()
            .into_iter()
            .map(|(url, why)| format!("debuginfod: {url}: {why}; not asked again this run"))
            .chain(self.budget.warning())
            .collect();
        let Ok(outcomes) = self.outcomes.lock() else {
            return out;
        };
        // Images no server had any file of, each once, named as the capture names them.
        let got: std::collections::HashSet<&str> = outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Got(_)))
            .map(|((id, _), _)| id.as_str())
            .collect();
        let mut missing: BTreeMap<&str, &str> = BTreeMap::new();
        for ((id, _), o) in outcomes
            .iter()
            .filter(|((id, _), _)| !got.contains(id.as_str()))
        {
            match o {
                Outcome::NoServerHad { image } => {
                    missing.entry(id).or_insert(image);
                }
                Outcome::Failed(why) if why.contains("refused") => out.push(why.clone()),
                _ => {}
            }
        }
        if !missing.is_empty() {
            const SHOWN: usize = 5;
            let mut list: Vec<String> = missing
                .iter()
                .take(SHOWN)
                .map(|(id, image)| {
                    if image.is_empty() {
                        id.to_string()
                    } else {
                        format!("{image} ({id})")
                    }
                })
                .collect();
            if missing.len() > SHOWN {
                list.push(format!("{} more", missing.len() - SHOWN));
            }
            out.push(format!(
                "debuginfod: no server had {} build-id(s) (asked {}): {}",
                missing.len(),
                self.client.urls().join(" "),
                list.join(", ")
            ));
        }
        out.sort();
        out.dedup();
        out
    }
}
