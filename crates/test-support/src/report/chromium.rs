//! Headless Chromium for the HTML tests: a screenshot and the DOM after scripts ran.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs headless Chromium on `page`: writes a screenshot to `png`, returns the DOM after
/// scripts ran.
pub fn chromium(page: &Path, png: &Path, scratch: &Path) -> String {
    chromium_url(&format!("file://{}", page.display()), png, scratch)
}

/// [`chromium`] on a URL, e.g. a page with a `#fragment`.
pub fn chromium_url(url: &str, png: &Path, scratch: &Path) -> String {
    let common = |profile: &str| -> Vec<String> {
        [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([format!(
            "--user-data-dir={}",
            scratch.join(profile).display()
        )])
        .collect()
    };
    let shot = bounded(
        Command::new(chromium_binary())
            .args(common("shot"))
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1400,2200")
            .arg(url),
    );
    assert!(
        shot.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let dom = bounded(
        Command::new(chromium_binary())
            .args(common("dom"))
            .arg("--dump-dom")
            .arg(url),
    );
    assert!(
        dom.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    String::from_utf8(dom.stdout).expect("the DOM is UTF-8")
}

/// Runs a Chromium command to its end, or kills it after [`HANG`]: a browser that hangs
/// (no display, a blocked profile directory) must fail the test, not stall CI.
fn bounded(command: &mut Command) -> Output {
    const HANG: Duration = Duration::from_secs(300);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium runs (apt-get install chromium)");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stdout.read_to_end(&mut buf).map(|_| buf)
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stderr.read_to_end(&mut buf).map(|_| buf)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            break status;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {HANG:?}: {command:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap().expect("chromium's output"),
        stderr: err.join().unwrap().expect("chromium's error output"),
    }
}

fn chromium_binary() -> PathBuf {
    std::env::var_os("KPROF_CHROMIUM").map_or_else(|| PathBuf::from("chromium"), PathBuf::from)
}

/// The PNG decodes and is not one flat colour (a blank or failed render is).
pub fn assert_non_blank_png(path: &Path) {
    let decoder = png::Decoder::new(io::BufReader::new(
        std::fs::File::open(path).expect("chromium wrote the screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a sane PNG size")];
    let info = reader.next_frame(&mut buf).expect("PNG pixels");
    let pixels = &buf[..info.buffer_size()];
    let step = info.color_type.samples() * usize::from(info.bit_depth as u8).div_ceil(8);
    let first = &pixels[..step];
    let differing = pixels.chunks(step).filter(|p| *p != first).count();
    let total = pixels.len() / step;
    assert!(
        differing * 100 > total,
        "screenshot is blank: {differing} of {total} pixels differ from the first"
    );
}
