//! Threads and sampled stacks, each stored once in the profile.

use crate::profile::{Stack, Thread};
use std::collections::HashMap;

/// End of a chain of stacks with one hash.
const NO_STACK: u32 = u32::MAX;

/// The names of threads, and the index of each thread and each stack in the profile.
#[derive(Debug, Default)]
pub(super) struct StackInterner {
    /// Thread names by tid, from COMM records and inherited at FORK.
    comms: HashMap<i32, String>,
    threads: HashMap<(i32, i32, String), usize>,
    /// Hash of (thread, frames) → the newest index of `profile.stacks` with that hash;
    /// `chain[i]` is the next older one. The frames are stored once, in the profile, and
    /// this costs 12–16 bytes per distinct stack (a map of vectors cost ~70).
    heads: HashMap<u64, u32>,
    chain: Vec<u32>,
}

impl StackInterner {
    /// A COMM record: thread `tid` is called `name` from now on.
    pub(super) fn set_comm(&mut self, tid: i32, name: String) {
        self.comms.insert(tid, name);
    }

    /// A FORK record: thread `tid` has the name of `parent_tid` until it gets its own.
    pub(super) fn fork(&mut self, parent_tid: i32, tid: i32) {
        if let Some(c) = self.comms.get(&parent_tid).cloned() {
            self.comms.entry(tid).or_insert(c);
        }
    }

    /// The index in `threads` of thread `tid` of `pid` under its current name, added when new.
    pub(super) fn thread(&mut self, threads: &mut Vec<Thread>, pid: i32, tid: i32) -> usize {
        let comm = self
            .comms
            .get(&tid)
            .or_else(|| self.comms.get(&pid))
            .cloned()
            .unwrap_or_else(|| {
                if pid == 0 {
                    "swapper".into()
                } else {
                    format!(":{tid}")
                }
            });
        let key = (pid, tid, comm);
        if let Some(i) = self.threads.get(&key) {
            return *i;
        }
        threads.push(Thread {
            pid,
            tid,
            comm: key.2.clone(),
        });
        let i = threads.len() - 1;
        self.threads.insert(key, i);
        i
    }

    /// The index in `stacks` of `frames` sampled in `thread`, added with zero counts for
    /// `nev` events when new.
    pub(super) fn intern(
        &mut self,
        stacks: &mut Vec<Stack>,
        thread: usize,
        frames: &[usize],
        nev: usize,
    ) -> usize {
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            thread.hash(&mut h);
            frames.hash(&mut h);
            h.finish()
        };
        let head = self.heads.get(&hash).copied().unwrap_or(NO_STACK);
        let found = std::iter::successors(Some(head), |i| self.chain.get(*i as usize).copied())
            .take_while(|i| *i != NO_STACK)
            .map(|i| i as usize)
            .find(|i| stacks[*i].thread == thread && stacks[*i].frames == frames);
        if let Some(i) = found {
            return i;
        }
        stacks.push(Stack {
            frames: frames.to_vec(),
            thread,
            counts: vec![0; nev],
            periods: vec![0; nev],
        });
        let i = stacks.len() - 1;
        self.chain.push(head);
        if let Ok(i) = u32::try_from(i) {
            self.heads.insert(hash, i);
        }
        i
    }
}
