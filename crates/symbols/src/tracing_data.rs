//! perf.data's HEADER_TRACING_DATA, sans-IO: the tracefs formats of the tracepoints a capture
//! recorded, and the decoding of a sample's RAW payload with them.
//!
//! The layout is what perf's `trace-event-info.c` writes and `trace-event-read.c` reads: the
//! magic `\x17\x08Dtracing`, a NUL-terminated version, the byte order and `long` size of the
//! recording kernel, its page size; `header_page` and `header_event` (tracefs
//! `events/header_*`), the ftrace events' formats, the formats of each other system, then
//! kallsyms, printk formats and (0.6) saved cmdlines, which are not needed here and skipped.
//! Each format is tracefs' `events/SYSTEM/EVENT/format` text.
//!
//! Nothing here trusts a size or count: a lying or cut section is an error naming it, never a
//! panic or an allocation of what the file claims.

mod decode;

pub use decode::FieldValue;
pub(crate) use decode::{hex_bytes, uint};

/// Why tracing data could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TracingDataError {
    /// The bytes do not start with `\x17\x08Dtracing`.
    #[error("no tracing data magic (\\x17\\x08Dtracing) at its start")]
    Magic,
    /// A section is cut or claims more bytes than there are.
    #[error("the {section} section is cut short (it claims more bytes than the tracing data has)")]
    Truncated {
        /// The section (`header_page`, `ftrace formats`, `formats of system sched`...).
        section: String,
    },
    /// A section does not start with its name.
    #[error("expected the {expected} section, found something else")]
    Section {
        /// The section's name.
        expected: &'static str,
    },
}

/// The parts of HEADER_TRACING_DATA a report needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracingData {
    /// The version string (`0.6`).
    pub version: String,
    /// The recording kernel was big-endian: RAW payloads are in its byte order.
    pub big_endian: bool,
    /// `sizeof(long)` of the recording kernel.
    pub long_size: u8,
    /// Its page size.
    pub page_size: u32,
    /// tracefs `events/header_page`, as text.
    pub header_page: String,
    /// tracefs `events/header_event`, as text.
    pub header_event: String,
    /// Every event format, the ftrace ones (system `ftrace`) first.
    pub formats: Vec<Format>,
}

/// One event's format (tracefs `events/SYSTEM/EVENT/format`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    /// `ID:`, the tracepoint's id: perf_event_attr.config and the record's `common_type`.
    pub id: u64,
    /// The system (`sched`, `ftrace`).
    pub system: String,
    /// The event (`sched_switch`, `print`).
    pub name: String,
    /// Its fields in record order, `common_*` first.
    pub fields: Vec<Field>,
}

/// How a field's bytes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `size` bytes at `offset`.
    Scalar,
    /// `TYPE name[N]`: N elements in `size` bytes at `offset`.
    Array(usize),
    /// `__data_loc TYPE[] name`: a u32 at `offset` whose low 16 bits are the data's offset
    /// in the record and high 16 bits its length.
    DataLoc,
    /// `__rel_loc TYPE[] name`: as `DataLoc`, the offset counted from the end of the field.
    RelLoc,
    /// `TYPE name[]` of size 0 (ftrace's `char buf[]`): from `offset` to the end of the record.
    ToEnd,
}

/// One field of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The C type as tracefs prints it, without `__data_loc`/`__rel_loc` and brackets
    /// (`pid_t`, `char`, `unsigned long`, `void *`).
    pub type_text: String,
    /// The field's name (`prev_pid`, `buf`).
    pub name: String,
    /// Byte offset in the record.
    pub offset: usize,
    /// Size in bytes (of the whole array; 4 for a `__data_loc`; 0 for a to-the-end `buf[]`).
    pub size: usize,
    /// `signed:1`.
    pub signed: bool,
    /// Where its bytes are.
    pub shape: Shape,
}

impl Format {
    /// `system:name`, as perf names the event.
    pub fn event_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

impl TracingData {
    /// The format of event `system:name`.
    pub fn format(&self, system: &str, name: &str) -> Option<&Format> {
        self.formats
            .iter()
            .find(|f| f.system == system && f.name == name)
    }

    /// The format whose `ID:` is `id` (a tracepoint attr's config).
    pub fn format_by_id(&self, id: u64) -> Option<&Format> {
        self.formats.iter().find(|f| f.id == id)
    }
}

/// A cursor over the tracing data in the recording kernel's byte order.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    big_endian: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, section: &str) -> Result<&'a [u8], TracingDataError> {
        let cut = || TracingDataError::Truncated {
            section: section.to_string(),
        };
        let n = usize::try_from(n).map_err(|_| cut())?;
        let end = self.at.checked_add(n).ok_or_else(cut)?;
        let b = self.bytes.get(self.at..end).ok_or_else(cut)?;
        self.at = end;
        Ok(b)
    }

    fn cstr(&mut self, section: &str) -> Result<String, TracingDataError> {
        let rest = self.bytes.get(self.at..).unwrap_or_default();
        let len = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(|| TracingDataError::Truncated {
                section: section.to_string(),
            })?;
        self.at += len + 1;
        Ok(String::from_utf8_lossy(&rest[..len]).into_owned())
    }

    fn uint(&mut self, n: usize, section: &str) -> Result<u64, TracingDataError> {
        let b = self.take(n as u64, section)?;
        Ok(uint(b, self.big_endian).unwrap_or(0))
    }

    /// A u64 size, then that many bytes.
    fn sized(&mut self, section: &str) -> Result<&'a [u8], TracingDataError> {
        let n = self.uint(8, section)?;
        self.take(n, section)
    }
}

/// Reads HEADER_TRACING_DATA's formats.
pub fn parse(bytes: &[u8]) -> Result<TracingData, TracingDataError> {
    const MAGIC: &[u8] = b"\x17\x08Dtracing";
    if !bytes.starts_with(MAGIC) {
        return Err(TracingDataError::Magic);
    }
    let mut c = Cursor {
        bytes,
        at: MAGIC.len(),
        big_endian: false,
    };
    let mut td = TracingData {
        version: c.cstr("version")?,
        ..TracingData::default()
    };
    let head = c.take(2, "header")?;
    td.big_endian = head[0] != 0;
    td.long_size = head[1];
    c.big_endian = td.big_endian;
    td.page_size = c.uint(4, "header")? as u32;
    td.header_page = named_section(&mut c, "header_page")?;
    td.header_event = named_section(&mut c, "header_event")?;
    let ftrace = c.uint(4, "ftrace formats")?;
    for _ in 0..ftrace {
        let text = c.sized("ftrace formats")?;
        td.formats.push(parse_format("ftrace", text));
    }
    let systems = c.uint(4, "event formats")?;
    for _ in 0..systems {
        let system = c.cstr("event formats")?;
        let section = format!("formats of system {system}");
        let count = c.uint(4, &section)?;
        for _ in 0..count {
            let text = c.sized(&section)?;
            td.formats.push(parse_format(&system, text));
        }
    }
    // kallsyms, printk formats and cmdlines follow; reports need none of them.
    Ok(td)
}

/// `NAME\0`, a u64 size, then the text.
fn named_section(c: &mut Cursor<'_>, name: &'static str) -> Result<String, TracingDataError> {
    let got = c.take(name.len() as u64 + 1, name)?;
    if &got[..name.len()] != name.as_bytes() || got[name.len()] != 0 {
        return Err(TracingDataError::Section { expected: name });
    }
    Ok(String::from_utf8_lossy(c.sized(name)?).into_owned())
}

/// One `format` text; lines it does not understand are skipped, as libtraceevent does.
pub fn parse_format(system: &str, text: &[u8]) -> Format {
    let text = String::from_utf8_lossy(text);
    let mut f = Format {
        system: system.to_string(),
        ..Format::default()
    };
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("name:") {
            f.name = name.trim().to_string();
        } else if let Some(id) = line.strip_prefix("ID:") {
            f.id = id.trim().parse().unwrap_or(u64::MAX);
        } else if line.starts_with("field:") {
            f.fields.extend(parse_field(line));
        } else if line.starts_with("print fmt:") {
            break;
        }
    }
    f
}

/// `field:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;`
fn parse_field(line: &str) -> Option<Field> {
    let mut parts = line.split(';').map(str::trim);
    let decl = parts.next()?.strip_prefix("field:")?.trim();
    let (mut offset, mut size, mut signed) = (None, None, false);
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let (offset, size): (usize, usize) = (offset?, size?);
    // A character boundary: the whitespace found may be a multi-byte one (U+0085, U+3000).
    let (at, sep) = decl
        .char_indices()
        .rev()
        .find(|&(_, c)| c.is_whitespace() || c == '*')?;
    let split = at + sep.len_utf8();
    let (ty, name) = (decl[..split].trim(), decl[split..].trim());
    let (name, bracket) = match name.split_once('[') {
        Some((n, b)) => (n, Some(b.trim_end_matches(']'))),
        None => (name, None),
    };
    let (ty, loc) = if let Some(t) = ty.strip_prefix("__data_loc ") {
        (t, Some(Shape::DataLoc))
    } else if let Some(t) = ty.strip_prefix("__rel_loc ") {
        (t, Some(Shape::RelLoc))
    } else {
        (ty, None)
    };
    let type_text = ty.split('[').next().unwrap_or(ty).trim().to_string();
    let shape = match (loc, bracket) {
        (Some(s), _) => s,
        (None, Some(_)) if size == 0 => Shape::ToEnd,
        // A length spelled as a macro (old kernels' TASK_COMM_LEN) is the size in chars.
        (None, Some(n)) => Shape::Array(n.parse().unwrap_or(size)),
        (None, None) => Shape::Scalar,
    };
    Some(Field {
        type_text,
        name: name.to_string(),
        offset,
        size,
        signed,
        shape,
    })
}

#[cfg(test)]
pub(crate) mod tests;
