//! Threads and sampled stacks, each stored once in the profile.

use super::State;
use crate::profile::{Stack, Thread};

/// End of a chain of stacks with one hash.
const NO_STACK: u32 = u32::MAX;

impl State<'_> {
    pub(super) fn thread(&mut self, pid: i32, tid: i32) -> usize {
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
        self.profile.threads.push(Thread {
            pid,
            tid,
            comm: key.2.clone(),
        });
        let i = self.profile.threads.len() - 1;
        self.threads.insert(key, i);
        i
    }

    /// The index in `profile.stacks` of `frames` sampled in `thread`, added with zero counts
    /// for `nev` events when new.
    pub(super) fn intern_stack(&mut self, thread: usize, frames: &[usize], nev: usize) -> usize {
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            thread.hash(&mut h);
            frames.hash(&mut h);
            h.finish()
        };
        let stacks = &self.profile.stacks;
        let head = self.stacks.get(&hash).copied().unwrap_or(NO_STACK);
        let found =
            std::iter::successors(Some(head), |i| self.stack_chain.get(*i as usize).copied())
                .take_while(|i| *i != NO_STACK)
                .map(|i| i as usize)
                .find(|i| stacks[*i].thread == thread && stacks[*i].frames == frames);
        if let Some(i) = found {
            return i;
        }
        self.profile.stacks.push(Stack {
            frames: frames.to_vec(),
            thread,
            counts: vec![0; nev],
            periods: vec![0; nev],
        });
        let i = self.profile.stacks.len() - 1;
        self.stack_chain.push(head);
        if let Ok(i) = u32::try_from(i) {
            self.stacks.insert(hash, i);
        }
        i
    }
}
