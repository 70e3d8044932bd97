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
