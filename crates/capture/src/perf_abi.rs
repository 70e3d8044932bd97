//! Numbers of the perf ABI that both sides must agree on: the agent writes them into
//! perf.data or checks options against them, kprofctl reads or checks the same.

/// `PERF_RECORD_COMPRESSED`: zstd-compressed records, as `perf record -z` writes them.
pub const RECORD_COMPRESSED: u32 = 81;

/// `PERF_RECORD_COMPRESSED2` (perf 6.15 on): the same, with the data's length first.
pub const RECORD_COMPRESSED2: u32 = 83;

/// perf's default `--call-graph dwarf` user stack dump size.
pub const DEFAULT_STACK_USER: u32 = 8192;

/// The largest user stack dump: a sample's size is a u16, so perf caps the dump at
/// `round_down(USHRT_MAX, 8)`.
pub const MAX_STACK_USER: u32 = 65528;

/// A `--call-graph` value as both sides accept it: `fp`, `dwarf` or `dwarf,SIZE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraphSpec {
    /// `fp`: frame pointers, walked by the kernel.
    Fp,
    /// `dwarf[,SIZE]`: user registers and a user stack copy; `None` when no SIZE was given
    /// (the recorder's default is [`DEFAULT_STACK_USER`]).
    Dwarf {
        /// The SIZE given, already checked: a multiple of 8 in `8..=MAX_STACK_USER`.
        stack_size: Option<u32>,
    },
}

/// Why a `--call-graph` value was refused; each side words its own message from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallGraphError {
    /// Neither `fp`, `dwarf` nor `dwarf,SIZE`.
    NotAMode,
    /// `fp,…`: frame pointers take no stack size.
    FpTakesNoSize,
    /// `dwarf,SIZE` where SIZE (held here) is not a number.
    SizeNotANumber(String),
    /// `dwarf,SIZE` where SIZE (held here) is not a multiple of 8 in `8..=MAX_STACK_USER`.
    SizeOutOfRange(u32),
}

/// Parses `fp`, `dwarf` or `dwarf,SIZE` as `perf record --call-graph` does, except that a
/// SIZE perf would round up to a multiple of 8 is refused: the kernel requires the multiple,
/// and saying so beats recording a size nobody wrote.
pub fn parse_call_graph(v: &str) -> Result<CallGraphSpec, CallGraphError> {
    let (mode, size) = match v.split_once(',') {
        Some((m, s)) => (m, Some(s)),
        None => (v, None),
    };
    match (mode, size) {
        ("fp", None) => Ok(CallGraphSpec::Fp),
        ("dwarf", None) => Ok(CallGraphSpec::Dwarf { stack_size: None }),
        ("dwarf", Some(s)) => {
            let n: u32 = s
                .parse()
                .map_err(|_| CallGraphError::SizeNotANumber(s.to_owned()))?;
            if n == 0 || n % 8 != 0 || n > MAX_STACK_USER {
                return Err(CallGraphError::SizeOutOfRange(n));
            }
            Ok(CallGraphSpec::Dwarf {
                stack_size: Some(n),
            })
        }
        ("fp", Some(_)) => Err(CallGraphError::FpTakesNoSize),
        _ => Err(CallGraphError::NotAMode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accepted forms, and the sizes at both ends of the range.
    #[test]
    fn call_graph_modes_and_sizes() {
        assert_eq!(parse_call_graph("fp"), Ok(CallGraphSpec::Fp));
        assert_eq!(
            parse_call_graph("dwarf"),
            Ok(CallGraphSpec::Dwarf { stack_size: None })
        );
        for n in [8, 4096, MAX_STACK_USER] {
            assert_eq!(
                parse_call_graph(&format!("dwarf,{n}")),
                Ok(CallGraphSpec::Dwarf {
                    stack_size: Some(n)
                })
            );
        }
    }

    /// Each refusal names its reason.
    #[test]
    fn call_graph_errors() {
        use CallGraphError::*;
        for (v, want) in [
            ("lbr", NotAMode),
            ("", NotAMode),
            ("lbr,8", NotAMode),
            ("fp,8", FpTakesNoSize),
            ("fp,", FpTakesNoSize),
            ("dwarf,4k", SizeNotANumber("4k".into())),
            ("dwarf,", SizeNotANumber("".into())),
            ("dwarf,-8", SizeNotANumber("-8".into())),
            ("dwarf,0", SizeOutOfRange(0)),
            ("dwarf,100", SizeOutOfRange(100)),
            ("dwarf,65536", SizeOutOfRange(65536)),
        ] {
            assert_eq!(parse_call_graph(v), Err(want), "{v}");
        }
    }
}
