//! The functions `record --latency` and `--latency-user` name, as typed on the command line.

use crate::Error;

/// A function to time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LatencyTarget {
    /// A kernel function: `FUNC`, or `MODULE:FUNC` for one of a module (as the kernel's
    /// kprobe syntax has it; `mychardrv.ko:FUNC` is accepted for it).
    Kernel {
        /// What the kernel is given.
        symbol: String,
    },
    /// A user function at a file offset, which kprofctl resolved on the host from the symbol
    /// file with the board file's build-id (board binaries are stripped).
    User {
        /// The file on the board.
        path: String,
        /// The file offset of the function's first instruction.
        offset: u64,
        /// The build-id the offset was resolved for; the agent refuses another build.
        build_id: Option<String>,
        /// The function's name, for the event name and the report.
        function: String,
    },
}

impl LatencyTarget {
    /// The function as a person names it: `mychardrv:mychardrv_read`,
    /// `/usr/bin/mychardrv-writer:write_request`.
    pub fn asked(&self) -> String {
        match self {
            LatencyTarget::Kernel { symbol } => symbol.clone(),
            LatencyTarget::User { path, function, .. } => format!("{path}:{function}"),
        }
    }
}

/// `--latency FUNC[,FUNC...]`: kernel functions.
pub fn parse_kernel_list(v: &str) -> Result<Vec<LatencyTarget>, Error> {
    v.split(',').map(parse_kernel).collect()
}

fn parse_kernel(f: &str) -> Result<LatencyTarget, Error> {
    let bad = |why: &str| Error::Usage(format!("--latency `{f}`: {why}"));
    let (module, func) = match f.split_once(':') {
        Some((m, func)) => (Some(m.strip_suffix(".ko").unwrap_or(m)), func),
        None => (None, f),
    };
    let ident = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
    };
    if !ident(func) || module.is_some_and(|m| !ident(m)) {
        return Err(bad(
            "a kernel function is FUNC or MODULE:FUNC (a user function goes through \
             kprofctl, or --latency-user)",
        ));
    }
    Ok(LatencyTarget::Kernel {
        symbol: match module {
            Some(m) => format!("{m}:{func}"),
            None => func.to_string(),
        },
    })
}

/// `--latency-user PATH:OFFSET:BUILD_ID:FUNCTION`: BUILD_ID may be empty (no check);
/// FUNCTION is the rest (C++ names have colons); PATH is absolute and has none.
pub fn parse_user(v: &str) -> Result<LatencyTarget, Error> {
    let bad = |why: &str| Error::Usage(format!("--latency-user `{v}`: {why}"));
    let mut parts = v.splitn(4, ':');
    let (Some(path), Some(offset), Some(build_id), Some(function)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("expected PATH:OFFSET:BUILD_ID:FUNCTION"));
    };
    if !path.starts_with('/') {
        return Err(bad("PATH must be absolute"));
    }
    let offset = match offset.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => offset.parse().ok(),
    }
    .ok_or_else(|| bad("OFFSET is not a number"))?;
    let hex = |s: &str| s.len() >= 2 && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !build_id.is_empty() && !hex(build_id) {
        return Err(bad("BUILD_ID is not hex"));
    }
    if function.is_empty() {
        return Err(bad("FUNCTION is empty"));
    }
    Ok(LatencyTarget::User {
        path: path.into(),
        offset,
        build_id: (!build_id.is_empty()).then(|| build_id.to_ascii_lowercase()),
        function: function.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel functions with and without a module; `.ko` dropped; junk refused.
    #[test]
    fn parse_kernel_list_modules_and_errors() {
        let got = parse_kernel_list("mychardrv_write,mychardrv.ko:mychardrv_read").unwrap();
        assert_eq!(
            got,
            [
                LatencyTarget::Kernel {
                    symbol: "mychardrv_write".into()
                },
                LatencyTarget::Kernel {
                    symbol: "mychardrv:mychardrv_read".into()
                }
            ]
        );
        for bad in ["", "a b", "/usr/bin/x:f", "m:", ":f"] {
            assert!(parse_kernel_list(bad).is_err(), "{bad}");
        }
    }

    /// A user probe's four fields; the function keeps its colons.
    #[test]
    fn parse_user_fields() {
        let t = parse_user("/usr/bin/w:0x11a0:ABcd01:ns::f").unwrap();
        assert_eq!(
            t,
            LatencyTarget::User {
                path: "/usr/bin/w".into(),
                offset: 0x11a0,
                build_id: Some("abcd01".into()),
                function: "ns::f".into()
            }
        );
        assert_eq!(t.asked(), "/usr/bin/w:ns::f");
        assert!(matches!(
            parse_user("/lib/libc.so.6:4096::write"),
            Ok(LatencyTarget::User {
                offset: 4096,
                build_id: None,
                ..
            })
        ));
        for bad in [
            "w:0x10::f",
            "/w:zz::f",
            "/w:0x10:xyz:f",
            "/w:0x10::",
            "/w:0x10",
        ] {
            assert!(parse_user(bad).is_err(), "{bad}");
        }
    }
}
