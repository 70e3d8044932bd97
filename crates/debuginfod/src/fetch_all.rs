//! [`Client::fetch_all`]: many files on a bounded pool of threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use crate::{Client, FetchError, Fetched, Progress, Request};

type Outcome = Result<Fetched, FetchError>;

impl Client {
    /// Many at once on `jobs` threads; results in request order; progress after each
    /// file/chunk. Identical requests are fetched once (the later ones get a copy of the
    /// first one's result), and `Progress` names a file by its first request's index.
    pub fn fetch_all(
        &self,
        wanted: &[Request],
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Vec<Result<Fetched, FetchError>> {
        // first request index of each distinct file, and each request's distinct file
        let mut firsts: Vec<usize> = Vec::new();
        let mut seen: HashMap<&Request, usize> = HashMap::new();
        let slot_of: Vec<usize> = wanted
            .iter()
            .enumerate()
            .map(|(i, request)| {
                *seen.entry(request).or_insert_with(|| {
                    firsts.push(i);
                    firsts.len() - 1
                })
            })
            .collect();
        progress(Progress::Started {
            files: firsts.len(),
        });
        let results: Vec<Mutex<Option<Outcome>>> =
            firsts.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let workers = self.config.jobs.clamp(1, firsts.len().max(1));
        thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| loop {
                    let slot = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&file) = firsts.get(slot) else { break };
                    let request = &wanted[file];
                    let outcome = self.fetch_reporting(
                        &request.build_id,
                        request.artifact.as_artifact(),
                        &|done, total| progress(Progress::Bytes { file, done, total }),
                    );
                    *results[slot].lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
                    progress(Progress::Finished { file });
                });
            }
        });
        let results: Vec<Outcome> = results
            .into_iter()
            .map(|r| {
                r.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .expect("every slot is filled by a worker before the scope ends")
            })
            .collect();
        slot_of
            .iter()
            .map(|&slot| match &results[slot] {
                Ok(fetched) => Ok(fetched.clone()),
                Err(error) => Err(error.duplicate()),
            })
            .collect()
    }
}
