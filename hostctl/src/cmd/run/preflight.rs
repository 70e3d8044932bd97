//! The checks before a capture: the agent, its version, perf_event_paranoid, the PMU, the
//! events asked and the kernel against the host's symbols, each said on stderr.

use super::RunArgs;
use crate::remote::{board, kernel_match, Remote};
use kprof_capture::info::BoardInfo;

/// Checks the board before a capture and prints what it found. Returns the agent's path.
pub fn preflight(
    remote: &Remote,
    remembered: Option<&str>,
    args: &RunArgs,
) -> anyhow::Result<String> {
    let t = &remote.target;
    let agent =
        board::find_agent(remote, remembered)?.ok_or_else(|| board::no_agent_error(remote))?;
    let info = board::info(remote, &agent)?;
    let version = &info.agent_version;
    crate::term::note(format_args!("{t}: kprof-agent {version} ({agent})"));
    let ours = env!("CARGO_PKG_VERSION");
    if version != ours {
        crate::term::warning(format_args!(
            "kprofctl is {ours} but the board's agent is {version}: \
             `kprofctl deploy {}` installs the matching one",
            t.spec
        ));
    }
    let uid = info.uid.map_or("?".into(), |u| u.to_string());
    match info
        .sysctl
        .get("perf_event_paranoid")
        .and_then(|p| p.trim().parse::<i32>().ok())
    {
        Some(p) if p > 1 && info.uid != Some(0) => crate::term::warning(format_args!(
            "{t}: perf_event_paranoid is {p} and the login is not root: \
             kernel samples will be refused (log in as root or set \
             /proc/sys/kernel/perf_event_paranoid to -1)"
        )),
        Some(p) => crate::term::note(format_args!("{t}: perf_event_paranoid {p}, uid {uid}")),
        None => crate::term::warning(format_args!(
            "{t}: /proc/sys/kernel/perf_event_paranoid is missing: the kernel \
             may lack CONFIG_PERF_EVENTS"
        )),
    }
    let pmus: Vec<&str> = info.pmus.keys().map(String::as_str).collect();
    if board::has_hw_pmu(&info) {
        crate::term::note(format_args!("{t}: PMUs: {}", pmus.join(" ")));
    } else {
        crate::term::note(format_args!(
            "{t}: no hardware PMU (event sources: {}): only software events such as \
             cpu-clock can be sampled",
            if pmus.is_empty() {
                "none".to_owned()
            } else {
                pmus.join(" ")
            }
        ));
        let hw: Vec<&String> = args
            .events
            .iter()
            .filter(|e| is_hardware_event(e))
            .collect();
        if !hw.is_empty() {
            crate::term::warning(format_args!(
                "{t}: {} need a hardware PMU the board does not expose",
                hw.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for (event, verdict) in refused_events(&args.events, &info) {
        crate::term::warning(format_args!(
            "{t}: {event} does not open on the board: {verdict}"
        ));
    }
    let matched = kernel_match::check(info.kernel.build_id.as_deref(), &args.symbols)?;
    let msg = matched.message(&info.uname.release);
    if matched.is_mismatch() {
        crate::term::line(
            false,
            &format!(
                "\nkprofctl: WARNING: {}\n",
                kprof_report::escape::controls_but_newline(&format!("{t}: {msg}"))
            ),
        );
    } else {
        crate::term::note(format_args!("{t}: {msg}"));
    }
    Ok(agent)
}

/// The asked events that `kprof-agent info` probed on the board and the kernel refused, with
/// its reason; events it did not probe (raw, tracepoints) are left to the agent.
fn refused_events<'a>(asked: &'a [String], info: &'a BoardInfo) -> Vec<(&'a str, &'a str)> {
    asked
        .iter()
        .filter_map(|e| {
            let name = e.split(['/', ':']).next().unwrap_or(e);
            let verdict = info.events.get(name)?;
            (verdict != "ok").then_some((e.as_str(), verdict.as_str()))
        })
        .collect()
}

fn is_hardware_event(e: &str) -> bool {
    let name = e.split('/').next().unwrap_or(e);
    name.starts_with('r') && name[1..].chars().all(|c| c.is_ascii_hexdigit()) && name.len() > 1
        || matches!(
            name,
            "cycles"
                | "instructions"
                | "cache-references"
                | "cache-misses"
                | "branch-misses"
                | "branches"
                | "branch-instructions"
                | "bus-cycles"
                | "ref-cycles"
        )
        || name.starts_with("L1-")
        || name.starts_with("LLC-")
        || name.starts_with("dTLB-")
        || name.starts_with("iTLB-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events the board's agent probed and the kernel refused are named with the reason;
    /// events that opened, and events it did not probe, are not.
    #[test]
    fn refused_events_info_probe_verdicts() {
        let info: BoardInfo = serde_json::from_value(serde_json::json!({
            "schema": kprof_capture::info::INFO_SCHEMA, "version": 1, "agent_version": "0.1.0",
            "uname": {"sysname": "Linux", "nodename": "board", "release": "6.1", "version": "#1",
                      "machine": "x86_64"},
            "kernel": {"release": "6.1"}, "modules": [], "sysctl": {}, "cpus": [0], "pmus": {},
            "events": {"cycles": "No such file or directory (os error 2)", "cpu-clock": "ok"}
        }))
        .unwrap();
        let asked: Vec<String> = ["cycles:u", "cpu-clock", "r03", "instructions"]
            .map(String::from)
            .into();
        assert_eq!(
            refused_events(&asked, &info),
            [("cycles:u", "No such file or directory (os error 2)")]
        );
    }

    /// Hardware event names are told from software ones for the no-PMU warning.
    #[test]
    fn is_hardware_event_names() {
        assert!(is_hardware_event("cycles"));
        assert!(is_hardware_event("r03/period=10000/"));
        assert!(is_hardware_event("L1-dcache-load-misses"));
        assert!(!is_hardware_event("cpu-clock"));
        assert!(!is_hardware_event("raw"));
    }
}
