//! Three glibc entry points replaced in the static agent only (`ci/build-agent` links glibc
//! statically with `crt-static`), each by one that does the same job for the agent without
//! the machinery that glibc's own version drags into a static link. Measured in
//! docs/performance.md, "Agent size (issue 26)":
//!
//! - `pthread_getattr_np`: std asks for the calling thread's stack only to recognise a stack
//!   overflow in its SIGSEGV handler. glibc reads `/proc/self/maps` with `sscanf`, which
//!   links scanf and the whole strtod/strtold/strtof128 family. Answering `ENOSYS` is handled
//!   by std (no guard page recorded): a stack overflow still kills the agent by SIGSEGV, only
//!   without std's "has overflowed its stack" line.
//! - `__xpg_strerror_r` (std's `strerror_r`, for every `io::Error` message) and
//!   `__assert_fail` (glibc's own assertions): glibc's go through gettext, which links iconv
//!   (gconv), `dlopen` and locale loading, and `fprintf` to wide streams. The agent never calls
//!   `setlocale`, so glibc would answer in the C locale: `strerrordesc_np`'s untranslated text,
//!   which is what this `strerror_r` copies.
//!
//! Dynamic builds (Buildroot, Yocto, `cargo test`) keep glibc's own versions.

// The replacements exist only in the static build; their logic is tested in every build.
#![cfg_attr(not(target_feature = "crt-static"), allow(dead_code, unused_imports))]

use std::ffi::{c_char, c_int, c_uint, CStr};

#[cfg(target_feature = "crt-static")]
extern "C" {
    /// glibc ≥ 2.32: the C locale's description of `errnum`, NULL for an unknown one.
    fn strerrordesc_np(errnum: c_int) -> *const c_char;
}

#[cfg(target_feature = "crt-static")]
/// Reports that the stack attributes are unavailable (`ENOSYS`), leaving `attr` untouched.
#[no_mangle]
pub extern "C" fn pthread_getattr_np(
    _thread: libc::pthread_t,
    _attr: *mut libc::pthread_attr_t,
) -> c_int {
    libc::ENOSYS
}

#[cfg(target_feature = "crt-static")]
/// XSI `strerror_r`: writes `errnum`'s message (or `Unknown error N`, as glibc does) into
/// `buf`; 0, or `ERANGE` when it had to be cut to `buflen`, `EINVAL` for an unknown error.
///
/// # Safety
/// `buf` must be valid for `buflen` bytes of writes (the XSI contract).
#[no_mangle]
pub unsafe extern "C" fn __xpg_strerror_r(errnum: c_int, buf: *mut c_char, buflen: usize) -> c_int {
    // SAFETY: strerrordesc_np takes any int and returns NULL or a static C string.
    let desc = unsafe { strerrordesc_np(errnum) };
    // SAFETY: non-NULL results are NUL-terminated strings in glibc's read-only data.
    let desc = (!desc.is_null()).then(|| unsafe { CStr::from_ptr(desc) }.to_bytes());
    if buflen == 0 {
        return libc::ERANGE;
    }
    // SAFETY: the caller gives `buflen` writable bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), buflen) };
    strerror_into(errnum, desc, out)
}

/// The message of `errnum` (`desc`, or `Unknown error N` as glibc says when there is none),
/// NUL-terminated in `out` (not empty): 0, `ERANGE` when cut, `EINVAL` for an unknown error.
fn strerror_into(errnum: c_int, desc: Option<&[u8]>, out: &mut [u8]) -> c_int {
    let mut unknown = [0u8; 32];
    let (text, status) = match desc {
        Some(d) => (d, 0),
        None => (unknown_error(errnum, &mut unknown), libc::EINVAL),
    };
    let n = text.len().min(out.len() - 1);
    out[..n].copy_from_slice(&text[..n]);
    out[n] = 0;
    if n < text.len() {
        libc::ERANGE
    } else {
        status
    }
}

/// `Unknown error N` in `out`, without the formatting machinery (this runs in error paths).
fn unknown_error(errnum: c_int, out: &mut [u8; 32]) -> &[u8] {
    const PREFIX: &[u8] = b"Unknown error ";
    out[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut len = PREFIX.len();
    if errnum < 0 {
        out[len] = b'-';
        len += 1;
    }
    let mut digits = [0u8; 10];
    let (mut v, mut d) = (errnum.unsigned_abs(), 0);
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &c in digits[..d].iter().rev() {
        out[len] = c;
        len += 1;
    }
    &out[..len]
}

#[cfg(target_feature = "crt-static")]
/// glibc's assertion failure: `kprof-agent: FILE:LINE: FUNCTION: Assertion `EXPR' failed.`
/// on stderr, then `abort()`, as glibc prints it (without its translation).
///
/// # Safety
/// Each pointer is NULL or a NUL-terminated string (what `assert()` passes).
#[no_mangle]
pub unsafe extern "C" fn __assert_fail(
    assertion: *const c_char,
    file: *const c_char,
    line: c_uint,
    function: *const c_char,
) -> ! {
    let text = |p: *const c_char| {
        if p.is_null() {
            &b"?"[..]
        } else {
            // SAFETY: the caller's contract: NULL or a NUL-terminated string, alive for the
            // call.
            unsafe { CStr::from_ptr(p) }.to_bytes()
        }
    };
    let mut line_buf = [0u8; 32];
    let line_text = unknown_error(line as c_int, &mut line_buf);
    let line_text = &line_text[b"Unknown error ".len()..];
    let parts: [&[u8]; 9] = [
        b"kprof-agent: ",
        text(file),
        b":",
        line_text,
        b": ",
        text(function),
        b": Assertion `",
        text(assertion),
        b"' failed.\n",
    ];
    for p in parts {
        // SAFETY: write(2) of a live slice to stderr; a failure cannot be reported anywhere.
        unsafe { libc::write(2, p.as_ptr().cast(), p.len()) };
    }
    // SAFETY: abort never returns; it is what glibc's __assert_fail ends with.
    unsafe { libc::abort() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// strerror_r copies the description, cuts it with ERANGE, and names unknown errors.
    #[test]
    fn strerror_static_messages_and_limits() {
        let mut out = [0xffu8; 64];
        let desc = Some(&b"No such file or directory"[..]);
        assert_eq!(strerror_into(2, desc, &mut out), 0);
        assert_eq!(&out[..26], b"No such file or directory\0");
        assert_eq!(strerror_into(2, desc, &mut out[..5]), libc::ERANGE);
        assert_eq!(&out[..5], b"No s\0");
        assert_eq!(strerror_into(-7, None, &mut out), libc::EINVAL);
        assert_eq!(&out[..17], b"Unknown error -7\0");
        assert_eq!(strerror_into(i32::MIN, None, &mut out), libc::EINVAL);
        assert_eq!(&out[..26], b"Unknown error -2147483648\0");
    }
}
