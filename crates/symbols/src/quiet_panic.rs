//! Running third-party parsing code that may panic on damaged input, without the default
//! panic hook printing "thread 'main' panicked at …" for a panic that is caught and turned
//! into a "damaged record" warning.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Runs `f`; a panic inside it becomes `None` and prints nothing. Panics anywhere else in the
/// program still reach the previous hook, so real bugs keep their message.
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> Option<T> {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    result.ok()
}

#[cfg(test)]
mod tests {
    use super::catch_quietly;

    /// A panic inside is caught and reported as `None`; a value passes through.
    #[test]
    fn catch_quietly_panic_none() {
        assert_eq!(catch_quietly(|| 7), Some(7));
        let v: Vec<u8> = Vec::new();
        assert_eq!(catch_quietly(|| v[3]), None);
        assert_eq!(catch_quietly(|| 8), Some(8));
    }
}
