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
    let id = kprof_symbols::elf::read_build_id(&std::fs::read("/bin/true").unwrap())
        .unwrap()
        .unwrap();
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
