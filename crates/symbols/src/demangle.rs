//! Rust and C++ symbol demangling.

/// Demangles a Rust (legacy or v0) or Itanium C++ name; other names come back unchanged.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_R") || name.starts_with("_ZN") {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            // `{:#}` drops the hash suffix, as perf and samply show Rust names.
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = sym.demangle() {
                return d;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    /// Rust legacy, Rust v0 and C++ names demangle; C names pass through.
    #[test]
    fn demangle_mangled_names_readable() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
        assert_eq!(demangle("busy_loop"), "busy_loop");
    }
}
