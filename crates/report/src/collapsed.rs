//! `--format collapsed`: Brendan Gregg's folded stacks, one line per distinct stack.
//!
//! `comm;root_frame;...;leaf_frame count`, root first, counts of one event. Frames are
//! `image:function` so that the same name in two images stays two frames. Kernel frames carry
//! the `_[k]` suffix and inlined user frames `_[i]`, as `stackcollapse-perf.pl --all` writes
//! them, so `flamegraph.pl --colors=java` and `inferno-flamegraph --colors java` colour them.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use kprof_symbols::profile::{Image, Profile};

use crate::Error;

/// Writes the collapsed stacks of the first event.
pub fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    write_event(profile, 0, out)
}

/// Writes the collapsed stacks of event `event` (index into [`Profile::events`]).
pub fn write_event(profile: &Profile, event: usize, out: &mut dyn Write) -> Result<(), Error> {
    for (line, count) in fold(profile, event)? {
        writeln!(out, "{line} {count}").map_err(Error::writing("writing collapsed stacks"))?;
    }
    Ok(())
}

/// The folded stacks of event `event`, sorted by stack, stacks without samples left out.
///
/// Stacks of different threads with the same command name fold into one line, as in
/// `stackcollapse-perf.pl`.
pub fn fold(profile: &Profile, event: usize) -> Result<BTreeMap<String, u64>, Error> {
    check_event(profile, event)?;
    // Labels once per function (plain and inlined) and thread: millions of frames share a
    // few thousand functions.
    let labels = FrameLabels::new(profile);
    let comms: Vec<String> = profile
        .threads
        .iter()
        .map(|t| {
            let mut label = String::new();
            push_frame_name_parts(&mut label, &t.comm, None);
            label
        })
        .collect();
    let mut folded = HashMap::<String, u64>::new();
    let mut line = String::new();
    for stack in &profile.stacks {
        let count = stack.counts.get(event).copied().unwrap_or(0);
        if count == 0 {
            continue;
        }
        line.clear();
        line.push_str(comms.get(stack.thread).map_or("[unknown]", String::as_str));
        for &frame in stack.frames.iter().rev() {
            line.push(';');
            line.push_str(labels.get(profile, frame));
        }
        match folded.get_mut(line.as_str()) {
            Some(n) => *n += count,
            None => {
                folded.insert(line.clone(), count);
            }
        }
    }
    Ok(folded.into_iter().collect())
}

/// The collapsed-stack label of every frame, computed per function and inline flag.
#[derive(Debug)]
pub struct FrameLabels {
    /// Per function: (label when not inlined, label when inlined).
    by_function: Vec<(String, String)>,
}

impl FrameLabels {
    /// The labels of every function of `profile`.
    pub fn new(profile: &Profile) -> FrameLabels {
        let by_function = profile
            .functions
            .iter()
            .map(|function| {
                let image = profile.images.get(function.image);
                let kind = image.map_or(FrameKind::Unknown, frame_kind_of_image);
                let mut plain = String::new();
                push_frame_name_parts(
                    &mut plain,
                    image.map_or("[unknown]", |i| i.name.as_str()),
                    Some(function.name.as_deref().unwrap_or("[unknown]")),
                );
                let mut inlined = plain.clone();
                match kind {
                    FrameKind::Kernel | FrameKind::Module => {
                        plain.push_str("_[k]");
                        inlined.push_str("_[k]");
                    }
                    FrameKind::User => inlined.push_str("_[i]"),
                    FrameKind::Inlined | FrameKind::Unknown => {}
                }
                (plain, inlined)
            })
            .collect();
        FrameLabels { by_function }
    }

    /// The label of frame `frame` (index into [`Profile::frames`]).
    pub fn get<'a>(&'a self, profile: &Profile, frame: usize) -> &'a str {
        profile
            .frames
            .get(frame)
            .and_then(|f| {
                let (plain, inlined) = self.by_function.get(f.function)?;
                Some(if f.inlined { inlined } else { plain })
            })
            .map_or("[unknown]:[unknown]", String::as_str)
    }

    /// Every distinct label with the kind of frame it stands for.
    pub fn kinds<'a>(&'a self, profile: &'a Profile) -> impl Iterator<Item = (&'a str, FrameKind)> {
        self.by_function.iter().zip(&profile.functions).flat_map(
            move |((plain, inlined), function)| {
                let kind = profile
                    .images
                    .get(function.image)
                    .map_or(FrameKind::Unknown, frame_kind_of_image);
                let inlined_kind = match kind {
                    FrameKind::User => FrameKind::Inlined,
                    other => other,
                };
                [(plain.as_str(), kind), (inlined.as_str(), inlined_kind)]
            },
        )
    }
}

/// Fails with a clear message when `event` does not name an event of the profile.
pub fn check_event(profile: &Profile, event: usize) -> Result<(), Error> {
    if profile.events.is_empty() {
        return Err(Error::NoEvents);
    }
    if event >= profile.events.len() {
        return Err(Error::NoSuchEvent {
            event,
            count: profile.events.len(),
        });
    }
    Ok(())
}

/// How a frame is coloured and annotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// vmlinux / `[kernel.kallsyms]`.
    Kernel,
    /// A kernel module.
    Module,
    /// A user-space function that is not inlined.
    User,
    /// A user-space function inlined into its caller.
    Inlined,
    /// A frame whose function or image is out of range of the profile's tables.
    Unknown,
}

/// [`FrameKind::Kernel`], [`FrameKind::Module`] or [`FrameKind::User`] for an image.
pub fn frame_kind_of_image(image: &Image) -> FrameKind {
    match image.kernel {
        true if is_core_kernel(&image.name, &image.recorded_path) => FrameKind::Kernel,
        true => FrameKind::Module,
        false => FrameKind::User,
    }
}

/// vmlinux rather than a module: perf names it `[kernel.kallsyms]`, kprof `vmlinux`.
fn is_core_kernel(name: &str, recorded_path: &str) -> bool {
    name == "vmlinux" || name.starts_with("[kernel") || recorded_path.starts_with("[kernel")
}

/// Appends `first` (a command name) or `first:second` (image and function), sanitized.
pub fn push_frame_name_parts(line: &mut String, first: &str, second: Option<&str>) {
    push_sanitized(line, first);
    if let Some(second) = second {
        line.push(':');
        push_sanitized(line, second);
    }
}

/// Appends `s` with the separators of the format (`;`, line breaks) replaced, so that a
/// strange command or symbol name cannot split a frame or a line.
fn push_sanitized(line: &mut String, s: &str) {
    line.extend(s.chars().map(|c| match c {
        ';' => ':',
        '\n' | '\r' | '\t' => ' ',
        c => c,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;
    use kprof_symbols::profile::{Stack, Thread};

    fn text(profile: &Profile, event: usize) -> String {
        let mut out = Vec::new();
        write_event(profile, event, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Root first, `image:function` frames, kernel `_[k]` and inlined `_[i]` suffixes.
    #[test]
    fn write_collapsed_fixture_exact() {
        let mut out = Vec::new();
        write(&fixture::profile(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "app;app:_start;app:main;app:compute 10\n\
             app;app:_start;app:main;app:compute;app:hot_loop<int>_[i] 60\n\
             app;app:_start;app:main;libc.so.6:[unknown] 5\n\
             app;app:_start;app:main;libc.so.6:write;vmlinux:entry_SYSCALL_64_[k];\
             vmlinux:do_syscall_64_[k];vmlinux:ksys_write_[k];vmlinux:vfs_write_[k];\
             mychardrv.ko:mychardrv_write_[k];mychardrv.ko:mychardrv_checksum_[k] 25\n"
        );
    }

    /// Another event has its own counts, and stacks without samples of it are left out.
    #[test]
    fn write_collapsed_second_event_skips_zero_stacks() {
        let out = text(&fixture::profile(), 1);
        assert_eq!(out.lines().count(), 3, "{out}");
        assert!(
            out.contains("app:compute;app:hot_loop<int>_[i] 6\n"),
            "{out}"
        );
        assert!(!out.contains("[unknown]"), "{out}");
    }

    /// Threads of one command fold into one line; separators in names cannot split frames.
    #[test]
    fn write_collapsed_same_comm_merges_and_sanitizes() {
        let mut profile = fixture::profile();
        profile.threads = vec![
            Thread {
                pid: 1,
                tid: 1,
                comm: "a;b c".to_owned(),
            },
            Thread {
                pid: 1,
                tid: 2,
                comm: "a;b c".to_owned(),
            },
        ];
        let frames = profile.stacks[1].frames.clone();
        profile.stacks = vec![
            Stack {
                frames: frames.clone(),
                thread: 0,
                counts: vec![3, 0],
                periods: vec![3, 0],
            },
            Stack {
                frames,
                thread: 1,
                counts: vec![4, 0],
                periods: vec![4, 0],
            },
        ];
        profile.functions[fixture::COMPUTE].name = Some("odd;name\nx".to_owned());
        assert_eq!(
            text(&profile, 0),
            "a:b c;app:_start;app:main;app:odd:name x 7\n"
        );
    }

    /// An event index past the profile's events is an error naming the count.
    #[test]
    fn write_collapsed_unknown_event_fails_clearly() {
        let err = write_event(&fixture::profile(), 5, &mut Vec::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "event #5 does not exist: the profile has 2 event(s)"
        );
    }
}
