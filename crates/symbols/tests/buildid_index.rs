//! The persistent build-id index: a second update reads nothing, a changed file is reread.

use kprof_symbols::index::BuildIdIndex;

/// Index a directory of ELF and non-ELF files twice, then change one file.
#[test]
fn update_index_second_run_reads_only_changed_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("syms");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let exe = std::env::current_exe().unwrap();
    std::fs::copy(&exe, dir.join("a.elf")).unwrap();
    std::fs::copy("/bin/true", dir.join("sub/true")).unwrap();
    std::fs::write(dir.join("notes.txt"), vec![b'x'; 4096]).unwrap();
    let store = tmp.path().join("cache/buildid-index.json");
    let roots = vec![dir.clone()];
    let first = BuildIdIndex::update(&roots, Some(&store), &mut |_| {}).unwrap();
    assert_eq!(first.files_read, 3);
    assert_eq!(first.len(), 2, "two ELF files");
    let id = build_id_of_bin_true();
    assert_eq!(first.by_build_id(&id)[0].0, dir.join("sub/true"));
    let second = BuildIdIndex::update(&roots, Some(&store), &mut |_| {}).unwrap();
    assert_eq!(second.files_read, 0);
    assert_eq!(second.len(), 2);
    // A rewritten file (new size) is read again, the others are not.
    std::fs::write(dir.join("notes.txt"), vec![b'y'; 5000]).unwrap();
    let third = BuildIdIndex::update(&roots, Some(&store), &mut |_| {}).unwrap();
    assert_eq!(third.files_read, 1);
    assert_eq!(third.by_name("true").len(), 1);
}

/// A file comes before the shorter-named symbolic links to it (busybox and its applets in a
/// Buildroot `target/`), so the image is named after the file.
#[test]
fn by_build_id_index_applet_links_file_first() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("target/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/true", bin.join("busybox")).unwrap();
    for applet in ["cp", "ls", "sh"] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    let idx = BuildIdIndex::update(&[tmp.path().join("target")], None, &mut |_| {}).unwrap();
    let id = build_id_of_bin_true();
    let found = idx.by_build_id(&id);
    assert_eq!(found.len(), 4);
    assert_eq!(found[0].0, bin.join("busybox"));
}

/// The GNU build-id of `/bin/true`, lowercase hex, read with `object` as the index does.
fn build_id_of_bin_true() -> String {
    use object::Object;
    let data = std::fs::read("/bin/true").unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let id = obj.build_id().unwrap().unwrap();
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lookup places of the index `dir` with the recorded paths allowed, nothing else.
fn path_sources(dir: &std::path::Path) -> kprof_symbols::sources::Sources {
    kprof_symbols::sources::Sources {
        index: BuildIdIndex::update(&[dir.to_path_buf()], None, &mut |_| {}).unwrap(),
        perf_cache: None,
        debug_roots: Vec::new(),
        use_recorded_paths: true,
        providers: Vec::new(),
    }
}

/// No build-id recorded: the file at the recorded path under a symbol path (a sysroot) wins
/// over another file of that name elsewhere in the symbol paths, and is unverified.
#[test]
fn find_by_path_index_sysroot_suffix_before_name() {
    use kprof_symbols::sources::Lookup;
    let tmp = tempfile::tempdir().unwrap();
    let sysroot_bin = tmp.path().join("out/target/usr/bin");
    std::fs::create_dir_all(&sysroot_bin).unwrap();
    std::fs::create_dir_all(tmp.path().join("aaa")).unwrap();
    // Sorted first by path: a name-only pick would take it.
    std::fs::copy("/bin/false", tmp.path().join("aaa/app")).unwrap();
    std::fs::copy("/bin/true", sysroot_bin.join("app")).unwrap();
    let s = path_sources(tmp.path());
    assert_eq!(
        s.find_by_path(std::path::Path::new("/usr/bin/app"), false),
        Lookup::Unverified {
            path: sysroot_bin.join("app"),
            debug: None
        }
    );
    // Only the name matches: that file, still unverified.
    assert_eq!(
        s.find_by_path(std::path::Path::new("/opt/elsewhere/app"), false),
        Lookup::Unverified {
            path: tmp.path().join("aaa/app"),
            debug: None
        }
    );
}

/// The recorded path itself is opened only for a capture recorded on this host: a board's
/// `/bin/true` is not this host's.
#[test]
fn find_by_path_host_file_only_on_host_capture() {
    use kprof_symbols::sources::Lookup;
    let tmp = tempfile::tempdir().unwrap();
    let s = path_sources(tmp.path());
    let recorded = std::path::Path::new("/bin/true");
    assert!(
        matches!(s.find_by_path(recorded, false), Lookup::Missing(why) if why.contains("\"true\"")),
    );
    assert!(matches!(
        s.find_by_path(recorded, true),
        Lookup::Unverified { path, .. } if path == recorded
    ));
}
