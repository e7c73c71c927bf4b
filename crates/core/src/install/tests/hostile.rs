//! Broken and hostile images: each is refused with a clear error, in
//! bounded time and memory, never a panic or a hang.

use super::*;
use crate::install::iso::{IsoImage, MediaError};
use crate::install::udf;
use crate::install::windows_iso::inspect;

fn open_err(path: &Path) -> MediaError {
    IsoImage::open(path).unwrap_err()
}

#[test]
fn what_is_no_image_is_refused_with_why() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("notes.txt");
    std::fs::write(&text, "not an image\n".repeat(20_000)).unwrap();
    let err = open_err(&text);
    assert!(matches!(err, MediaError::NotAnImage { .. }), "{err:?}");
    assert!(
        err.to_string().contains("neither a UDF nor an ISO 9660"),
        "{err}"
    );

    let tiny = tmp.path().join("tiny.iso");
    std::fs::write(&tiny, b"CD001").unwrap();
    assert!(open_err(&tiny).to_string().contains("too small"));

    let err = open_err(tmp.path());
    assert!(
        err.to_string()
            .ends_with("is not a disc image: it is a folder, not a file"),
        "{err}"
    );

    let fifo = tmp.path().join("fifo.iso");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let err = open_err(&fifo); // returns at once: no writer is waited for
    assert!(
        err.to_string().contains("a FIFO (named pipe), not a file"),
        "{err}"
    );

    let missing = open_err(&tmp.path().join("missing.iso"));
    assert!(matches!(missing, MediaError::Io { .. }), "{missing:?}");
}

#[test]
fn a_cut_short_windows_image_is_an_error_at_every_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let iso = windows11_iso(tmp.path());
    let bytes = std::fs::read(&iso).unwrap();
    let wim_at = find_all(&bytes, b"MSWIM\0\0\0")
        .into_iter()
        .find(|&at| bytes[at + 8] == 208)
        .unwrap();
    let wim_len = std::fs::metadata(tmp.path().join("install.wim"))
        .unwrap()
        .len() as usize;
    let cut = tmp.path().join("cut.iso");
    // Before the anchor, inside it, inside the XML at the WIM's end, inside its header.
    for len in [
        40_000,
        200 * 2048,
        256 * 2048 + 100,
        wim_at + wim_len - 10,
        wim_at + 100,
    ] {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let err = inspect(&cut).map(|m| m.images.len());
        assert!(err.is_err(), "cut at {len}: {err:?}");
    }
    // Cut inside the install image's header: the image is named as cut short.
    let err = inspect(&cut).unwrap_err();
    assert!(matches!(err, MediaError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("cut short"), "{err}");
}

#[test]
fn a_linux_installer_is_not_windows_and_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("debian");
    write(
        &tree.join(".disk/info"),
        b"Debian GNU/Linux 12.5.0 \"Bookworm\" - Official amd64 NETINST with firmware 20240210-11:27",
    );
    write(&tree.join("dists/bookworm/Release"), b"Origin: Debian");
    write(&tree.join("pool/main/l/linux/README"), b"x");
    write(&tree.join("install.amd/vmlinuz"), b"kernel");
    let iso = tmp.path().join("debian.iso");
    xorriso_iso(&tree, &iso, &["-J", "-R", "-V", "Debian 12.5.0 amd64 n"]);

    let err = inspect(&iso).unwrap_err();
    let MediaError::NotWindows { found } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        found,
        "a Linux disc (\"Debian GNU/Linux 12.5.0 \"Bookworm\" - Official amd64 NETINST with firmware 20240210-11:27\"): no sources/install.wim or install.esd"
    );
    assert!(
        err.to_string()
            .starts_with("this is not a Windows installer image: a Linux disc")
    );
}

#[test]
fn a_wim_with_broken_xml_or_no_header_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let wim = tmp.path().join("install.wim");
    make_wim(tmp.path(), &wim, &[WIN11_PRO]);
    let mut bytes = std::fs::read(&wim).unwrap();
    let size = u64::from_le_bytes([
        bytes[72], bytes[73], bytes[74], bytes[75], bytes[76], bytes[77], bytes[78], 0,
    ]) as usize;
    let offset = u64::from_le_bytes(bytes[80..88].try_into().unwrap()) as usize;
    let garbage = "\u{feff}<WIM><IMAGE INDEX=\"1\"><NAME>broken</IMAGE></NAME>";
    let mut units: Vec<u8> = garbage.encode_utf16().flat_map(u16::to_le_bytes).collect();
    units.resize(size, 0x20);
    bytes[offset..offset + size].copy_from_slice(&units[..size]);
    std::fs::write(&wim, &bytes).unwrap();
    let tree = windows_tree(tmp.path(), &wim, "install.wim");
    write(
        &tree.join("sources/install.esd"),
        b"not looked at: install.wim comes first",
    );
    let iso = tmp.path().join("broken-xml.iso");
    genisoimage_udf(&tree, &iso, "BROKEN", true);
    let err = inspect(&iso).unwrap_err();
    assert!(matches!(err, MediaError::Corrupt { .. }), "{err:?}");
    let said = err.to_string();
    assert!(
        said.contains("/sources/install.wim: its image description (XML) is malformed"),
        "{said}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("fake.wim");
    std::fs::write(&fake, vec![b'x'; 4096]).unwrap();
    let tree = windows_tree(tmp.path(), &fake, "install.wim");
    let iso = tmp.path().join("fake.iso");
    genisoimage_udf(&tree, &iso, "FAKE", false);
    let said = inspect(&iso).unwrap_err().to_string();
    assert!(said.contains("does not start with a WIM header"), "{said}");
}

/// Where the file identifier descriptors of the image are.
fn fids(img: &[u8]) -> Vec<usize> {
    (0..img.len() - 40)
        .step_by(4)
        .filter(|&at| img[at..at + 2] == [1, 1] && udf::check_tag(&img[at..], None) == Ok(257))
        .collect()
}

fn fid_name(img: &[u8], at: usize) -> String {
    let name_len = usize::from(img[at + 19]);
    let use_len = usize::from(u16::from_le_bytes([img[at + 36], img[at + 37]]));
    let from = at + 38 + use_len;
    udf::cs0(&img[from..from + name_len]).unwrap()
}

#[test]
fn a_udf_folder_inside_itself_is_found_not_followed_forever() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write(&tree.join("loop/inner.txt"), b"inner");
    write(&tree.join("top.txt"), b"top");
    let iso = tmp.path().join("loop.iso");
    genisoimage_udf(&tree, &iso, "LOOP", false);
    let mut img = std::fs::read(&iso).unwrap();
    // The root folder's parent entry points at the root itself; the "loop"
    // entry is made to point there too.
    let all = fids(&img);
    let named = all
        .iter()
        .copied()
        .find(|&at| fid_name(&img, at) == "loop")
        .unwrap();
    let parent = all
        .iter()
        .copied()
        .find(|&at| at / 2048 == named / 2048 && img[at + 18] & 0x08 != 0)
        .unwrap();
    let root_icb: Vec<u8> = img[parent + 20..parent + 36].to_vec();
    img[named + 20..named + 36].copy_from_slice(&root_icb);
    let fid_len = (38 + usize::from(img[named + 19])).next_multiple_of(4);
    reseal(&mut img[named..named + fid_len]);
    std::fs::write(&iso, &img).unwrap();

    let image = IsoImage::open(&iso).unwrap();
    assert_eq!(
        image.list("/loop/loop/loop").unwrap(),
        image.list("/").unwrap()
    );
    let deep = format!("/{}top.txt", "loop/".repeat(60));
    assert_eq!(image.read(&deep, 10).unwrap(), b"top");
    assert!(!image.exists(&format!("/{}top.txt", "loop/".repeat(70))));

    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let err = image.extract_dir("/", &out, 1 << 20).unwrap_err();
    assert!(
        err.to_string()
            .contains("/loop is one already met on the way (a loop)"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing is written"
    );
}

#[test]
fn a_udf_descriptor_with_a_bad_crc_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write(&tree.join("a.txt"), b"a");
    let iso = tmp.path().join("crc.iso");
    genisoimage_udf(&tree, &iso, "CRC", false);
    let mut img = std::fs::read(&iso).unwrap();
    let mut hit = 0;
    for at in (0..img.len()).step_by(2048) {
        let id = u16::from_le_bytes([img[at], img[at + 1]]);
        if (id == 261 || id == 266) && udf::check_tag(&img[at..at + 2048], None).is_ok() {
            img[at + 40] ^= 0xFF; // inside the CRC, outside the tag
            hit += 1;
        }
    }
    assert!(hit > 0);
    std::fs::write(&iso, &img).unwrap();
    let err = open_err(&iso);
    assert!(err.to_string().contains("its CRC is wrong"), "{err}");
}

#[test]
fn a_file_whose_data_lies_past_the_end_is_refused_when_read() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write(&tree.join("virtio-win-guest-tools.exe"), b"MZ tools");
    write(&tree.join("viostor/viostor.inf"), b"inf");
    let iso = tmp.path().join("past.iso");
    xorriso_iso(&tree, &iso, &["-J", "-R", "-V", "PAST"]);
    let mut img = std::fs::read(&iso).unwrap();
    let name = utf16be("virtio-win-guest-tools.exe");
    let mut patched = 0;
    for at in find_all(&img, &name) {
        let rec = at - 33;
        if usize::from(img[rec + 32]) >= name.len() && img[rec] as usize >= 33 + name.len() {
            img[rec + 2..rec + 6].copy_from_slice(&0x00F0_0000u32.to_le_bytes());
            img[rec + 6..rec + 10].copy_from_slice(&0x00F0_0000u32.to_be_bytes());
            patched += 1;
        }
    }
    assert_eq!(patched, 1, "the Joliet record");
    std::fs::write(&iso, &img).unwrap();

    let image = IsoImage::open(&iso).unwrap();
    assert!(image.exists("/virtio-win-guest-tools.exe"));
    let err = image.read("/virtio-win-guest-tools.exe", 100).unwrap_err();
    assert!(matches!(err, MediaError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("cut short or damaged"), "{err}");
    assert_eq!(image.read("/viostor/viostor.inf", 100).unwrap(), b"inf");
}

#[test]
fn a_name_that_would_leave_the_folder_is_not_copied_out() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write(&tree.join("drivers/evil-name"), b"gotcha");
    write(&tree.join("drivers/good.inf"), b"inf");
    let iso = tmp.path().join("names.iso");
    xorriso_iso(&tree, &iso, &["-J", "-R", "-V", "NAMES"]);
    let mut img = std::fs::read(&iso).unwrap();
    let (from, to) = (utf16be("evil-name"), utf16be("../../etc"));
    for at in find_all(&img, &from) {
        img[at..at + from.len()].copy_from_slice(&to);
    }
    std::fs::write(&iso, &img).unwrap();

    let image = IsoImage::open(&iso).unwrap();
    assert!(
        image
            .list("/drivers")
            .unwrap()
            .iter()
            .any(|e| e.name == "../../etc")
    );
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let err = image.extract_dir("/drivers", &out, 1 << 20).unwrap_err();
    assert!(matches!(err, MediaError::BadName { .. }), "{err:?}");
    assert!(
        err.to_string().contains("\"../../etc\" in /drivers"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}

#[test]
fn a_udf_folder_claiming_a_terabyte_is_refused_before_it_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write(&tree.join("a.txt"), b"a");
    let iso = tmp.path().join("huge.iso");
    genisoimage_udf(&tree, &iso, "HUGE", false);
    let mut img = std::fs::read(&iso).unwrap();
    // The first folder's file entry is the root's.
    let root = (0..img.len())
        .step_by(2048)
        .find(|&at| img[at..at + 2] == 261u16.to_le_bytes() && img[at + 27] == 4)
        .unwrap();
    img[root + 56..root + 64].copy_from_slice(&(1u64 << 40).to_le_bytes());
    reseal(&mut img[root..root + 2048]);
    std::fs::write(&iso, &img).unwrap();

    let image = IsoImage::open(&iso).unwrap();
    let err = image.list("/").unwrap_err();
    assert!(
        err.to_string()
            .contains("the folder / says it is 1099511627776 bytes long"),
        "{err}"
    );
    assert!(!image.exists("/a.txt"));
}
