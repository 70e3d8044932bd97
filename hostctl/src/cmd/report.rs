//! `kprofctl report`: symbolize a capture and show one view of it in one format.

use super::symbol_args::SymbolArgs;
use super::time_range::{TimeRange, TimeSpec};
use crate::progress::{self, Counting};
use anyhow::Context;
use kprof_report as render;
use kprof_symbols::annotate::Annotation;
use kprof_symbols::profile::Profile;
use kprof_symbols::views::{self, Direction, Filter};
use kprof_symbols::{Capture, Symbolizer};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables for a terminal (opreport-like).
    Text,
    /// Versioned JSON (docs/json-schema.md), for CI gates.
    Json,
    /// One self-contained HTML file.
    Html,
    /// Flamegraph SVG.
    Svg,
    /// Collapsed stacks (`a;b;c N`), for flamegraph tools.
    Collapsed,
    /// Gzipped pprof profile.proto (Pyroscope, Parca, `go tool pprof`).
    Pprof,
    /// Firefox Profiler processed-format JSON (profiler.firefox.com, "Load a profile from
    /// file"): thread and CPU tracks over time, markers, a counter per hardware event;
    /// gzipped when the -o file ends in .gz.
    Firefox,
}

/// Arguments of `kprofctl report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A capture: an agent archive (.kprof.tar.gz) or a bare perf.data (also `perf record
    /// -z` and pipe mode); `-` reads it from standard input.
    #[arg(value_name = "CAPTURE")]
    pub capture: PathBuf,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Only samples whose leaf is in this image (`vmlinux`, `mychardrv.ko`, `busybox`).
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
    /// Only these events (comma-separated or repeated), in this column order.
    #[arg(long, value_name = "E", value_delimiter = ',')]
    pub event: Vec<String>,
    /// Add a column A/B of two events' counts (each sample weighs its period), e.g.
    /// L1-dcache-load-misses/L1-dcache-loads.
    #[arg(long, value_name = "A/B")]
    pub ratio: Option<String>,
    /// Only samples in the kernel and modules.
    #[arg(long, conflicts_with = "user")]
    pub kernel: bool,
    /// Only samples in user space.
    #[arg(long)]
    pub user: bool,
    /// Only threads with this command name.
    #[arg(long, value_name = "C")]
    pub comm: Option<String>,
    /// Only this process (or thread) id.
    #[arg(long, value_name = "P")]
    pub pid: Option<i32>,
    /// Leave out the CPUs' idle loop (pid 0, `swapper`).
    #[arg(long)]
    pub no_idle: bool,
    /// Only samples taken in this window of seconds since capture start, START included,
    /// END not (`1.5..3`, `..2`, `2..`; down to ns). Applies to every view and format.
    /// A bound may be a mark's text instead (the first mark with exactly that text: `--time
    /// 'frame 12 start'..'frame 12 end'`), and `--time NAME` is the first span NAME (from
    /// `kprof_mark_begin("NAME")` to the same thread's `kprof_mark_end`).
    #[arg(long, value_name = "START..END")]
    pub time: Option<TimeSpec>,
    /// `--time` resolved against the capture's marks.
    #[arg(skip)]
    pub window: Option<TimeRange>,
    /// List the capture's marks (`record --markers` lines, `-e SUBSYS:EVENT` tracepoints with
    /// their fields) in time order, in the `--time` window, of the threads `--pid`/`--comm`
    /// pick: time, CPU, thread, event, text.
    #[arg(long, group = "view", conflicts_with_all = ["off_cpu", "ratio"])]
    pub markers: bool,
    /// Who calls FUNC, as a tree with shares (FUNC or IMAGE:FUNC).
    #[arg(long, value_name = "FUNC", group = "view")]
    pub callers: Option<String>,
    /// What FUNC calls, as a tree with shares.
    #[arg(long, value_name = "FUNC", group = "view")]
    pub callees: Option<String>,
    /// Source lines and disassembly of FUNC with samples per line and instruction.
    #[arg(long, value_name = "FUNC", group = "view")]
    pub annotate: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Off-CPU time instead of on-CPU samples: where threads blocked (switched out sleeping,
    /// S, or uninterruptible, D) and for how long, from a capture recorded with `--off-cpu`.
    #[arg(long, conflicts_with_all = ["callers", "callees", "annotate", "ratio"])]
    pub off_cpu: bool,
    /// Function latency and lock waits instead of samples: per function timed with
    /// `run --latency`, its calls' count, percentiles, log2 histogram and slowest calls with
    /// their call paths; per lock and per waiting caller, the waits `run --contention`
    /// recorded (docs/latency.md). Text or JSON.
    #[arg(long, visible_alias = "contention", group = "view", conflicts_with_all = ["off_cpu", "ratio", "markers"])]
    pub latency: bool,
    /// Slowest calls listed per timed function (`--latency`).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub slowest: usize,
    /// Rows of the functions table in text output (0 = all).
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub limit: usize,
}

/// A symbolized capture with what produced it.
pub struct Loaded {
    pub profile: Profile,
    pub symbolizer: Symbolizer,
    pub prefixes: Vec<(String, String)>,
}

/// The on-CPU profile of a capture with its image warnings, as `diff` and `compare` put
/// whole captures side by side; [`load`]'s errors name the capture.
pub fn load_on_cpu(capture: &Path, symbols: &SymbolArgs) -> anyhow::Result<Profile> {
    let mut p = kprof_symbols::off_cpu::on_cpu(load(capture, symbols)?.profile);
    symbols.add_image_warnings(&mut p);
    Ok(p)
}

/// Symbolizes a capture, with progress bars on a terminal.
pub fn load(capture: &Path, symbols: &SymbolArgs) -> anyhow::Result<Loaded> {
    load_with(capture, symbols, true)
}

/// [`load`], keeping each sample's record (`Profile::samples`) only when `sample_records`:
/// without them memory follows the distinct stacks, not the sample count.
fn load_with(capture: &Path, symbols: &SymbolArgs, sample_records: bool) -> anyhow::Result<Loaded> {
    let opts = kprof_symbols::Options {
        skip_sample_records: !sample_records,
        ..symbols.options()?
    };
    let prefixes = opts.source_prefix.clone();
    let bar = progress::bar(0, "", Counting::Percent);
    let mut on_progress = |p: kprof_symbols::Progress| match p {
        kprof_symbols::Progress::Index(kprof_symbols::index::Progress::Walked(n)) => {
            bar.set_message(format!("indexing symbol paths: {n} files"));
            bar.tick();
        }
        kprof_symbols::Progress::Index(kprof_symbols::index::Progress::Read { done, total }) => {
            bar.set_length(total);
            bar.set_position(done);
            bar.set_message("reading build-ids");
        }
        kprof_symbols::Progress::Samples { bytes, total } => {
            bar.set_length(total);
            bar.set_position(bytes);
            bar.set_message("symbolizing samples");
        }
    };
    let mut symbolizer = Symbolizer::new(opts, &mut on_progress)?;
    // `-` is standard input (`ssh board perf record -o - … | kprofctl report -`), spooled
    // to a temporary file since a pipe cannot be read twice, at most KPROF_MAX_INPUT_SIZE.
    let cap = if capture == Path::new("-") {
        Capture::from_reader(Path::new("<stdin>"), std::io::stdin().lock())?
    } else {
        Capture::open(capture)?
    };
    let mut profile = symbolizer.symbolize(&cap, &mut on_progress)?;
    bar.finish_and_clear();
    if let Some(m) = &cap.manifest {
        for (i, w) in capture_warnings(m).into_iter().enumerate() {
            profile.warnings.insert(i, w);
        }
    }
    Ok(Loaded {
        profile,
        symbolizer,
        prefixes,
    })
}

/// What the user must know of how the board recorded the capture: cut short by a write
/// error (manifest `truncated`), ring data dropped at corrupt headers (`ring_dropped`).
fn capture_warnings(m: &kprof_capture::Manifest) -> Vec<String> {
    let mut out = Vec::new();
    if m.truncated {
        let t = m.truncation.as_ref();
        let lost = match (t.and_then(|t| t.lost_records), t.and_then(|t| t.lost_bytes)) {
            (Some(r), Some(b)) => format!(", {r} records ({b} bytes) lost"),
            _ => String::new(),
        };
        out.push(format!(
            "the capture is TRUNCATED: writing perf.data on the board failed ({}){lost}; it shows only what was recorded until then",
            t.map_or("reason not recorded", |t| t.reason.as_str())
        ));
    }
    if let Some(d) = m.ring_dropped.filter(|d| d.bytes > 0) {
        out.push(format!(
            "the board's agent dropped {} bytes of ring buffer data at {} corrupt record header(s): the samples in them are missing",
            d.bytes, d.batches
        ));
    }
    out
}

/// Event indices selected by `--event`, in the order given; all events when none.
fn select_events(p: &Profile, names: &[String]) -> anyhow::Result<Vec<usize>> {
    if names.is_empty() {
        return Ok((0..p.events.len()).collect());
    }
    names.iter().map(|n| event_index(p, n)).collect()
}

/// The event named `name`: its full name, or the name without perf's `/terms/` or
/// `:modifiers` (`cpu-clock` for `cpu-clock/period=100000/`) when only one event has it.
fn event_index(p: &Profile, name: &str) -> anyhow::Result<usize> {
    let base = |n: &str| n.split(['/', ':']).next().unwrap_or(n).to_string();
    let by_base = || {
        let mut found = p
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| base(&e.name) == name);
        match (found.next(), found.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    };
    p.events
        .iter()
        .position(|e| e.name == name)
        .or_else(by_base)
        .with_context(|| {
            format!(
                "event {name:?} is not in the capture; it has: {}",
                p.events
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// The two events of `--ratio A/B`. Event names may hold `/` themselves (perf's
/// `cpu-clock/period=100000/`): the first split where both sides name an event wins.
fn ratio_events(p: &Profile, r: &str) -> anyhow::Result<(usize, usize)> {
    let splits: Vec<(&str, &str)> = r
        .match_indices('/')
        .map(|(i, _)| (&r[..i], &r[i + 1..]))
        .collect();
    if splits.is_empty() {
        anyhow::bail!("--ratio {r:?}: expected A/B");
    }
    for (a, b) in &splits {
        if let (Ok(a), Ok(b)) = (event_index(p, a), event_index(p, b)) {
            return Ok((a, b));
        }
    }
    // No split names two events: the error of the plainest one says which is missing.
    let (a, b) = splits[0];
    Ok((event_index(p, a)?, event_index(p, b)?))
}

fn rewrite(prefixes: &[(String, String)], f: &str) -> String {
    for (old, new) in prefixes {
        if let Some(rest) = f.strip_prefix(old.as_str()) {
            return format!("{new}{rest}");
        }
    }
    f.to_string()
}

/// Annotates the function named `name` (or IMAGE:NAME) for every event.
pub fn annotate_all(l: &Loaded, filter: &Filter, name: &str) -> anyhow::Result<Vec<Annotation>> {
    let p = &l.profile;
    let found = views::find_functions(p, name);
    if found.is_empty() {
        anyhow::bail!("no function {name:?} in the samples (use the name as the functions view shows it, or IMAGE:NAME)");
    }
    // The one with most self samples when a name exists in several images.
    let rows = views::functions(p, filter);
    let f = rows
        .iter()
        .find(|r| found.contains(&r.function))
        .map(|r| r.function)
        .unwrap_or(found[0]);
    let file = l.symbolizer.symbol_file(p.functions[f].image);
    let rw = |s: &str| rewrite(&l.prefixes, s);
    Ok((0..p.events.len())
        .map(|e| kprof_symbols::annotate::annotate(p, filter, f, e, file, &rw, &l.symbolizer))
        .collect())
}

pub fn run(mut args: ReportArgs) -> anyhow::Result<()> {
    let mut l = load_with(&args.capture, &args.symbols, needs_sample_records(&args))?;
    args.window = args
        .time
        .as_ref()
        .map(|t| t.resolve(&l.profile))
        .transpose()?;
    if args.markers {
        return run_markers(&args, l);
    }
    if args.off_cpu {
        return run_off_cpu(&args, l);
    }
    if args.latency {
        return super::latency_report::run(&args, l.profile);
    }
    // On-CPU and off-CPU never mix: blocked ns are not samples.
    let had_off_cpu = l.profile.off_cpu.is_some();
    let blocked = blocked_spans(&args, &l.profile);
    l.profile = kprof_symbols::off_cpu::on_cpu(l.profile);
    if had_off_cpu && l.profile.events.is_empty() {
        anyhow::bail!(
            "{}: the capture has only context switches; use `kprofctl report --off-cpu`",
            args.capture.display()
        );
    }
    let timed = l.profile.latency.is_some() || l.profile.contention.is_some();
    if l.profile.events.is_empty() && timed && args.format != Format::Html {
        anyhow::bail!(
            "{}: the capture has no samples, only timed calls or lock waits: `kprofctl report --latency` shows them (and --format html on the timeline)",
            args.capture.display()
        );
    }
    if l.profile.events.is_empty() && !render::marks::listed(&l.profile).is_empty() {
        anyhow::bail!(
            "{}: the capture has only marks (tracepoints), no sampling event; `kprofctl report --markers` lists them",
            args.capture.display()
        );
    }
    let events = select_events(&l.profile, &args.event)?;
    let ratio = selected_ratio(&l.profile, &events, args.ratio.as_deref())?;
    let projected = project(&args, l, &events)?;
    let mut out = output(&args)?;
    match args.format {
        Format::Text | Format::Json => write_text_or_json(&args, &projected, ratio, &mut out)?,
        Format::Html => write_html(&args, &projected, ratio, blocked, &mut out)?,
        Format::Svg => render::flamegraph::write_svg(&projected.profile, &mut out)?,
        Format::Collapsed => render::collapsed::write(&projected.profile, &mut out)?,
        Format::Pprof => render::pprof::write(&projected.profile, &mut out)?,
        // The profiler opens gzipped files as they are.
        Format::Firefox
            if args
                .output
                .as_ref()
                .is_some_and(|o| o.extension() == Some("gz".as_ref())) =>
        {
            render::firefox::write_gzip(&projected.profile, &mut out)?
        }
        Format::Firefox => render::firefox::write(&projected.profile, &mut out)?,
    }
    out.flush().context("writing the report")?;
    Ok(())
}

/// Whether the report shows anything per sample: a `--time` window, the marks listing (counts
/// per window), the off-CPU pairing, or a timeline (HTML, Firefox). The other views are
/// computed from the merged stacks alone.
fn needs_sample_records(args: &ReportArgs) -> bool {
    args.time.is_some()
        || args.markers
        || args.off_cpu
        || matches!(args.format, Format::Html | Format::Firefox)
}

/// The switch-outs the HTML timeline draws on the thread tracks: those in the `--time`
/// window, as `report --off-cpu --time` counts them; none for the other formats.
fn blocked_spans(args: &ReportArgs, p: &Profile) -> Vec<render::html::blocked::Span> {
    match args.format {
        Format::Html => render::html::blocked::spans(p)
            .into_iter()
            .filter(|s| {
                args.window.is_none_or(|t| {
                    t.start.is_none_or(|a| s.start >= a) && t.end.is_none_or(|b| s.start < b)
                })
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `--ratio A/B` as positions among the selected `events`.
fn selected_ratio(
    p: &Profile,
    events: &[usize],
    ratio: Option<&str>,
) -> anyhow::Result<Option<(usize, usize)>> {
    let Some(r) = ratio else {
        return Ok(None);
    };
    let (a, b) = ratio_events(p, r)?;
    let pa = events.iter().position(|e| *e == a);
    let pb = events.iter().position(|e| *e == b);
    match (pa, pb) {
        (Some(a), Some(b)) => Ok(Some((a, b))),
        _ => anyhow::bail!("--ratio {r}: both events must be among the selected --event"),
    }
}

/// The sample filter of `--image`, `--kernel`, `--user`, `--comm`, `--pid`, `--no-idle`.
fn filter_of(args: &ReportArgs) -> Filter {
    Filter {
        image: args.image.clone(),
        kernel: args.kernel,
        user: args.user,
        comm: args.comm.clone(),
        pid: args.pid,
        hide_idle: args.no_idle,
    }
}

/// The profile cut to the `--time` window, the filters and the selected `events`, its
/// warnings shown; an error when nothing is left that says which of those emptied it.
fn project(args: &ReportArgs, l: Loaded, events: &[usize]) -> anyhow::Result<Loaded> {
    let filter = filter_of(args);
    let had_samples = !l.profile.stacks.is_empty();
    let windowed = match args.window {
        Some(t) => views::into_time_window(l.profile, t.start, t.end),
        None => l.profile,
    };
    let mut projected = Loaded {
        profile: views::select_events(views::filtered(windowed, &filter), events),
        symbolizer: l.symbolizer,
        prefixes: l.prefixes,
    };
    args.symbols.add_image_warnings(&mut projected.profile);
    let p = &projected.profile;
    for w in &p.warnings {
        crate::term::warning(w);
    }
    if p.stacks.is_empty() {
        if !had_samples {
            anyhow::bail!("{}: the capture has no samples", args.capture.display());
        }
        if let Some(w) = &p.meta.window {
            anyhow::bail!(
                "no samples match the filters (--time/--image/--kernel/--user/--comm/--pid/--event): the --time window is {}, the capture lasts {:.3} s from its start",
                w.describe(),
                p.meta.duration_ns as f64 / 1e9
            );
        }
        anyhow::bail!(
            "no samples match the filters (--image/--kernel/--user/--comm/--pid/--event)"
        );
    }
    Ok(projected)
}

/// `-o FILE` (created private) or standard output, buffered.
pub(super) fn output(args: &ReportArgs) -> anyhow::Result<Box<dyn Write>> {
    Ok(match &args.output {
        Some(f) => Box::new(std::io::BufWriter::new(crate::files::create_private(f)?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    })
}

/// `--limit`, where 0 means every row.
fn row_limit(args: &ReportArgs) -> usize {
    if args.limit == 0 {
        usize::MAX
    } else {
        args.limit
    }
}

/// The text and JSON views: `--callers`, `--callees`, `--annotate`, or the functions table.
fn write_text_or_json(
    args: &ReportArgs,
    projected: &Loaded,
    ratio: Option<(usize, usize)>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let p = &projected.profile;
    let json = args.format == Format::Json;
    let all = Filter::default();
    let tree_view = match (&args.callers, &args.callees) {
        (Some(f), _) => Some((f, Direction::Callers)),
        (None, Some(f)) => Some((f, Direction::Callees)),
        (None, None) => None,
    };
    if let Some((name, dir)) = tree_view {
        let targets = views::find_functions(p, name);
        if targets.is_empty() {
            anyhow::bail!("no function {name:?} in the samples");
        }
        let t = views::call_tree(p, &all, &targets, 0, dir);
        if json {
            render::json::write_tree(p, &t, dir, out)?
        } else {
            render::text::write_tree(p, &t, dir, out)?
        }
    } else if let Some(f) = &args.annotate {
        let anns = annotate_all(projected, &all, f)?;
        if json {
            render::json::write_annotation(p, &anns, out)?
        } else {
            render::text::write_annotation(p, &anns, out)?
        }
    } else if json {
        render::json::write_functions(p, ratio, out)?
    } else {
        render::text::write_functions(p, &all, ratio, row_limit(args), out)?
    }
    Ok(())
}

/// The HTML report, annotating `--annotate` or else the hottest function.
fn write_html(
    args: &ReportArgs,
    projected: &Loaded,
    ratio: Option<(usize, usize)>,
    blocked: Vec<render::html::blocked::Span>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let p = &projected.profile;
    let target = match &args.annotate {
        Some(f) => Some(f.clone()),
        None => hottest_function(p),
    };
    let anns = match target {
        Some(f) => annotate_all(projected, &Filter::default(), &f)?,
        None => Vec::new(),
    };
    let options = render::html::Options {
        ratio,
        blocked,
        unit: None,
    };
    render::html::write_with(p, anns.first(), &options, out)?;
    Ok(())
}

/// `report --markers`: the marks in the `--time` window, after the header of the on-CPU
/// profile; a capture without samples still lists its marks.
fn run_markers(args: &ReportArgs, l: Loaded) -> anyhow::Result<()> {
    let mut p = kprof_symbols::off_cpu::on_cpu(l.profile);
    if let Some(t) = args.window {
        p = views::into_time_window(p, t.start, t.end);
    }
    // --pid and --comm pick the marking threads, as they pick the sampled ones.
    let named: std::collections::HashSet<(i32, i32)> = p
        .threads
        .iter()
        .filter(|t| args.comm.as_ref().is_some_and(|c| t.comm == *c))
        .map(|t| (t.pid, t.tid))
        .collect();
    p.meta.markers.retain(|m| match &m.kind {
        kprof_symbols::profile::MarkerKind::Mark(k) => {
            args.pid.is_none_or(|pid| k.pid == pid || k.tid == pid)
                && (args.comm.is_none() || named.contains(&(k.pid, k.tid)))
        }
        _ => true,
    });
    for w in &p.warnings {
        crate::term::warning(w);
    }
    if render::marks::listed(&p).is_empty() {
        let has_marks = p
            .meta
            .markers
            .iter()
            .any(|m| matches!(m.kind, kprof_symbols::profile::MarkerKind::Mark(_)));
        if !has_marks {
            anyhow::bail!(
                "{}: the capture has no marks (record them with `--markers`, or a tracepoint with `-e SUBSYS:EVENT`)",
                args.capture.display()
            );
        }
    }
    let mut out = output(args)?;
    match args.format {
        Format::Text => render::text::write_markers(&p, &mut out)?,
        Format::Json => render::json::write_markers(&p, &mut out)?,
        other => anyhow::bail!(
            "--markers lists marks as text or json; --format {} shows them on its own timeline without --markers",
            format!("{other:?}").to_lowercase()
        ),
    }
    out.flush().context("writing the report")?;
    Ok(())
}

/// `report --off-cpu`: the blocked time of a capture with context switches, in any format.
fn run_off_cpu(args: &ReportArgs, l: Loaded) -> anyhow::Result<()> {
    let Some(p) = kprof_symbols::off_cpu::off_cpu(l.profile) else {
        anyhow::bail!(
            "{}: the capture has no context switches (record it with `kprof-agent record --off-cpu`, `kprofctl run --off-cpu`, or `perf record -e sched:sched_switch -g`)",
            args.capture.display()
        );
    };
    if !args.event.is_empty() {
        anyhow::bail!(
            "--event does not apply to --off-cpu (its events are the task states S and D)"
        );
    }
    let filter = filter_of(args);
    let p = match args.window {
        Some(t) => views::into_time_window(p, t.start, t.end),
        None => p,
    };
    let p = views::filtered(p, &filter);
    let off = p.off_cpu.as_ref().expect("off_cpu keeps its facts");
    if off.switches == 0 {
        anyhow::bail!(
            "{}: the capture recorded context switches but none was read: no off-CPU answer (not \"no blocking\")",
            args.capture.display()
        );
    }
    if p.stacks.iter().all(|s| s.counts.iter().all(|c| *c == 0)) {
        anyhow::bail!(
            "no thread blocked (S or D) in what the filters keep (--time/--image/--kernel/--user/--comm/--pid) among {} context switches",
            off.switches
        );
    }
    let mut out = output(args)?;
    let limit = row_limit(args);
    use kprof_symbols::off_cpu::merged;
    match args.format {
        Format::Text => render::off_cpu::write_text(&p, limit, &mut out)?,
        Format::Json => render::off_cpu::write_json(&p, &mut out)?,
        Format::Svg => render::flamegraph::write_svg(&merged(&p, true), &mut out)?,
        Format::Collapsed => render::collapsed::write(&merged(&p, true), &mut out)?,
        Format::Pprof => render::pprof::write(&merged(&p, false), &mut out)?,
        Format::Html => {
            let options = render::html::Options {
                ratio: None,
                blocked: render::html::blocked::spans(&p),
                unit: Some("blocked ns"),
            };
            render::html::write_with(&merged(&p, true), None, &options, &mut out)?
        }
        Format::Firefox => render::firefox::write(&merged(&p, false), &mut out)?,
    }
    out.flush().context("writing the report")?;
    Ok(())
}

/// `image:name` of the function with most self samples.
fn hottest_function(p: &Profile) -> Option<String> {
    let rows = views::functions(p, &Filter::default());
    let f = &p.functions[rows.first()?.function];
    Some(format!("{}:{}", p.images[f.image].name, f.name.as_deref()?))
}

/// After `kprofctl fetch`: symbol warnings, the top functions, and `<capture>.html`.
pub fn summarize_fetched(capture: &Path, symbols: &SymbolArgs) -> anyhow::Result<()> {
    let mut l = load(capture, symbols)?;
    if l.profile.off_cpu.is_some() {
        eprintln!(
            "kprofctl: the capture has context switches: `kprofctl report --off-cpu {}` shows where threads blocked",
            capture.display()
        );
    }
    l.profile = kprof_symbols::off_cpu::on_cpu(l.profile);
    symbols.add_image_warnings(&mut l.profile);
    let p = &l.profile;
    let timed = p.latency.is_some() || p.contention.is_some();
    if p.stacks.is_empty() && !timed {
        warn_no_samples(capture, &p.warnings);
        return Ok(());
    }
    for w in &p.warnings {
        crate::term::warning(w);
    }
    let mut stdout = std::io::stdout().lock();
    if timed {
        render::latency::write_text(p, 3, &mut stdout)?;
        writeln!(
            stdout,
            "(`kprofctl report --latency {}` lists more of the slowest calls)\n",
            kprof_report::escape::controls(&capture.display().to_string())
        )?;
    }
    if !p.events.is_empty() {
        write_busy_functions(p, capture, &mut stdout)?;
    }
    let html = PathBuf::from(format!("{}.html", capture.display()));
    let anns = match hottest_function(p) {
        Some(f) => annotate_all(&l, &Filter::default(), &f)?,
        None => Vec::new(),
    };
    // Named by default, in a directory kprofctl did not make this run: a new file renamed
    // into place, never written through a link planted as `ID.kprof.tar.gz.html`.
    let mut new = crate::files::NewFile::create(&html)?;
    let mut file = std::io::BufWriter::new(new.file());
    render::html::write(p, anns.first(), &mut file)?;
    file.flush()
        .with_context(|| format!("writing {}", html.display()))?;
    drop(file);
    new.commit()?;
    writeln!(
        stdout,
        "HTML report: {}",
        kprof_report::escape::controls(&html.display().to_string())
    )?;
    Ok(())
}

/// The fetched capture's top functions, without the idle loop when the board was also busy:
/// the summary is about what it was busy with (the HTML and `kprofctl report` keep it).
fn write_busy_functions(p: &Profile, capture: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let busy = Filter {
        hide_idle: true,
        ..Filter::default()
    };
    let busy_stacks = p.stacks.iter().filter(|s| busy.keeps(p, s)).count();
    if busy_stacks == 0 || busy_stacks == p.stacks.len() {
        render::text::write_functions(p, &Filter::default(), None, 10, out)?;
    } else {
        render::text::write_functions(p, &busy, None, 10, out)?;
        writeln!(
            out,
            "(idle loop left out of this summary; `kprofctl report {}` shows it)",
            kprof_report::escape::controls(&capture.display().to_string())
        )?;
    }
    Ok(())
}

/// A capture without samples is what the board recorded, not a failed download: one warning
/// line names it with the events' reasons; the other warnings follow as they are.
fn warn_no_samples(capture: &Path, warnings: &[String]) {
    let is_event = |w: &String| w.starts_with("event ") && w.contains(" has no samples: ");
    let reasons: Vec<&str> = warnings
        .iter()
        .filter(|w| is_event(w))
        .map(String::as_str)
        .collect();
    let why = if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join("; "))
    };
    crate::term::warning(format_args!(
        "{}: the capture has no samples{why}",
        capture.display()
    ));
    // The symbolizer's own "the capture has no samples" is the line above.
    let rest = warnings
        .iter()
        .filter(|w| !is_event(w) && w.as_str() != "the capture has no samples");
    for w in rest {
        crate::term::warning(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(extra: serde_json::Value) -> kprof_capture::Manifest {
        let mut m = serde_json::json!({
            "schema": kprof_capture::MANIFEST_SCHEMA, "version": 1, "capture_id": "c",
            "agent_version": "t", "uname": {"sysname": "Linux", "nodename": "b",
            "release": "6.1", "version": "#1", "machine": "aarch64"},
            "events": [], "cpus": [0], "callchain": false, "start_time_ns": 1,
            "stop_time_ns": 2, "stop_reason": "write-error", "kernel": {"release": "6.1"},
            "modules": [], "perf_data": {"file": "perf.data", "size": 0, "sha256": ""}
        });
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        kprof_capture::Manifest::from_json(m.to_string().as_bytes()).unwrap()
    }

    /// A truncated capture is announced with the board's error and what was lost, ring data
    /// dropped at corrupt headers with its size; a complete capture gets neither.
    #[test]
    fn warn_manifest_truncated_and_ring_dropped() {
        let w = capture_warnings(&manifest(serde_json::json!({
            "truncated": true,
            "truncation": {"reason": "No space left on device (os error 28)",
                "lost_bytes": 4096, "lost_records": 12},
            "ring_dropped": {"batches": 2, "bytes": 640}
        })));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("the capture is TRUNCATED")
                && w[0].contains("No space left on device (os error 28)")
                && w[0].contains("12 records (4096 bytes) lost"),
            "{}",
            w[0]
        );
        assert!(
            w[1].contains("640 bytes") && w[1].contains("2 corrupt"),
            "{}",
            w[1]
        );
        assert!(capture_warnings(&manifest(serde_json::json!({}))).is_empty());
    }
}
