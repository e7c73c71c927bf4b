//! Windows-like installer images: the install image found through UDF
//! (which alone carries it), its images read from the WIM or ESD's XML.

use super::*;
use crate::install::iso::{Disc, Filesystem, IsoImage, MediaError};
use crate::install::windows_iso::{WindowsVersion, inspect};
use crate::install::{iso9660, udf};

#[test]
fn windows_11_media_are_read_through_udf_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let iso = windows11_iso(tmp.path());

    let media = inspect(&iso).unwrap();
    assert_eq!(media.label, "CCCOMA_X64FRE_EN-US_DV9");
    assert_eq!(media.wim_path, "/sources/install.wim");
    assert_eq!(media.version(), Some(WindowsVersion::Windows11));
    let names: Vec<_> = media.images.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["Windows 11 Pro", "Windows 11 Home"]);
    let pro = &media.images[0];
    assert_eq!(pro.index, 1);
    assert_eq!(pro.edition_id, "Professional");
    assert_eq!(pro.build, 22631);
    assert_eq!(pro.arch, "amd64");
    assert_eq!(pro.languages, ["en-US"]);
    assert_eq!(pro.installation_type, "Client");
    assert_eq!(media.images[1].edition_id, "Core");

    // The image is read through UDF; its ISO 9660 part, read on its own,
    // lacks the install image, as on Microsoft's media.
    let image = IsoImage::open(&iso).unwrap();
    assert_eq!(image.filesystem(), Filesystem::Udf);
    let disc = Disc::open(&iso).unwrap();
    let vds = iso9660::scan_descriptors(&disc).unwrap();
    assert!(vds.has_udf);
    let plain = iso9660::Iso9660::open(&disc, &vds).unwrap().unwrap();
    let top: Vec<String> = plain
        .read_dir(&disc, &plain.root)
        .unwrap()
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert!(
        !top.iter().any(|n| n.eq_ignore_ascii_case("sources")),
        "{top:?}"
    );
    let udf = udf::Udf::open(&disc).unwrap();
    assert_eq!(udf.label, "CCCOMA_X64FRE_EN-US_DV9");
    let top: Vec<String> = udf
        .read_dir(&disc, &udf.root)
        .unwrap()
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert!(top.contains(&"sources".to_string()), "{top:?}");
}

#[test]
fn udf_files_read_back_as_they_were_put_in() {
    let tmp = tempfile::tempdir().unwrap();
    let iso = windows11_iso(tmp.path());
    let wim = std::fs::read(tmp.path().join("install.wim")).unwrap();
    let image = IsoImage::open(&iso).unwrap();

    assert_eq!(image.read("/SOURCES/Install.WIM", 1 << 20).unwrap(), wim);
    assert_eq!(
        image.read_at("/sources/install.wim", 100, 300).unwrap(),
        wim[100..400]
    );
    let top = image.list("/").unwrap();
    let names: Vec<&str> = top.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["README.TXT", "efi", "setup.exe", "sources"]);
    assert!(top[3].is_dir);
    assert_eq!(top[2].size, 8);
    assert!(image.exists("/efi/BOOT/bootx64.efi"));
    assert!(!image.exists("/efi/boot/bootaa64.efi"));

    match image.read("/sources/install.wim", 100) {
        Err(MediaError::TooLarge { size, max: 100, .. }) => assert_eq!(size, wim.len() as u64),
        other => panic!("{other:?}"),
    }
    let past = image.read_at("/sources/install.wim", wim.len() as u64 - 10, 20);
    assert!(matches!(past, Err(MediaError::Corrupt { .. })), "{past:?}");
    assert!(matches!(
        image.read("/sources", 1 << 20),
        Err(MediaError::IsADirectory { .. })
    ));
    assert!(matches!(
        image.list("/setup.exe"),
        Err(MediaError::NotADirectory { .. })
    ));
    assert!(matches!(
        image.read("/nope.txt", 10),
        Err(MediaError::NotFound { .. })
    ));
}

#[test]
fn windows_10_media_say_windows_10() {
    let tmp = tempfile::tempdir().unwrap();
    let wim = tmp.path().join("install.wim");
    let win10 = Win {
        name: "Windows 10 Pro",
        build: 19045,
        ..WIN11_PRO
    };
    make_wim(tmp.path(), &wim, &[win10]);
    let tree = windows_tree(tmp.path(), &wim, "install.wim");
    let iso = tmp.path().join("win10.iso");
    genisoimage_udf(&tree, &iso, "CCCOMA_X64FRE_EN-US_DV9", true);

    let media = inspect(&iso).unwrap();
    assert_eq!(media.version(), Some(WindowsVersion::Windows10));
    assert_eq!(media.images.len(), 1);
    assert_eq!(media.images[0].build, 19045);
}

#[test]
fn esd_media_are_read_like_wim_media() {
    let tmp = tempfile::tempdir().unwrap();
    let wim = tmp.path().join("install.wim");
    let arm = Win {
        arch: 12,
        language: "de-DE",
        ..WIN11_HOME
    };
    make_wim(tmp.path(), &wim, &[WIN11_PRO, arm]);
    let esd = tmp.path().join("install.esd");
    run(Command::new("wimlib-imagex")
        .arg("export")
        .arg(&wim)
        .arg("all")
        .arg(&esd)
        .arg("--solid"));
    let tree = windows_tree(tmp.path(), &esd, "install.esd");
    let iso = tmp.path().join("esd.iso");
    genisoimage_udf(&tree, &iso, "ESD-ISO", false);

    let media = inspect(&iso).unwrap();
    assert_eq!(media.wim_path, "/sources/install.esd");
    assert_eq!(media.label, "ESD-ISO");
    assert_eq!(media.images.len(), 2);
    assert_eq!(media.images[1].arch, "arm64");
    assert_eq!(media.images[1].languages, ["de-DE"]);
    assert_eq!(media.version(), Some(WindowsVersion::Windows11));
}

/// The sector of the UDF file entry of the only file of `size` bytes.
fn file_entry_of_size(img: &[u8], size: u64) -> usize {
    let hits: Vec<usize> = (0..img.len())
        .step_by(2048)
        .filter(|&at| {
            img[at..at + 2] == 261u16.to_le_bytes()
                && img[at + 27] == 5
                && img[at + 56..at + 64] == size.to_le_bytes()
        })
        .collect();
    assert_eq!(hits.len(), 1, "one file entry of {size} bytes");
    hits[0]
}

/// Rewrites a file entry's allocation descriptors (flags & 7 = `kind`).
fn set_ads(img: &mut [u8], fe: usize, kind: u16, ads: &[u8]) {
    assert_eq!(img[fe + 168..fe + 172], [0; 4], "no extended attributes");
    let flags = u16::from_le_bytes([img[fe + 34], img[fe + 35]]) & !7 | kind;
    img[fe + 34..fe + 36].copy_from_slice(&flags.to_le_bytes());
    img[fe + 172..fe + 176].copy_from_slice(&(ads.len() as u32).to_le_bytes());
    img[fe + 176..fe + 176 + ads.len()].copy_from_slice(ads);
    let crc_len = (176 + ads.len() - 16) as u16;
    img[fe + 10..fe + 12].copy_from_slice(&crc_len.to_le_bytes());
    reseal(&mut img[fe..fe + 2048]);
}

#[test]
fn a_udf_file_in_several_extents_reads_back_through_each() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
    let other: Vec<u8> = (0..5001u32).map(|i| (i % 241) as u8).collect();
    write(&tree.join("short.bin"), &data);
    write(&tree.join("long.bin"), &other);
    let iso = tmp.path().join("pieces.iso");
    genisoimage_udf(&tree, &iso, "PIECES", false);
    let mut img = std::fs::read(&iso).unwrap();

    // short.bin: a recorded block, an allocated-but-unrecorded one (zeros), the rest.
    let fe = file_entry_of_size(&img, 5000);
    let block = u32::from_le_bytes(img[fe + 180..fe + 184].try_into().unwrap());
    let short_ad = |len: u32, pos: u32| [len.to_le_bytes(), pos.to_le_bytes()].concat();
    let ads = [
        short_ad(2048, block),
        short_ad(1 << 30 | 2048, 0),
        short_ad(904, block + 2),
    ]
    .concat();
    set_ads(&mut img, fe, 0, &ads);
    // long.bin: the same data in two long allocation descriptors.
    let fe = file_entry_of_size(&img, 5001);
    let block = u32::from_le_bytes(img[fe + 180..fe + 184].try_into().unwrap());
    let long_ad =
        |len: u32, pos: u32| [&len.to_le_bytes()[..], &pos.to_le_bytes(), &[0; 8]].concat();
    set_ads(
        &mut img,
        fe,
        1,
        &[long_ad(2048, block), long_ad(2953, block + 1)].concat(),
    );
    std::fs::write(&iso, &img).unwrap();

    let image = IsoImage::open(&iso).unwrap();
    let mut want = data[..2048].to_vec();
    want.extend([0; 2048]);
    want.extend(&data[4096..]);
    assert_eq!(image.read("/short.bin", 1 << 20).unwrap(), want);
    assert_eq!(
        image.read_at("/short.bin", 2040, 16).unwrap(),
        [&data[2040..2048], &[0; 8][..]].concat()
    );
    assert_eq!(
        image.read_at("/short.bin", 4090, 10).unwrap(),
        want[4090..4100]
    );
    assert_eq!(image.read("/long.bin", 1 << 20).unwrap(), other);
    assert_eq!(
        image.read_at("/long.bin", 2000, 100).unwrap(),
        other[2000..2100]
    );
}
