//! Places kprofctl acquired: each released when its [`Booking`] drops, or all of them on
//! Ctrl-C's exit (`crate::interrupt::before_exit`), whichever comes first.

use super::client::Client;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

/// A place kprofctl acquired and releases when dropped, or on Ctrl-C before that.
#[derive(Debug)]
pub struct Booking {
    id: u64,
}

#[derive(Debug)]
struct Held {
    id: u64,
    client: Client,
    place: String,
    spec: String,
}

/// The places acquired and not released yet, for Ctrl-C's exit.
static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

fn held() -> MutexGuard<'static, Vec<Held>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

impl Booking {
    /// Records a place just acquired under `place` (the pattern given) for `spec`.
    pub fn hold(client: Client, place: &str, spec: &str) -> Booking {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        static REGISTER: Once = Once::new();
        REGISTER.call_once(|| crate::interrupt::before_exit(release_all));
        let id = NEXT.fetch_add(1, Ordering::SeqCst);
        held().push(Held {
            id,
            client,
            place: place.to_owned(),
            spec: spec.to_owned(),
        });
        Booking { id }
    }

    /// The place's own name once known: the pattern matched it, a new place could match too.
    pub fn rename(&mut self, place: &str) {
        if let Some(h) = held().iter_mut().find(|h| h.id == self.id) {
            h.place = place.to_owned();
        }
    }
}

impl Drop for Booking {
    fn drop(&mut self) {
        let mine = {
            let mut all = held();
            all.iter()
                .position(|h| h.id == self.id)
                .map(|i| all.remove(i))
        };
        if let Some(h) = mine {
            h.release();
        }
    }
}

/// Releases every place still held (Ctrl-C's exit).
fn release_all() {
    let all = std::mem::take(&mut *held());
    for h in all {
        h.release();
    }
}

impl Held {
    /// A failed release is a warning with the command to release it by hand: the work is done.
    fn release(&self) {
        let place = &self.place;
        match self.client.run(place, &["release"]) {
            Ok(r) if r.ok => {
                crate::term::note(format_args!("{}: released place {place}", self.spec))
            }
            Ok(r) => crate::term::warning(format_args!(
                "{}: could not release place {place} ({}): release it with `{}`",
                self.spec,
                r.message(),
                self.client.command_line(place, &["release"])
            )),
            Err(e) => crate::term::warning(format_args!(
                "{}: could not release place {place} ({e:#}): release it with `{}`",
                self.spec,
                self.client.command_line(place, &["release"])
            )),
        }
    }
}
