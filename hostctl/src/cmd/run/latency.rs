//! `run --latency FUNC,...`: which functions are the kernel's and which a program's, and
//! the file offset of each user function, resolved here before the run: the board's files
//! are stripped, so the offset comes from the host's symbol file with the build-id the
//! board's file has (`kprof-agent elf-id`), and the agent checks that build-id again before
//! it places the probe.

use crate::cmd::symbol_args::SymbolArgs;
use crate::remote::shell::quote;
use crate::remote::Remote;

/// A function as `--latency` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// `FUNC` or `MODULE[.ko]:FUNC`.
    Kernel(String),
    /// `PROGRAM:FUNC`, PROGRAM an absolute path or a library name (`libc.so.6`).
    User {
        /// As typed.
        program: String,
        /// The function.
        function: String,
    },
}

/// Splits `spec` into a kernel or a user function: a user one names a program by absolute
/// path or a shared library (`*.so`, `*.so.N`); anything else before the colon is a module.
pub fn classify(spec: &str) -> Result<Asked, String> {
    let Some((program, function)) = spec.rsplit_once(':') else {
        return kernel(spec, spec);
    };
    let library = program.ends_with(".so") || program.contains(".so.");
    if program.starts_with('/') || library {
        if function.is_empty() {
            return Err(format!("--latency {spec}: no function after `{program}:`"));
        }
        return Ok(Asked::User {
            program: program.into(),
            function: function.into(),
        });
    }
    if program.contains('/') {
        return Err(format!(
            "--latency {spec}: a program is named by its absolute path on the board \
             (`/usr/bin/NAME:FUNC`)"
        ));
    }
    kernel(
        spec,
        &format!("{}:{function}", program.trim_end_matches(".ko")),
    )
}

fn kernel(spec: &str, symbol: &str) -> Result<Asked, String> {
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
    };
    if symbol.split(':').all(ok) && symbol.split(':').count() <= 2 {
        Ok(Asked::Kernel(symbol.into()))
    } else {
        Err(format!(
            "--latency {spec}: not a kernel function (FUNC, MODULE:FUNC) nor a user one \
             (/PATH/PROGRAM:FUNC, LIBRARY.so.N:FUNC)"
        ))
    }
}

/// The agent arguments placing the probes of `asked`: kernel functions as they are, user
/// functions at the file offset the host's symbol file gives, with the board file's
/// build-id for the agent to check.
pub fn agent_args(
    remote: &Remote,
    agent: &str,
    asked: &[String],
    symbols: &SymbolArgs,
) -> anyhow::Result<Vec<String>> {
    let asked: Vec<Asked> = asked
        .iter()
        .map(|s| classify(s))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut args = Vec::new();
    let mut users = Vec::new();
    for a in &asked {
        match a {
            Asked::Kernel(symbol) => args.extend(["--latency".to_owned(), symbol.clone()]),
            Asked::User { program, function } => users.push((program, function)),
        }
    }
    if args.len() > users.len() * 2 {
        warn_arm32_kprobes(remote)?;
    }
    if users.is_empty() {
        return Ok(args);
    }
    let names: Vec<String> = users.iter().map(|(p, _)| quote(p)).collect();
    let out = remote.exec_ok(
        &format!("{} elf-id {}", quote(agent), names.join(" ")),
        "`kprof-agent elf-id` (an agent older than --latency? `kprofctl deploy`)",
    )?;
    let files: Vec<(&str, &str)> = out.lines().filter_map(|l| l.split_once('\t')).collect();
    if files.len() != users.len() {
        anyhow::bail!(
            "{}: `kprof-agent elf-id` printed {} files for {} names",
            remote.target,
            files.len(),
            users.len()
        );
    }
    let symbolizer = kprof_symbols::Symbolizer::new(symbols.options()?, &mut |_| {})?;
    for ((program, function), (path, build_id)) in users.iter().zip(files) {
        let offset = user_offset(&symbolizer, program, function, path, build_id)?;
        args.extend([
            "--latency-user".to_owned(),
            format!("{path}:{offset:#x}:{build_id}:{function}"),
        ]);
    }
    Ok(args)
}

/// 32-bit Arm kernels built as Thumb-2 without the upstream fix "ARM: kprobes: Explicitly
/// assign register for local variables" (September 2023; not in 6.1.192, the armv7 board's)
/// oops on a kprobe at a function that begins with a 16-bit `push`: `t16_emulate_push` loses
/// `regs` to a register its inline assembly clobbers. Which functions begin so is the
/// compiler's choice, so the warning is said before every kernel probe on a 32-bit Arm board.
fn warn_arm32_kprobes(remote: &Remote) -> anyhow::Result<()> {
    let machine = crate::remote::board::machine(remote)?;
    if machine.trim().starts_with("armv") {
        crate::term::warning(format_args!(
            "{}: a 32-bit Arm kernel built as Thumb-2 without the fix \"ARM: kprobes: \
             Explicitly assign register for local variables\" oopses on a kprobe at a \
             function that begins with a 16-bit push (docs/latency.md, \"Known kernel \
             bugs\"): check the function's first instruction, or the kernel, first",
            remote.target
        ));
    }
    Ok(())
}

/// The file offset of `function` in the board's `path` (build-id `build_id`), from the
/// host's symbol file of that build.
fn user_offset(
    symbolizer: &kprof_symbols::Symbolizer,
    program: &str,
    function: &str,
    path: &str,
    build_id: &str,
) -> anyhow::Result<u64> {
    let asked = format!("--latency {program}:{function}");
    if build_id == "-" {
        anyhow::bail!(
            "{asked}: {path} on the board has no GNU build-id, so no host file can be proved \
             to be its build (link it with --build-id)"
        );
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let file = symbolizer.symbol_file_of(build_id, name).map_err(|why| {
        anyhow::anyhow!(
            "{asked}: no symbol file for {path} (build-id {build_id}) on this host: {why}; \
             name the build tree with --symbols"
        )
    })?;
    // A split debug file's .symtab lacks the aliases only .dynsym has (libc's `nanosleep`):
    // every other file of the build is asked too.
    let first = file.path.clone();
    let others = symbolizer
        .index()
        .by_build_id(build_id)
        .into_iter()
        .filter(|(p, _)| *p != first)
        .filter_map(|(p, _)| kprof_symbols::elf::SymbolFile::open(p, None, None).ok());
    let found = std::iter::once(file)
        .chain(others)
        .find_map(|f| f.function_offset(function).map(|o| (o, f.arch)));
    let ((offset, thumb), arch) = found.ok_or_else(|| {
        anyhow::anyhow!(
            "{asked}: no file with build-id {build_id} here has a function `{function}` \
             (static functions need the unstripped file or its debug file; inlined ones \
             cannot be probed)"
        )
    })?;
    if thumb {
        anyhow::bail!(
            "{asked}: `{function}` is Thumb code, and the 32-bit Arm kernel places uprobes \
             on Arm (A32) instructions only: build it (and its callers) as A32 to time it \
             (`__attribute__((target(\"arm\")))`, or -marm; docs/latency.md)"
        );
    }
    if arch == kprof_symbols::elf::Arch::Arm {
        // Seen on the armv7 board: the kernel resumes the caller in A32 state.
        crate::term::warning(format_args!(
            "{asked}: on 32-bit Arm the kernel returns from `{function}`'s return probe in A32 \
             state: a Thumb caller of it would crash; its callers must be A32 code too"
        ));
    }
    Ok(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel functions, module functions and user functions as users type them.
    #[test]
    fn classify_kernel_module_user() {
        let k = |s: &str| Asked::Kernel(s.into());
        let u = |p: &str, f: &str| Asked::User {
            program: p.into(),
            function: f.into(),
        };
        assert_eq!(classify("mychardrv_write"), Ok(k("mychardrv_write")));
        assert_eq!(
            classify("mychardrv.ko:char_dev_cache_traverse"),
            Ok(k("mychardrv:char_dev_cache_traverse"))
        );
        assert_eq!(
            classify("mychardrv:mychardrv_read"),
            Ok(k("mychardrv:mychardrv_read"))
        );
        assert_eq!(
            classify("/usr/bin/mychardrv-writer:write_request"),
            Ok(u("/usr/bin/mychardrv-writer", "write_request"))
        );
        assert_eq!(classify("libc.so.6:write"), Ok(u("libc.so.6", "write")));
        assert_eq!(classify("libfoo.so:f"), Ok(u("libfoo.so", "f")));
        for bad in ["bin/x:f", "/usr/bin/x:", "a b", "", "m:f:g"] {
            assert!(classify(bad).is_err(), "{bad}");
        }
    }
}
