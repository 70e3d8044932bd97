//! Why a report could not be rendered.

use std::io;

/// An error of a renderer or of the diff.
///
/// Its message reads like the sentence `kprofctl` prints; a wrapped cause is its
/// [`source`](std::error::Error::source), so `{:#}` of an `anyhow` chain shows both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The profile has no events, so there is nothing to count.
    #[error("the profile has no sampled events")]
    NoEvents,
    /// An event index past the profile's events.
    #[error("event #{event} does not exist: the profile has {count} event(s)")]
    NoSuchEvent {
        /// The index asked for.
        event: usize,
        /// How many events the profile has.
        count: usize,
    },
    /// The event exists but no stack has a sample of it.
    #[error("no samples of event {0} to draw a flamegraph from")]
    NoSamples(String),
    /// A diff names an event one of the captures does not have.
    #[error(
        "{capture}: event {event:?} is not in the capture; it has: {} (--event picks one every \
         capture has; boards whose default events differ need the same -e when recording)",
        events.join(", ")
    )]
    EventNotInCapture {
        /// The capture, as shown to the user.
        capture: String,
        /// The event asked for.
        event: String,
        /// The events the capture has.
        events: Vec<String>,
    },
    /// Writing a format failed; `what` names the format.
    #[error("{what}")]
    Write {
        /// What was being written, e.g. "writing the HTML report".
        what: &'static str,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Serializing JSON failed.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// Wraps an I/O error with what was being written.
    pub(crate) fn writing(what: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Write { what, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message and those of its causes, `: `-separated, as `anyhow` shows `{:#}`.
    fn chain(err: &Error) -> String {
        let mut text = err.to_string();
        let mut cause = std::error::Error::source(err);
        while let Some(e) = cause {
            text.push_str(": ");
            text.push_str(&e.to_string());
            cause = e.source();
        }
        text
    }

    /// A write failure shows what was written and why, as `anyhow`'s `{:#}` would.
    #[test]
    fn chain_error_write_names_what_and_cause() {
        let err = Error::writing("drawing the flamegraph")(io::Error::other("disk full"));
        assert_eq!(err.to_string(), "drawing the flamegraph");
        assert_eq!(chain(&err), "drawing the flamegraph: disk full");
    }

    /// An error without a cause is its message alone.
    #[test]
    fn chain_error_no_events_message_only() {
        assert_eq!(chain(&Error::NoEvents), "the profile has no sampled events");
        let err = Error::NoSuchEvent { event: 3, count: 2 };
        assert_eq!(
            chain(&err),
            "event #3 does not exist: the profile has 2 event(s)"
        );
    }
}
