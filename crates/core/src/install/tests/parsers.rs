//! The pure pieces: tag CRCs, compressed unicode, WIM headers and XML,
//! Windows versions, safe names, and reads through a file's extents.

use crate::install::iso::{Disc, Extent, MediaError, Node};
use crate::install::wim::{WimImage, parse_header, parse_xml};
use crate::install::windows_iso::{WindowsMedia, WindowsVersion};
use crate::install::{extract, udf};

#[test]
fn tag_crc_is_ecma_167s_crc() {
    // CRC-16/XMODEM's check value, the same polynomial and start.
    assert_eq!(udf::crc_itu(b"123456789"), 0x31C3);
    let mut desc = vec![0u8; 64];
    desc[0] = 5; // a partition descriptor
    desc[10] = 48; // CRC over the 48 bytes after the tag
    desc[12] = 42; // at block 42
    desc[20] = 7;
    let crc = udf::crc_itu(&desc[16..64]);
    desc[8..10].copy_from_slice(&crc.to_le_bytes());
    desc[4] = desc[..16].iter().fold(0u8, |a, b| a.wrapping_add(*b));
    assert_eq!(udf::check_tag(&desc, Some(42)), Ok(5));
    assert!(
        udf::check_tag(&desc, Some(43))
            .unwrap_err()
            .to_string()
            .contains("at block 42, not 43")
    );
    let mut bad_sum = desc.clone();
    bad_sum[4] ^= 1;
    assert_eq!(udf::check_tag(&bad_sum, None), Err(udf::UdfFault::Checksum));
    desc[30] = 1;
    assert_eq!(udf::check_tag(&desc, None), Err(udf::UdfFault::Crc));
    assert!(udf::check_tag(&desc[..40], None).is_err());
}

#[test]
fn compressed_unicode_names() {
    assert_eq!(udf::cs0(&[8, b'a', 0xE9]).unwrap(), "aé");
    assert_eq!(udf::cs0(&[16, 0x00, b'A', 0x04, 0x16]).unwrap(), "AЖ");
    assert_eq!(udf::cs0(&[]).unwrap(), "");
    assert!(
        udf::cs0(&[7, b'a'])
            .unwrap_err()
            .to_string()
            .contains("compression 7")
    );
}

fn header(xml_size: u64, flags: u8, xml_offset: u64) -> Vec<u8> {
    let mut h = vec![0u8; 208];
    h[..8].copy_from_slice(b"MSWIM\0\0\0");
    h[8..12].copy_from_slice(&208u32.to_le_bytes());
    h[72..79].copy_from_slice(&xml_size.to_le_bytes()[..7]);
    h[79] = flags;
    h[80..88].copy_from_slice(&xml_offset.to_le_bytes());
    h
}

#[test]
fn wim_headers_are_checked() {
    let ok = parse_header(&header(100, 0x02, 1000), 1100).unwrap();
    assert_eq!((ok.offset, ok.size), (1000, 100));
    assert!(
        parse_header(&[b'x'; 208], 1100)
            .unwrap_err()
            .to_string()
            .contains("WIM header")
    );
    assert!(
        parse_header(&header(100, 0x04, 1000), 1100)
            .unwrap_err()
            .to_string()
            .contains("compressed")
    );
    assert!(
        parse_header(&header(100, 0, 1001), 1100)
            .unwrap_err()
            .to_string()
            .contains("bytes 1001..1101")
    );
    assert!(
        parse_header(&header(u64::MAX >> 8, 0, 0), u64::MAX)
            .unwrap_err()
            .to_string()
            .contains("more than")
    );
    assert!(
        parse_header(&header(0, 0, 0), 1100)
            .unwrap_err()
            .to_string()
            .contains("no image description")
    );
    assert!(parse_header(&header(100, 0, u64::MAX), 1100).is_err());
    assert!(parse_header(&header(100, 0, 1000)[..100], 1100).is_err());
}

fn utf16le(s: &str) -> Vec<u8> {
    format!("\u{feff}{s}")
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect()
}

#[test]
fn wim_xml_gives_each_images_facts() {
    let xml = r#"<WIM><TOTALBYTES>5</TOTALBYTES>
      <IMAGE INDEX="2"><NAME>Windows 11 Pro for Workstations &amp; more</NAME>
        <WINDOWS><ARCH>12</ARCH><EDITIONID>ProfessionalWorkstation</EDITIONID>
          <INSTALLATIONTYPE>Client</INSTALLATIONTYPE>
          <LANGUAGES><LANGUAGE>en-US</LANGUAGE><LANGUAGE>de-DE</LANGUAGE><DEFAULT>en-US</DEFAULT></LANGUAGES>
          <VERSION><MAJOR>10</MAJOR><BUILD>26100</BUILD></VERSION></WINDOWS></IMAGE>
      <IMAGE INDEX="1"><NAME>Windows Server 2022</NAME>
        <WINDOWS><ARCH>0</ARCH><INSTALLATIONTYPE>Server</INSTALLATIONTYPE><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
      <IMAGE INDEX="3"><NAME>Odd</NAME><WINDOWS><ARCH>99</ARCH></WINDOWS></IMAGE></WIM>"#;
    let images = parse_xml(&utf16le(xml)).unwrap();
    assert_eq!(
        images.iter().map(|i| i.index).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        images[1],
        WimImage {
            index: 2,
            name: "Windows 11 Pro for Workstations & more".into(),
            edition_id: "ProfessionalWorkstation".into(),
            build: 26100,
            arch: "arm64".into(),
            languages: vec!["en-US".into(), "de-DE".into()],
            installation_type: "Client".into(),
        }
    );
    assert_eq!((images[0].arch.as_str(), images[0].build), ("x86", 20348));
    assert_eq!(images[2].arch, "99");
}

#[test]
fn broken_wim_xml_is_an_error() {
    let no_index = parse_xml(&utf16le("<WIM><IMAGE><NAME>x</NAME></IMAGE></WIM>"));
    assert!(no_index.unwrap_err().to_string().contains("no number"));
    let crossed = parse_xml(&utf16le(
        "<WIM><IMAGE INDEX=\"1\"><NAME>x</IMAGE></NAME></WIM>",
    ));
    assert!(crossed.unwrap_err().to_string().contains("malformed"));
    assert!(
        parse_xml(&utf16le("<WIM></WIM>"))
            .unwrap_err()
            .to_string()
            .contains("lists no images")
    );
    assert!(
        parse_xml(&utf16le("plain words"))
            .unwrap_err()
            .to_string()
            .contains("lists no images")
    );
    assert!(
        parse_xml(&[0x3C, 0x00, 0x57])
            .unwrap_err()
            .to_string()
            .contains("odd length")
    );
    assert!(
        parse_xml(&[0x00, 0xD8, 0x41, 0x00])
            .unwrap_err()
            .to_string()
            .contains("not UTF-16")
    );
    let deep = format!("<WIM>{}", "<A>".repeat(100));
    assert!(
        parse_xml(&utf16le(&deep))
            .unwrap_err()
            .to_string()
            .contains("too deep")
    );
}

fn image(build: u32, kind: &str) -> WimImage {
    WimImage {
        build,
        installation_type: kind.into(),
        ..WimImage::default()
    }
}

#[test]
fn windows_versions_by_build() {
    assert_eq!(
        WindowsVersion::from_build(22000),
        Some(WindowsVersion::Windows11)
    );
    assert_eq!(
        WindowsVersion::from_build(21999),
        Some(WindowsVersion::Windows10)
    );
    assert_eq!(
        WindowsVersion::from_build(10240),
        Some(WindowsVersion::Windows10)
    );
    assert_eq!(WindowsVersion::from_build(9600), None);
    let media = |images| WindowsMedia {
        label: String::new(),
        wim_path: String::new(),
        images,
    };
    assert_eq!(
        media(vec![image(19045, "Client"), image(19045, "Client")]).version(),
        Some(WindowsVersion::Windows10)
    );
    assert_eq!(
        media(vec![image(19045, "Client"), image(22631, "Client")]).version(),
        None
    );
    assert_eq!(media(vec![image(20348, "Server")]).version(), None);
    assert_eq!(media(vec![]).version(), None);
}

#[test]
fn only_plain_names_are_safe_to_copy_out() {
    for good in ["viostor.inf", "NetKVM", "a b", "ü.txt", "..x"] {
        assert!(extract::safe_name(good), "{good}");
    }
    for bad in [
        "",
        ".",
        "..",
        "a/b",
        "a\\b",
        "a\0b",
        "line\nbreak",
        &"x".repeat(256),
    ] {
        assert!(!extract::safe_name(bad), "{bad:?}");
    }
}

#[test]
fn reads_go_through_every_kind_of_extent() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("disc.img");
    let mut bytes: Vec<u8> = (0..40 * 2048).map(|i| (i % 251) as u8).collect();
    bytes[36_000..36_004].copy_from_slice(b"TAIL");
    std::fs::write(&path, &bytes).unwrap();
    let disc = Disc::open(&path).unwrap();
    let node = Node {
        name: "pieces".into(),
        is_dir: false,
        size: 21,
        extents: vec![
            Extent::Image {
                offset: 34_816,
                len: 10,
            },
            Extent::Zeros { len: 4 },
            Extent::Inline(vec![7, 7, 7]),
            Extent::Image {
                offset: 36_000,
                len: 4,
            },
        ],
        id: 0,
    };
    let whole = disc.read_node(&node, 0, 21).unwrap();
    let mut want: Vec<u8> = bytes[34_816..34_826].to_vec();
    want.extend([0, 0, 0, 0, 7, 7, 7]);
    want.extend(b"TAIL");
    assert_eq!(whole, want);
    assert_eq!(disc.read_node(&node, 8, 8).unwrap(), want[8..16]);
    assert_eq!(disc.read_node(&node, 17, 4).unwrap(), b"TAIL");
    let short = disc.read_node(&node, 18, 4).unwrap_err();
    assert!(
        short.to_string().contains("ends before its recorded size"),
        "{short}"
    );
    let past = Node {
        extents: vec![Extent::Image {
            offset: 81_900,
            len: 100,
        }],
        ..node
    };
    assert!(matches!(
        disc.read_node(&past, 0, 100),
        Err(MediaError::Corrupt { .. })
    ));
}
