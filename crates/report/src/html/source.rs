//! The annotated source of one function, as the "Annotated source" section shows it.
//!
//! [`Listing`] is the page's own view of a [`kprof_symbols::annotate::Annotation`]: rows with
//! a label, a text and samples, source lines grouped under their file.

use kprof_symbols::annotate::Annotation;

/// An annotated function: source lines and instructions with samples of one event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The function as shown in the heading (`mychardrv.ko:mychardrv_write`).
    pub function: String,
    /// The event counted.
    pub event: String,
    /// Self samples of the function: the 100 % of the listing's percentages.
    pub total: u64,
    /// Source lines in file and line order, a heading row before each file.
    pub source: Vec<Row>,
    /// Instructions in address order.
    pub disassembly: Vec<Row>,
    /// Why a part is missing (source file not found, no line table).
    pub notes: Vec<String>,
}

/// One line of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// A file heading rather than a line of code.
    pub heading: bool,
    /// Line number or address as displayed (`42`, `ffffffffc0001a2c`).
    pub label: String,
    /// Source text, the disassembled instruction, or the file name of a heading.
    pub text: String,
    /// Samples at the line or instruction (0 for a heading).
    pub samples: u64,
}

impl From<&Annotation> for Listing {
    fn from(a: &Annotation) -> Listing {
        let mut source = Vec::new();
        let mut file: Option<&str> = None;
        for line in &a.lines {
            if file != Some(line.file.as_str()) {
                file = Some(&line.file);
                source.push(Row {
                    heading: true,
                    text: line.file.clone(),
                    ..Row::default()
                });
            }
            source.push(Row {
                heading: false,
                label: line.line.to_string(),
                text: line.text.clone().unwrap_or_default(),
                samples: line.samples,
            });
        }
        let disassembly = a
            .instructions
            .iter()
            .map(|i| Row {
                heading: false,
                label: format!("{:x}", i.address),
                text: match (&i.file, i.line) {
                    (Some(_), Some(line)) => format!("{:<40} ; line {line}", i.text),
                    _ => i.text.clone(),
                },
                samples: i.samples,
            })
            .collect();
        Listing {
            function: format!("{}:{}", a.image, a.function),
            event: a.event.clone(),
            total: a.total,
            source,
            disassembly,
            notes: a.warnings.clone(),
        }
    }
}
