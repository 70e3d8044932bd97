fn main() {
    eprintln!("kprofctl: not built yet");
    std::process::exit(2);
}
