//! The annotated source of one function: what the "Annotated source" section shows.
//!
//! [`Listing`] is the page's own view of an annotation, so that the page does not depend on
//! how the symbolizer lays out its annotation.

/// An annotated function: source lines and instructions with samples per event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The annotated function as shown in the heading (`mychardrv.ko:mychardrv_write`).
    pub function: String,
    /// Its source file, when known.
    pub file: Option<String>,
    /// Source lines in file order.
    pub source: Vec<Row>,
    /// Instructions in address order.
    pub disassembly: Vec<Row>,
    /// Why a part is missing (source file not found, no line table), shown above the listing.
    pub notes: Vec<String>,
}

/// One line of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// Line number or address as displayed (`42`, `ffffffffc0001a2c`).
    pub label: String,
    /// Source text or the disassembled instruction.
    pub text: String,
    /// Samples per event, parallel to `Profile::events`.
    pub counts: Vec<u64>,
}
