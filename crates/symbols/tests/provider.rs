//! The symbol-provider seam of `Sources`: what is asked of a provider, and that what it hands
//! back is checked by build-id like a local file. The provider here serves files from a map
//! (the library's side of the seam is under test; kprofctl's debuginfod provider is tested
//! against a real server in kprofctl's tests).

use kprof_symbols::index::BuildIdIndex;
use kprof_symbols::provider::{FileKind, Provided, SymbolProvider, Unavailable, Wanted};
use kprof_symbols::sources::{Lookup, Sources};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

const ID_A: &str = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
const ID_B: &str = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";

/// Serves files by `(build-id, kind)` and remembers what it was asked.
#[derive(Debug, Default)]
struct MapProvider {
    files: HashMap<(String, FileKind), PathBuf>,
    asked: Mutex<Vec<(String, FileKind)>>,
    prefetched: Mutex<Vec<Wanted>>,
}

impl SymbolProvider for MapProvider {
    fn prefetch(&self, wanted: &[Wanted]) {
        self.prefetched.lock().unwrap().extend_from_slice(wanted);
    }
    fn file(&self, build_id: &str, kind: FileKind) -> Result<Provided, Unavailable> {
        self.asked.lock().unwrap().push((build_id.to_owned(), kind));
        self.files
            .get(&(build_id.to_owned(), kind))
            .map(|p| Provided {
                path: p.clone(),
                origin: "map: test".into(),
            })
            .ok_or_else(|| Unavailable("not in the map".into()))
    }
    fn source(&self, _build_id: &str, _path: &str) -> Result<String, Unavailable> {
        Err(Unavailable("no sources".into()))
    }
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Builds `name` from a small C file with GNU build-id `id`.
fn elf(dir: &Path, name: &str, id: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let out = dir.join(name);
    kprof_test_support::cc(&["-g", &format!("-Wl,--build-id=0x{id}")], &src, &out)
}

fn objcopy(args: &[&str]) {
    let st = Command::new("objcopy").args(args).status().unwrap();
    assert!(st.success(), "objcopy {args:?}");
}

fn sources(index_dir: Option<&Path>, provider: Arc<MapProvider>) -> Sources {
    let paths: Vec<PathBuf> = index_dir.into_iter().map(Path::to_path_buf).collect();
    Sources {
        index: BuildIdIndex::update(&paths, None, &mut |_| {}).unwrap(),
        perf_cache: None,
        debug_roots: Vec::new(),
        use_recorded_paths: false,
        providers: vec![provider],
    }
}

/// A provider's file with another build-id is refused, and the reason names both ids.
#[test]
fn find_provider_wrong_build_id_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = elf(dir.path(), "b", ID_B);
    let mut p = MapProvider::default();
    p.files.insert((ID_A.into(), FileKind::Debuginfo), b);
    let s = sources(None, Arc::new(p));
    match s.find(Some(ID_A), &["a".into()], None) {
        Lookup::Missing(why) => {
            assert!(why.contains(ID_A) && why.contains(ID_B), "{why}");
            assert!(why.contains("refused"), "{why}");
        }
        other => panic!("the wrong file was used: {other:?}"),
    }
}

/// A split debug file from a provider is paired with the provider's executable, which has
/// the code and `.eh_frame`; the origin is the provider's.
#[test]
fn find_provider_split_debuginfo_takes_executable() {
    let dir = tempfile::tempdir().unwrap();
    let a = elf(dir.path(), "a", ID_A);
    let dbg = dir.path().join("a.debug");
    objcopy(&[
        "--only-keep-debug",
        a.to_str().unwrap(),
        dbg.to_str().unwrap(),
    ]);
    let stripped = dir.path().join("a.stripped");
    objcopy(&[
        "--strip-debug",
        a.to_str().unwrap(),
        stripped.to_str().unwrap(),
    ]);
    let mut p = MapProvider::default();
    p.files
        .insert((ID_A.into(), FileKind::Debuginfo), dbg.clone());
    p.files
        .insert((ID_A.into(), FileKind::Executable), stripped.clone());
    let s = sources(None, Arc::new(p));
    assert_eq!(
        s.find(Some(ID_A), &[], None),
        Lookup::Found {
            path: stripped,
            debug: Some(dbg),
            origin: Some("map: test".into()),
        }
    );
}

/// A build-id the local index has is never asked of a provider, neither in a lookup nor in
/// the prefetch; the missing one is prefetched once per file kind.
#[test]
fn prefetch_provider_only_missing_asked() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    std::fs::create_dir(&local).unwrap();
    let a = elf(&local, "a", ID_A);
    let p = Arc::new(MapProvider::default());
    let s = sources(Some(&local), p.clone());
    s.prefetch(&[
        (ID_A.into(), "a".into()),
        (ID_B.into(), "b".into()),
        (ID_B.into(), "b again".into()),
    ]);
    let found = s.find(Some(ID_A), &["a".into()], None);
    assert!(
        matches!(&found, Lookup::Found { path, origin: None, .. } if *path == a),
        "{found:?}"
    );
    let prefetched = p.prefetched.lock().unwrap().clone();
    // ID_B once: its debuginfo, then (the map has none) its executable.
    let asked_for: Vec<(&str, FileKind)> = prefetched
        .iter()
        .map(|w| (w.build_id.as_str(), w.kind))
        .collect();
    assert_eq!(
        asked_for,
        [(ID_B, FileKind::Debuginfo), (ID_B, FileKind::Executable)]
    );
    let asked = p.asked.lock().unwrap().clone();
    assert!(asked.iter().all(|(id, _)| id == ID_B), "{asked:?}");
}

/// An image no provider has debuginfo for, but whose executable one has, is resolved from the
/// executable (its symbol tables and `.eh_frame`), and prefetched as such.
#[test]
fn find_provider_executable_only_used() {
    let dir = tempfile::tempdir().unwrap();
    let a = elf(dir.path(), "a", ID_A);
    let mut p = MapProvider::default();
    p.files
        .insert((ID_A.into(), FileKind::Executable), a.clone());
    let p = Arc::new(p);
    let s = sources(None, p.clone());
    s.prefetch(&[(ID_A.into(), "a".into())]);
    let kinds: Vec<FileKind> = p
        .prefetched
        .lock()
        .unwrap()
        .iter()
        .map(|w| w.kind)
        .collect();
    assert_eq!(kinds, [FileKind::Debuginfo, FileKind::Executable]);
    assert_eq!(
        s.find(Some(ID_A), &[], None),
        Lookup::Found {
            path: a,
            debug: None,
            origin: Some("map: test".into()),
        }
    );
}
