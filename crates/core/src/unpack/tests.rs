use super::*;

#[test]
fn link_targets_are_kept_inside() {
    let t = |link: &str, target: &str| {
        inside_target(Path::new(link), Path::new(target)).map(|p| p.display().to_string())
    };
    assert_eq!(
        t("sys/bus/pci/devices/x", "../../../devices/pci0000:00/x"),
        None
    );
    assert_eq!(
        t("proc/cmdline", "/home/me/secret").as_deref(),
        Some("../home/me/secret")
    );
    assert_eq!(t("sys/evil", "../../../../etc").as_deref(), Some("../etc"));
    assert_eq!(t("top", "/").as_deref(), Some("."));
}

/// A gzip tar of raw entries: (name as stored, kind, link target, data).
/// Names are written into the header by hand, as a hostile tool would.
fn archive(entries: &[Raw]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, kind, target, data) in entries {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.as_old_mut().linkname[..target.len()].copy_from_slice(target.as_bytes());
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn unpack(bytes: &[u8], limits: &Limits) -> (tempfile::TempDir, Result<UnpackReport, UnpackError>) {
    let top = tempfile::tempdir().unwrap();
    let dest = top.path().join("dest");
    fs::create_dir(&dest).unwrap();
    let r = unpack_tar_gz(bytes, "t.tar.gz", &dest, limits);
    (top, r)
}

use tar::EntryType as T;

/// An entry as `archive` takes it: (name, kind, link target, data).
type Raw<'a> = (&'a str, T, &'a str, &'a [u8]);

#[test]
fn hostile_entries_are_refused_and_land_nowhere() {
    let cases: [(&[Raw], &str); 9] = [
        (&[("../evil", T::Regular, "", b"x")], "outside"),
        (&[("/tmp/evil", T::Regular, "", b"x")], "outside"),
        (&[("sys/../../evil", T::Regular, "", b"x")], "outside"),
        (
            &[
                ("a", T::Symlink, "..", b""),
                ("a/evil", T::Regular, "", b"x"),
            ],
            "not a folder",
        ),
        (&[("h", T::Link, "/outside/passwd", b"")], "hard link"),
        (&[("p", T::Fifo, "", b"")], "FIFO"),
        (&[("d", T::Char, "", b"")], "character device"),
        // Through a link to the top: u/.. is the folder's parent.
        (
            &[
                ("u", T::Symlink, ".", b""),
                ("var", T::Symlink, "u/..", b""),
            ],
            "var: a link to u/.., which goes through u, itself a link",
        ),
        // The other order: the link on the way comes after.
        (
            &[
                ("d/", T::Directory, "", b""),
                ("d/w", T::Symlink, "../x/..", b""),
                ("x", T::Symlink, ".", b""),
            ],
            "x: a link where an earlier link's target passes through",
        ),
    ];
    for (entries, says) in cases {
        let (top, r) = unpack(&archive(entries), &Limits::SNAPSHOT);
        let e = r.unwrap_err().to_string();
        assert!(e.contains(says), "{entries:?}: {e}");
        // Nothing beside the destination.
        let beside: Vec<_> = fs::read_dir(top.path()).unwrap().collect();
        assert_eq!(beside.len(), 1, "{entries:?}");
    }
}

#[test]
fn links_that_leave_are_kept_pointing_inside() {
    let bytes = archive(&[
        ("proc/", T::Directory, "", b""),
        ("proc/cmdline", T::Symlink, "/home/me/secret", b""),
        (
            "sys/bus/pci/devices/x",
            T::Symlink,
            "../../../devices/x",
            b"",
        ),
        ("sys/devices/x/vendor", T::Regular, "", b"0x10de\n"),
    ]);
    let (top, r) = unpack(&bytes, &Limits::SNAPSHOT);
    let r = r.unwrap();
    assert_eq!((r.files, r.symlinks, r.links_rewritten), (1, 2, 1));
    let dest = top.path().join("dest");
    assert_eq!(
        fs::read_link(dest.join("proc/cmdline")).unwrap(),
        Path::new("../home/me/secret")
    );
    assert_eq!(
        fs::read_to_string(dest.join("sys/bus/pci/devices/x/vendor")).unwrap(),
        "0x10de\n"
    );
}

/// `u -> .` then `var -> u/../beside`: each target stays inside when
/// read as text, yet `var` is the file beside the unpacked folder.
#[test]
fn a_link_through_a_link_does_not_lead_out() {
    let bytes = archive(&[
        ("u", T::Symlink, ".", b""),
        ("var", T::Symlink, "u/../beside", b""),
    ]);
    let top = tempfile::tempdir().unwrap();
    let dest = top.path().join("dest");
    fs::create_dir(&dest).unwrap();
    fs::write(top.path().join("beside"), "not the archive's").unwrap();
    let e = unpack_tar_gz(&bytes[..], "t.tar.gz", &dest, &Limits::SNAPSHOT)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.tar.gz: var: a link to u/../beside, which goes through u"),
        "{e}"
    );
    assert!(fs::symlink_metadata(dest.join("var")).is_err(), "not made");
}

/// Folders 0700, files 0600, 0700 where the archive had an executable
/// bit (a hook): the user's alone, whatever modes the archive says.
#[test]
fn what_is_unpacked_is_the_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, kind, mode, data) in [
        ("etc/", T::Directory, 0o777, &b""[..]),
        (
            "etc/libvirt/qemu.conf",
            T::Regular,
            0o666,
            b"user = \"me\"\n",
        ),
        ("etc/libvirt/hooks/qemu", T::Regular, 0o755, b"#!/bin/sh\n"),
        ("etc/libvirt/hooks/other", T::Regular, 0o001, b"#!/bin/sh\n"),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, name, data).unwrap();
    }
    let bytes = b.into_inner().unwrap().finish().unwrap();
    let (top, r) = unpack(&bytes, &Limits::SNAPSHOT);
    r.unwrap();
    let dest = top.path().join("dest");
    let mode = |rel: &str| fs::metadata(dest.join(rel)).unwrap().permissions().mode() & 0o7777;
    for dir in ["etc", "etc/libvirt", "etc/libvirt/hooks"] {
        assert_eq!(mode(dir), DIR_MODE, "{dir}");
    }
    assert_eq!(mode("etc/libvirt/qemu.conf"), FILE_MODE);
    assert_eq!(mode("etc/libvirt/hooks/qemu"), EXEC_MODE);
    assert_eq!(mode("etc/libvirt/hooks/other"), EXEC_MODE);
}

#[test]
fn bombs_stop_at_the_caps() {
    let zeros = vec![0u8; 4 << 20];
    let bytes = archive(&[("big", T::Regular, "", &zeros)]);
    assert!(bytes.len() < 64 << 10, "a bomb: {} bytes", bytes.len());
    let small = Limits {
        max_stream_bytes: 1 << 20,
        ..Limits::SNAPSHOT
    };
    let e = unpack(&bytes, &small).1.unwrap_err().to_string();
    assert!(e.contains("more than 1 MiB"), "{e}");
    let few_bytes = Limits {
        max_file_bytes: 1 << 20,
        ..Limits::SNAPSHOT
    };
    let e = unpack(&bytes, &few_bytes).1.unwrap_err().to_string();
    assert!(e.contains("more than 1 MiB"), "{e}");
    let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    let many: Vec<Raw> = names
        .iter()
        .map(|n| (n.as_str(), T::Regular, "", &b""[..]))
        .collect();
    let few_entries = Limits {
        max_entries: 10,
        ..Limits::SNAPSHOT
    };
    let e = unpack(&archive(&many), &few_entries)
        .1
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 10 entries"), "{e}");
    // Not gzip at all, or cut off: an error.
    assert!(unpack(b"plain text", &Limits::SNAPSHOT).1.is_err());
    let whole = archive(&[("f", T::Regular, "", b"data")]);
    assert!(
        unpack(&whole[..whole.len() / 2], &Limits::SNAPSHOT)
            .1
            .is_err()
    );
}

#[test]
fn paths_outside_are_none() {
    assert_eq!(
        clean_path(Path::new("./sys/x")),
        Some(PathBuf::from("sys/x"))
    );
    assert_eq!(clean_path(Path::new("/outside/passwd")), None);
    assert_eq!(clean_path(Path::new("sys/../../x")), None);
}
