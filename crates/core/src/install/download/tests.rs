//! The download against a real HTTP server on 127.0.0.1 (Python's
//! http.server, serving a folder): a good disc, a changed one, no
//! checksum, a missing file, a cancel. Nothing is left beside the target
//! but a disc whose checksum matched.

use super::*;
use std::net::TcpListener;
use std::process::Child;

struct Server(Child, u16);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 (scripts/setup.sh test installs it)");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Server(child, port)
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn source(s: &Server, name: &str) -> Source {
    Source {
        url: format!("http://127.0.0.1:{}/{name}", s.1),
        checksum_url: format!("http://127.0.0.1:{}/{name}.sha256", s.1),
    }
}

fn left(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_disc_is_kept_only_when_its_checksum_matches() {
    let served = tempfile::tempdir().expect("tempdir");
    let disc = vec![7u8; 3 << 20];
    std::fs::write(served.path().join("virtio-win.iso"), &disc).expect("write");
    std::fs::write(
        served.path().join("virtio-win.iso.sha256"),
        format!("{}  virtio-win.iso\n", hex(&disc)),
    )
    .expect("write");
    std::fs::write(served.path().join("changed.iso"), b"not the disc").expect("write");
    std::fs::write(served.path().join("changed.iso.sha256"), hex(&disc)).expect("write");
    std::fs::write(served.path().join("bare.iso"), &disc).expect("write");
    std::fs::write(served.path().join("bare.iso.sha256"), "<html>moved</html>").expect("write");
    let s = serve(served.path());
    let out = tempfile::tempdir().expect("tempdir");
    let to = out.path().join("virtio-win.iso");
    let no = AtomicBool::new(false);

    let mut seen = Vec::new();
    let got = download(
        &source(&s, "virtio-win.iso"),
        &to,
        &mut |b, t| seen.push((b, t)),
        &no,
    )
    .expect("downloaded");
    assert_eq!(std::fs::read(&got).expect("read"), disc);
    assert_eq!(
        seen.last(),
        Some(&(disc.len() as u64, Some(disc.len() as u64))),
        "{seen:?}"
    );
    assert_eq!(left(out.path()), ["virtio-win.iso"]);

    let to2 = out.path().join("changed.iso");
    let e = download(&source(&s, "changed.iso"), &to2, &mut |_, _| {}, &no).expect_err("refused");
    assert!(matches!(e, DownloadError::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("deleted"), "{e}");
    let e = download(&source(&s, "bare.iso"), &to2, &mut |_, _| {}, &no).expect_err("refused");
    assert!(matches!(e, DownloadError::NoChecksum { .. }), "{e}");
    let e = download(&source(&s, "missing.iso"), &to2, &mut |_, _| {}, &no).expect_err("refused");
    assert!(
        matches!(e, DownloadError::Fetch { .. }) && e.to_string().contains("404"),
        "{e}"
    );
    let cancel = AtomicBool::new(true);
    let e = download(&source(&s, "virtio-win.iso"), &to2, &mut |_, _| {}, &cancel)
        .expect_err("cancelled");
    assert!(matches!(e, DownloadError::Cancelled), "{e}");
    assert_eq!(left(out.path()), ["virtio-win.iso"], "nothing else is left");
}

#[test]
fn checksum_files_in_the_shapes_publishers_write() {
    let h = "A".repeat(64);
    assert_eq!(
        checksum_in(&format!("{h}  virtio-win.iso\n")),
        Some(h.to_ascii_lowercase())
    );
    assert_eq!(
        checksum_in(&format!(
            "SHA256 (virtio-win.iso) = {}\n",
            h.to_ascii_lowercase()
        )),
        Some(h.to_ascii_lowercase())
    );
    assert_eq!(
        checksum_in("d41d8cd98f00b204e9800998ecf8427e  md5 only\n"),
        None
    );
}
