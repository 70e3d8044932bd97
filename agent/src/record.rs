//! `kprof-agent record`: open the events, synthesize the running system's state, stream the
//! per-CPU ring buffers into perf.data until told to stop, then seal the capture archive.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
#[allow(unused_imports)] // in the prelude since 1.80; the MSRV is 1.75
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kprof_capture::manifest::{self, Command, EventRecord, FileDigest, Manifest};

use crate::archive::{self, Member};
use crate::cli::RecordOpts;
use crate::events::{self, EventSpec};
use crate::perfdata::{self, BuildIdEntry, FileAttr, Writer};
use crate::procfs;
use crate::records::{self, Count};
use crate::ring::Ring;
use crate::sys::{self, flag, PerfEventAttr};
use crate::{notes, timefmt, Error};

/// Removes the half-written capture unless told to keep it.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// An event after opening: what was asked, what the kernel accepted, its fds.
struct Opened {
    spec: EventSpec,
    requested: Option<String>,
    attr: PerfEventAttr,
    fallback: Option<(String, String)>,
    fds: Vec<(u32, OwnedFd)>,
    ids: Vec<u64>,
}

/// Why sampling stopped, as the manifest spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    CommandExited,
    Duration,
    Signal(i32),
    TargetExited,
}

impl Stop {
    fn as_str(self) -> &'static str {
        match self {
            Stop::CommandExited => "command-exited",
            Stop::Duration => "duration",
            Stop::Signal(_) => "signal",
            Stop::TargetExited => "target-exited",
        }
    }
}

/// Per-event counters kept while streaming.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    samples: u64,
    lost: u64,
    throttled: u64,
}

/// Receives every record: counts it, notes mapped files, writes it.
struct Sink {
    w: Writer,
    id_event: HashMap<u64, usize>,
    counts: Vec<Counters>,
    files: BTreeSet<Vec<u8>>,
}

impl Sink {
    fn event_of(&self, id: u64) -> usize {
        self.id_event.get(&id).copied().unwrap_or(0)
    }

    fn handle(&mut self, rec: &[u8]) -> io::Result<()> {
        match records::classify(rec) {
            Count::Sample { id } => {
                let e = self.event_of(id);
                self.counts[e].samples += 1;
            }
            Count::Lost { id, lost } => {
                let e = self.event_of(id);
                self.counts[e].lost += lost;
            }
            Count::Throttle { id } => {
                let e = self.event_of(id);
                self.counts[e].throttled += 1;
            }
            Count::Other => {
                if let Some((_, name)) = records::mmap2_filename(rec) {
                    if name.first() == Some(&b'/') && !self.files.contains(name) {
                        self.files.insert(name.to_vec());
                    }
                }
            }
        }
        self.w.write_record(rec)
    }
}

/// The workload: forked at once, held before exec until the events are live.
struct Workload {
    pid: i32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    status: Option<i32>,
}

impl Workload {
    fn spawn(argv: &[String], path: &Path, old_mask: &libc::sigset_t) -> Result<Workload, Error> {
        let prog = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::Usage(format!("cannot run `{}`: NUL in name", argv[0])))?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| Error::Usage("command arguments must not contain NUL bytes".into()))?;
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (go_r, go_w) = pipe().map_err(|e| Error::io("pipe", e))?;
        let (err_r, err_w) = pipe().map_err(|e| Error::io("pipe", e))?;
        // SAFETY: the child only calls async-signal-safe functions (read, sigprocmask, execv,
        // write, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::io("fork", io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: see above; all pointers stay valid in the child's copy of memory.
            unsafe {
                let mut b = 0u8;
                if libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
                    libc::_exit(127);
                }
                libc::sigprocmask(libc::SIG_SETMASK, old_mask, std::ptr::null_mut());
                libc::execv(prog.as_ptr(), ptrs.as_ptr());
                let errno = *libc::__errno_location();
                libc::write(
                    err_w.as_raw_fd(),
                    &errno as *const i32 as *const libc::c_void,
                    4,
                );
                libc::_exit(127);
            }
        }
        drop(go_r);
        drop(err_w);
        Ok(Workload {
            pid,
            go: Some(go_w),
            exec_err: err_r,
            status: None,
        })
    }

    /// Lets the child exec; returns the exec error if it could not.
    fn release(&mut self) -> io::Result<()> {
        if let Some(go) = self.go.take() {
            let b = [1u8];
            // SAFETY: writing one byte from a live buffer to a pipe we own.
            unsafe { libc::write(go.as_raw_fd(), b.as_ptr() as *const libc::c_void, 1) };
        }
        let mut errno = [0u8; 4];
        // SAFETY: reading into a live 4-byte buffer from a pipe we own; EOF means exec worked.
        let n = unsafe {
            libc::read(
                self.exec_err.as_raw_fd(),
                errno.as_mut_ptr() as *mut libc::c_void,
                4,
            )
        };
        if n == 4 {
            self.wait(true);
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
        }
        Ok(())
    }

    /// Reaps the child if it ended (or waits for it when `block`). True once it has ended.
    fn wait(&mut self, block: bool) -> bool {
        if self.status.is_some() {
            return true;
        }
        let mut st = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(self.pid, &mut st, if block { 0 } else { libc::WNOHANG }) };
        if r == self.pid {
            self.status = Some(st);
            true
        } else {
            r < 0
        }
    }

    /// Ends a workload still running when the capture stops: SIGTERM, then SIGKILL after 2 s.
    fn terminate(&mut self) {
        if self.wait(false) {
            return;
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if self.wait(false) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.wait(true);
    }

    fn manifest(&self, argv: &[String]) -> Command {
        let (exit_code, signal) = match self.status {
            Some(st) if libc::WIFEXITED(st) => (Some(libc::WEXITSTATUS(st)), None),
            Some(st) if libc::WIFSIGNALED(st) => (None, Some(libc::WTERMSIG(st))),
            _ => (None, None),
        };
        Command {
            argv: argv.to_vec(),
            pid: Some(self.pid),
            exit_code,
            signal,
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if self.go.take().is_some() {
            // Never released: closing the pipe makes it exit without running the command.
            self.wait(true);
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Finds the program as execvp would, so a missing command is reported before sampling.
fn resolve_command(cmd: &str) -> Result<PathBuf, Error> {
    let check = |p: &Path| -> io::Result<()> {
        let c = CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        let md = fs::metadata(p)?;
        if md.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        // SAFETY: access(2) on a valid NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    if cmd.is_empty() {
        return Err(Error::Usage("empty command".into()));
    }
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return check(&p)
            .map(|()| p)
            .map_err(|e| Error::Other(format!("cannot run `{cmd}`: {e}")));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(cmd);
        if check(&p).is_ok() {
            return Ok(p);
        }
    }
    Err(Error::Other(format!(
        "cannot run `{cmd}`: command not found in PATH"
    )))
}

fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct; failure is harmless.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn build_attr(
    spec: &EventSpec,
    tracking: bool,
    o: &RecordOpts,
    freq: Option<u64>,
    period: Option<u64>,
    watermark: u32,
) -> PerfEventAttr {
    let mut a = PerfEventAttr {
        type_: spec.attr_type,
        size: sys::ATTR_SIZE,
        config: spec.config,
        sample_type: sys::SAMPLE_IDENTIFIER
            | sys::SAMPLE_IP
            | sys::SAMPLE_TID
            | sys::SAMPLE_TIME
            | sys::SAMPLE_CPU
            | sys::SAMPLE_PERIOD
            | if o.callchain {
                sys::SAMPLE_CALLCHAIN
            } else {
                0
            },
        read_format: sys::FORMAT_ID,
        flags: flag::DISABLED | flag::SAMPLE_ID_ALL | flag::WATERMARK,
        wakeup: watermark,
        ..Default::default()
    };
    if let Some(p) = period {
        a.sample_period_or_freq = p;
    } else {
        a.sample_period_or_freq = freq.unwrap_or(crate::cli::DEFAULT_FREQ);
        a.flags |= flag::FREQ;
    }
    if o.pid.is_some() {
        a.flags |= flag::INHERIT;
    }
    if spec.exclude_user {
        a.flags |= flag::EXCLUDE_USER;
    }
    if spec.exclude_kernel {
        a.flags |= flag::EXCLUDE_KERNEL | flag::EXCLUDE_HV;
    }
    if tracking {
        // Only the first event reports process lifecycle, or every record would be doubled.
        a.flags |= flag::MMAP | flag::COMM | flag::TASK | flag::MMAP2 | flag::COMM_EXEC;
    }
    a
}

/// Threads of the target, or `-1` (all tasks) for system-wide sampling.
fn targets(o: &RecordOpts) -> Result<Vec<i32>, Error> {
    let Some(pid) = o.pid else {
        return Ok(vec![-1]);
    };
    let dir = fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| Error::io(format!("no process with pid {pid}"), e))?;
    let mut tids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

fn is_missing_event(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV)
    )
}

/// Opens one event on every (thread, CPU).
fn open_event(
    attr: &PerfEventAttr,
    tids: &[i32],
    cpus: &[u32],
    name: &str,
) -> Result<Vec<(u32, OwnedFd)>, Error> {
    let mut fds = Vec::new();
    for &tid in tids {
        for &cpu in cpus {
            match sys::perf_event_open(attr, tid, cpu as i32) {
                Ok(fd) => fds.push((cpu, fd)),
                // A thread of `-p` may exit while we open: not an error.
                Err(e) if tid > 0 && e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(source) => {
                    return Err(Error::Event {
                        event: name.to_string(),
                        source,
                    })
                }
            }
        }
    }
    if fds.is_empty() {
        return Err(Error::Event {
            event: name.to_string(),
            source: io::Error::from_raw_os_error(libc::ESRCH),
        });
    }
    Ok(fds)
}

/// Copies /proc/kallsyms into the capture, keeping the symbols the kernel map needs.
fn snapshot_kallsyms(dst: &Path) -> io::Result<(Option<u64>, Option<u64>)> {
    let src = BufReader::new(File::open("/proc/kallsyms")?);
    let mut out = io::BufWriter::new(File::create(dst)?);
    let (mut text, mut etext) = (None, None);
    for line in src.split(b'\n') {
        let line = line?;
        out.write_all(&line)?;
        out.write_all(b"\n")?;
        if text.is_none() || etext.is_none() {
            let s = String::from_utf8_lossy(&line);
            if let Some(a) = procfs::kallsyms_lookup(&s, "_text") {
                text = Some(a);
            } else if let Some(a) = procfs::kallsyms_lookup(&s, "_etext") {
                etext = Some(a);
            }
        }
    }
    out.flush()?;
    Ok((text.filter(|&a| a != 0), etext.filter(|&a| a != 0)))
}

/// COMM for every thread and MMAP2 for every executable file map of the running processes.
fn synthesize_processes(sink: &mut Sink, only: Option<i32>) -> io::Result<()> {
    let pids: Vec<i32> = match only {
        Some(p) => vec![p],
        None => fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
    };
    for pid in pids {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(comm) = fs::read_to_string(t.path().join("comm")) else {
                continue;
            };
            sink.w
                .write_record(&records::comm(pid, tid, comm.trim_end_matches('\n')))?;
        }
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for m in maps.lines().filter_map(procfs::parse_maps_line) {
            if !m.exec || m.path.is_empty() {
                continue;
            }
            sink.w.write_record(&records::mmap2(pid, &m))?;
            if m.path.starts_with('/') {
                sink.files.insert(m.path.as_bytes().to_vec());
            }
        }
    }
    Ok(())
}

fn signal_fd(set: &libc::sigset_t) -> io::Result<OwnedFd> {
    // SAFETY: signalfd with a valid, initialised sigset.
    let fd = unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads pending signals; returns the first terminating one.
fn read_signals(fd: &OwnedFd) -> Option<i32> {
    let mut found = None;
    loop {
        // SAFETY: signalfd_siginfo is plain data; read fills it or fails.
        let mut si: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let sz = size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading at most `sz` bytes into `si`.
        let n = unsafe { libc::read(fd.as_raw_fd(), &mut si as *mut _ as *mut libc::c_void, sz) };
        if n != sz as isize {
            return found;
        }
        let sig = si.ssi_signo as i32;
        if sig != libc::SIGCHLD && found.is_none() {
            found = Some(sig);
        }
    }
}

fn user_build_ids(files: &BTreeSet<Vec<u8>>) -> Vec<BuildIdEntry> {
    let mut out = Vec::new();
    for f in files {
        let name = String::from_utf8_lossy(f).into_owned();
        if name.ends_with(" (deleted)") {
            continue;
        }
        if let Ok(Some(bid)) = notes::elf_build_id(Path::new(&name)) {
            out.push(BuildIdEntry {
                misc: perfdata::MISC_USER,
                pid: perfdata::HOST_PID,
                build_id: bid,
                filename: name,
            });
        }
    }
    out
}

fn warn(msg: impl std::fmt::Display) {
    eprintln!("kprof-agent: {msg}");
}

/// Runs a capture and returns the absolute path of the archive.
pub fn run(o: &RecordOpts, agent_argv: &[String]) -> Result<PathBuf, Error> {
    raise_fd_limit();
    // Signals arrive through a signalfd so the poll loop sees them; the workload gets the
    // original mask back before exec. Blocked first thing: a Ctrl-C during setup then stops
    // the capture at its first poll instead of killing the agent half-way.
    // SAFETY: sigset_t is plain data initialised by sigemptyset/sigaddset below.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old_mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sigset pointers.
    unsafe {
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old_mask);
    }
    let sfd = signal_fd(&set).map_err(|e| Error::io("signalfd", e))?;
    let max_rate = sys::kernel_sysctl("perf_event_max_sample_rate").unwrap_or(i64::MAX) as u64;
    let check_freq = |f: u64, what: &str| -> Result<(), Error> {
        if f == 0 {
            return Err(Error::Usage(format!(
                "{what}: frequency must be greater than 0"
            )));
        }
        if f > max_rate {
            return Err(Error::Other(format!(
                "{what}: frequency {f} Hz is above kernel.perf_event_max_sample_rate ({max_rate} Hz)"
            )));
        }
        Ok(())
    };
    let global_freq = match (o.freq, o.period) {
        (Some(f), _) => {
            check_freq(f, "-F")?;
            Some(f)
        }
        (None, Some(_)) => None,
        (None, None) => Some(crate::cli::DEFAULT_FREQ.min(max_rate)),
    };
    for e in &o.events {
        if let Some(f) = e.freq {
            check_freq(f, &e.requested)?;
        }
    }
    let online = procfs::online_cpus()
        .map_err(|e| Error::io("cannot read /sys/devices/system/cpu/online", e))?;
    let cpus = match &o.cpus {
        None => online.clone(),
        Some(list) => {
            if let Some(c) = list.iter().find(|c| !online.contains(c)) {
                return Err(Error::Usage(format!(
                    "CPU {c} is not online (online: {online:?})"
                )));
            }
            list.clone()
        }
    };
    let tids = targets(o)?;
    let program = match o.command.first() {
        Some(cmd) => Some(resolve_command(cmd)?),
        None => None,
    };

    // Events.
    let page = sys::page_size();
    let watermark = ((o.mmap_pages * page) / 4).max(8) as u32;
    let specs: Vec<(EventSpec, Option<String>)> = if o.events.is_empty() {
        vec![(events::parse("cycles")?, None)]
    } else {
        o.events
            .iter()
            .map(|e| (e.clone(), Some(e.requested.clone())))
            .collect()
    };
    let mut opened: Vec<Opened> = Vec::new();
    // Printed once setup has succeeded, so a failing capture says one thing only.
    let mut notices: Vec<String> = Vec::new();
    for (i, (spec, requested)) in specs.into_iter().enumerate() {
        let freq = spec.freq.or(if spec.period.is_some() {
            None
        } else {
            global_freq
        });
        let period = spec
            .period
            .or(if spec.freq.is_some() { None } else { o.period });
        let attr = build_attr(&spec, i == 0, o, freq, period, watermark);
        match open_event(&attr, &tids, &cpus, &spec.requested) {
            Ok(fds) => {
                if requested.is_none() {
                    notices.push(format!("sampling `{}` (default event)", spec.name));
                }
                opened.push(Opened {
                    spec,
                    requested,
                    attr,
                    fallback: None,
                    fds,
                    ids: Vec::new(),
                });
            }
            Err(Error::Event { source, .. })
                if requested.is_none() && is_missing_event(&source) =>
            {
                let fb = events::parse("cpu-clock")?;
                let attr = build_attr(&fb, i == 0, o, freq, period, watermark);
                let fds = open_event(&attr, &tids, &cpus, "cpu-clock")?;
                notices.push(format!(
                    "no `{}` on this machine ({source}); sampling `cpu-clock` instead",
                    spec.name
                ));
                opened.push(Opened {
                    spec: fb,
                    requested: None,
                    attr,
                    fallback: Some((spec.name.clone(), source.to_string())),
                    fds,
                    ids: Vec::new(),
                });
            }
            Err(e) => return Err(e),
        }
    }
    for ev in &mut opened {
        for (_, fd) in &ev.fds {
            ev.ids.push(
                sys::event_id(fd.as_raw_fd()).map_err(|e| Error::io("PERF_EVENT_IOC_ID", e))?,
            );
        }
    }

    // One ring per CPU; every other event on that CPU is redirected into it.
    let mut rings: Vec<Ring> = Vec::new();
    let mut ring_cpu: Vec<u32> = Vec::new();
    let mut others: Vec<OwnedFd> = Vec::new();
    for ev in &mut opened {
        for (cpu, fd) in ev.fds.drain(..) {
            if let Some(k) = ring_cpu.iter().position(|&c| c == cpu) {
                sys::set_output(fd.as_raw_fd(), rings[k].fd().as_raw_fd()).map_err(|e| {
                    Error::io(format!("cannot share the ring buffer of CPU {cpu}"), e)
                })?;
                others.push(fd);
            } else {
                let ring = Ring::new(fd, o.mmap_pages).map_err(|e| {
                    Error::io(
                        format!(
                            "cannot map a {}-page ring buffer on CPU {cpu}",
                            o.mmap_pages
                        ),
                        e,
                    )
                })?;
                rings.push(ring);
                ring_cpu.push(cpu);
            }
        }
    }
    let all_fds: Vec<i32> = rings
        .iter()
        .map(|r| r.fd().as_raw_fd())
        .chain(others.iter().map(|f| f.as_raw_fd()))
        .collect();

    // The capture dir: created 0700; a hidden work dir inside proves it is writable.
    let start_ns = timefmt::now_ns();
    let id = timefmt::capture_id(start_ns);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&o.out_dir)
        .map_err(|e| {
            Error::io(
                format!("cannot create capture dir {}", o.out_dir.display()),
                e,
            )
        })?;
    let out_dir = fs::canonicalize(&o.out_dir)
        .map_err(|e| Error::io(format!("cannot use capture dir {}", o.out_dir.display()), e))?;
    let work_path = out_dir.join(format!(".{id}.partial"));
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&work_path)
        .map_err(|e| {
            Error::io(
                format!("cannot write to capture dir {}", out_dir.display()),
                e,
            )
        })?;
    let mut work = WorkDir {
        path: work_path,
        keep: false,
    };

    let mut workload = match &program {
        Some(p) => Some(Workload::spawn(&o.command, p, &old_mask)?),
        None => None,
    };

    // Kernel state, then perf.data.
    let kallsyms_path = work.path.join(kprof_capture::KALLSYMS);
    let (text, etext) = snapshot_kallsyms(&kallsyms_path)
        .map_err(|e| Error::io("cannot snapshot /proc/kallsyms", e))?;
    if text.is_none() {
        notices.push(format!(
            "/proc/kallsyms shows no addresses (kernel.kptr_restrict={}): kernel samples will not resolve to symbols",
            sys::kernel_sysctl("kptr_restrict").map_or("?".to_string(), |v| v.to_string())
        ));
    }
    let modules_text = fs::read_to_string("/proc/modules").unwrap_or_default();
    archive::write_private(
        &work.path.join(kprof_capture::MODULES),
        modules_text.as_bytes(),
    )
    .map_err(|e| Error::io("cannot write the modules snapshot", e))?;
    let sys_module = Path::new("/sys/module");
    let modules = procfs::modules_with_details(&modules_text, sys_module);
    let uname = procfs::uname();
    let kernel = procfs::kernel("", &uname.release);
    let kernel = manifest::Kernel {
        text_addr: text.map(manifest::hex_addr),
        ..kernel
    };

    let perf_path = work.path.join(kprof_capture::PERF_DATA);
    let file = File::create(&perf_path)
        .map_err(|e| Error::io(format!("cannot create {}", perf_path.display()), e))?;
    let file_attrs: Vec<FileAttr> = opened
        .iter()
        .map(|e| FileAttr {
            attr: e.attr,
            name: e.spec.name.clone(),
            ids: e.ids.clone(),
        })
        .collect();
    let writer =
        Writer::create(file, file_attrs).map_err(|e| Error::io("cannot write perf.data", e))?;
    let mut id_event = HashMap::new();
    for (i, e) in opened.iter().enumerate() {
        for id in &e.ids {
            id_event.insert(*id, i);
        }
    }
    let mut sink = Sink {
        w: writer,
        id_event,
        counts: vec![Counters::default(); opened.len()],
        files: BTreeSet::new(),
    };

    // Go: enable, then describe what already runs (perf's order: nothing falls in between).
    for &fd in &all_fds {
        sys::enable(fd).map_err(|e| Error::io("cannot enable sampling", e))?;
    }
    let start_ns = timefmt::now_ns().max(start_ns);
    let synth = (|| -> io::Result<()> {
        let kstart = text.unwrap_or(0);
        let next_module = procfs::parse_proc_modules(&modules_text)
            .iter()
            .map(|m| m.base)
            .filter(|&b| b > kstart)
            .min();
        let kend = etext
            .filter(|&e| e > kstart)
            .or(next_module)
            .unwrap_or(u64::MAX);
        sink.w.write_record(&records::kernel_mmap(
            kstart,
            kend - kstart,
            kstart,
            "[kernel.kallsyms]_text",
        ))?;
        for m in procfs::parse_proc_modules(&modules_text) {
            if m.base != 0 {
                sink.w.write_record(&records::kernel_mmap(
                    m.base,
                    m.size,
                    0,
                    &format!("[{}]", m.name),
                ))?;
            }
        }
        synthesize_processes(&mut sink, o.pid)
    })();
    synth.map_err(|e| Error::io("cannot write perf.data", e))?;
    if let Some(w) = workload.as_mut() {
        if let Err(e) = w.release() {
            return Err(Error::Other(format!("cannot run `{}`: {e}", o.command[0])));
        }
    }
    // From here on, a failure keeps what was captured.
    work.keep = true;
    for n in &notices {
        warn(n);
    }
    let names: Vec<&str> = opened.iter().map(|e| e.spec.name.as_str()).collect();
    warn(format_args!(
        "recording {} on CPUs {}{}",
        names.join(","),
        cpus.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        match (o.duration, o.pid, o.command.is_empty()) {
            (Some(_), _, _) | (_, _, false) => String::new(),
            (None, Some(pid), _) => format!(" until process {pid} exits or SIGINT/SIGTERM"),
            (None, None, true) => " until SIGINT/SIGTERM".to_string(),
        }
    ));

    let deadline = o.duration.map(|d| Instant::now() + d);
    let mut pfds: Vec<libc::pollfd> = rings
        .iter()
        .map(|r| libc::pollfd {
            fd: r.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    pfds.push(libc::pollfd {
        fd: sfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let io_err = |e: io::Error| {
        Error::io(
            format!(
                "writing {} failed (partial capture kept)",
                perf_path.display()
            ),
            e,
        )
    };
    let drain_all = |rings: &mut Vec<Ring>, sink: &mut Sink| -> io::Result<()> {
        let mut any = 0;
        for r in rings.iter_mut() {
            any += r.drain(|rec| sink.handle(rec))?;
        }
        if any > 0 {
            sink.w.write_record(&records::finished_round())?;
        }
        Ok(())
    };
    let stop = loop {
        let mut timeout = 500i32;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            timeout = timeout.min(left.as_millis() as i32);
        }
        // SAFETY: pfds is a live array of initialised pollfd structs.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break Stop::Signal(0);
        }
        // A per-task event whose task exited polls as HUP forever: stop polling it (its ring
        // is still drained every pass) so the loop does not spin.
        let n_rings = pfds.len() - 1;
        for p in &mut pfds[..n_rings] {
            if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                p.fd = -1;
            }
        }
        drain_all(&mut rings, &mut sink).map_err(io_err)?;
        if let Some(sig) = read_signals(&sfd) {
            break Stop::Signal(sig);
        }
        if let Some(w) = workload.as_mut() {
            if w.wait(false) {
                break Stop::CommandExited;
            }
        }
        if let Some(pid) = o.pid {
            if !procfs::process_running(pid) {
                break Stop::TargetExited;
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Stop::Duration;
        }
    };
    for &fd in &all_fds {
        let _ = sys::disable(fd);
    }
    let stop_ns = timefmt::now_ns();
    drain_all(&mut rings, &mut sink).map_err(io_err)?;
    if let Stop::Signal(sig) = stop {
        if sig != 0 {
            warn(format_args!("stopping on signal {sig}"));
        }
    }
    if let Some(w) = workload.as_mut() {
        w.terminate();
    }
    drop(rings);
    drop(others);

    // Build-ids: kernel, modules, every user ELF that was mapped.
    let mut build_ids = Vec::new();
    if let Some(bid) = &kernel
        .build_id
        .as_ref()
        .and_then(|_| procfs::kernel_build_id())
    {
        build_ids.push(BuildIdEntry {
            misc: perfdata::MISC_KERNEL,
            pid: perfdata::HOST_PID,
            build_id: bid.clone(),
            filename: "[kernel.kallsyms]".into(),
        });
    }
    for m in &modules {
        if let Some(bid) = procfs::module_build_id(sys_module, &m.name) {
            build_ids.push(BuildIdEntry {
                misc: perfdata::MISC_KERNEL,
                pid: perfdata::HOST_PID,
                build_id: bid,
                filename: format!("[{}]", m.name),
            });
        }
    }
    build_ids.extend(user_build_ids(&sink.files));
    // SAFETY: sysconf has no preconditions.
    let nr_conf = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
    let features = perfdata::Features {
        hostname: uname.nodename.clone(),
        osrelease: uname.release.clone(),
        version: format!("kprof-agent {}", crate::AGENT_VERSION),
        arch: uname.machine.clone(),
        nr_cpus_available: nr_conf.max(online.len() as u32),
        nr_cpus_online: online.len() as u32,
        cmdline: agent_argv.to_vec(),
        build_ids,
    };
    let Sink { w, counts, .. } = sink;
    let perf_size = w.finish(&features).map_err(io_err)?;
    let sha =
        archive::sha256_file(&perf_path).map_err(|e| Error::io("cannot hash perf.data", e))?;

    let events: Vec<EventRecord> = opened
        .iter()
        .zip(&counts)
        .map(|(e, c)| {
            let freq = e.attr.flags & flag::FREQ != 0;
            EventRecord {
                requested: e.requested.clone(),
                name: e.spec.name.clone(),
                attr_type: e.attr.type_,
                attr_config: e.attr.config,
                sample_period: (!freq).then_some(e.attr.sample_period_or_freq),
                sample_freq: freq.then_some(e.attr.sample_period_or_freq),
                fallback_from: e.fallback.as_ref().map(|f| f.0.clone()),
                fallback_reason: e.fallback.as_ref().map(|f| f.1.clone()),
                ids: e.ids.clone(),
                samples: c.samples,
                lost: c.lost,
                throttled: c.throttled,
            }
        })
        .collect();
    for e in &events {
        warn(format_args!(
            "{}: {} samples, {} lost, {} throttled",
            e.name, e.samples, e.lost, e.throttled
        ));
        if e.lost > 0 {
            warn(format_args!(
                "LOST {} samples of {}: the ring buffer overflowed (raise --mmap-pages, lower -F or drop -g)",
                e.lost, e.name
            ));
        }
        if e.throttled > 0 {
            warn(format_args!(
                "{} was throttled {} times by the kernel (kernel.perf_event_max_sample_rate)",
                e.name, e.throttled
            ));
        }
    }
    let command = workload.as_ref().map(|w| w.manifest(&o.command));
    if let Some(c) = &command {
        match (c.exit_code, c.signal) {
            (Some(0), _) => {}
            (Some(code), _) => warn(format_args!("command exited with status {code}")),
            (_, Some(sig)) => warn(format_args!("command killed by signal {sig}")),
            _ => {}
        }
    }
    let m = Manifest {
        schema: kprof_capture::MANIFEST_SCHEMA.into(),
        version: kprof_capture::MANIFEST_VERSION,
        capture_id: id.clone(),
        agent_version: crate::AGENT_VERSION.into(),
        uname,
        events,
        command,
        target_pid: o.pid,
        cpus: cpus.clone(),
        callchain: o.callchain,
        start_time_ns: start_ns,
        stop_time_ns: stop_ns,
        stop_reason: stop.as_str().into(),
        kernel,
        modules,
        perf_data: FileDigest {
            file: kprof_capture::PERF_DATA.into(),
            size: perf_size,
            sha256: sha,
        },
        sysctl: procfs::sysctls(),
        mmap_pages: Some(o.mmap_pages as u64),
    };
    let json = serde_json::to_vec_pretty(&m)
        .map_err(|e| Error::Other(format!("cannot encode manifest: {e}")))?;
    let modules_path = work.path.join(kprof_capture::MODULES);
    let members = [
        Member::Bytes(kprof_capture::MANIFEST, &json),
        Member::File(kprof_capture::PERF_DATA, &perf_path),
        Member::File(kprof_capture::KALLSYMS, &kallsyms_path),
        Member::File(kprof_capture::MODULES, &modules_path),
    ];
    let path = archive::write(&out_dir, &id, &members, stop_ns / 1_000_000_000).map_err(|e| {
        Error::io(
            format!(
                "cannot write the archive (capture kept in {})",
                work.path.display()
            ),
            e,
        )
    })?;
    work.keep = false;
    Ok(path)
}
