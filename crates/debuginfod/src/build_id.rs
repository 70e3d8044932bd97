//! Build-ids: what a valid one looks like, and the one an ELF file carries.

use std::fs::File;
use std::path::Path;

use object::read::ReadCache;
use object::Object;

/// The longest build-id accepted, in hex characters (a 256-bit hash).
pub const MAX_BUILD_ID_HEX: usize = 64;

/// `Ok` when `build_id` is a lowercase hex string of even length, 2 to 64 characters: the
/// only form that may become a cache path or a URL. The error says what is wrong with it.
pub fn validate_build_id(build_id: &str) -> Result<(), String> {
    if build_id.len() < 2 || build_id.len() > MAX_BUILD_ID_HEX {
        return Err(format!(
            "{} hex characters; a build-id has 2 to {MAX_BUILD_ID_HEX}",
            build_id.len()
        ));
    }
    if !build_id.len().is_multiple_of(2) {
        return Err("an odd number of hex characters".to_string());
    }
    if let Some(c) = build_id
        .chars()
        .find(|c| !matches!(c, '0'..='9' | 'a'..='f'))
    {
        return Err(format!("{c:?} is not a lowercase hex digit"));
    }
    Ok(())
}

/// The GNU build-id of the ELF file at `path` as lowercase hex; `None` when it is not an ELF
/// file or has no build-id note (a server's HTML error page served as 200, a truncated file).
///
/// Reads only the headers and notes through a read cache, so a 1 GB debuginfo costs a few reads.
pub(crate) fn elf_build_id(path: &Path) -> std::io::Result<Option<String>> {
    let file = File::open(path)?;
    let cache = ReadCache::new(file);
    let Ok(elf) = object::File::parse(&cache) else {
        return Ok(None);
    };
    Ok(match elf.build_id() {
        Ok(Some(bytes)) if !bytes.is_empty() => Some(hex(bytes)),
        _ => None,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Build-ids of every common length pass; case, odd length, junk and empty are refused.
    #[test]
    fn validate_build_id_hex_forms() {
        assert!(validate_build_id("ab").is_ok());
        assert!(validate_build_id("4e1f7a2c9b0d3e5f6a7b8c9d0e1f2a3b4c5d6e7f").is_ok());
        assert!(validate_build_id(&"0123456789abcdef".repeat(4)).is_ok());
        assert!(validate_build_id("").is_err());
        assert!(validate_build_id("a").is_err());
        assert!(validate_build_id("abc").is_err());
        assert!(validate_build_id("ABCD").is_err());
        assert!(validate_build_id("../etc").is_err());
        assert!(validate_build_id(&"ab".repeat(33)).is_err());
    }

    /// A file that is not ELF has no build-id (not an error).
    #[test]
    fn elf_build_id_text_file_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page.html");
        std::fs::write(&path, "<html>not found</html>").unwrap();
        assert_eq!(elf_build_id(&path).unwrap(), None);
    }
}
