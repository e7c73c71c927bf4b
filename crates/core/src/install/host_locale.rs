//! The host's language, keyboard and time zone, in the names Windows Setup
//! reads: a user who installs Windows from this host wants the same keys
//! under their fingers and the same clock. Read through the `HostRoot` from
//! the files each family keeps them in (systemd's `locale.conf` and
//! `vconsole.conf`, Debian's `default/locale` and `default/keyboard`, X11's
//! `00-keyboard.conf`, `timezone` or the `localtime` link). What has no
//! Windows name here falls back to US English, the US keyboard or UTC, and
//! says so in `notes`.

use crate::sysroot::{HostPath, HostRoot};

/// What the answer file's International and Shell-Setup components take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLocale {
    /// A language tag, e.g. "de-DE": the UI, system and user locale.
    pub language: String,
    /// Windows' input locale, language id and keyboard layout id, e.g.
    /// "0407:00000407".
    pub input_locale: String,
    /// A Windows time zone name, e.g. "W. Europe Standard Time".
    pub time_zone: String,
    /// What was guessed, and why.
    pub notes: Vec<String>,
}

/// XKB layout (or console keymap stem) → Windows input locale. From
/// Microsoft's "Default input profiles (input locales) in Windows".
const KEYBOARDS: &[(&str, &str)] = &[
    ("us", "0409:00000409"),
    ("us-intl", "0409:00020409"),
    ("gb", "0809:00000809"),
    ("uk", "0809:00000809"),
    ("ie", "1809:00001809"),
    ("de", "0407:00000407"),
    ("at", "0c07:00000407"),
    ("ch", "0807:00000807"),
    ("fr", "040c:0000040c"),
    ("be", "080c:0000080c"),
    ("ca", "0c0c:00001009"),
    ("es", "0c0a:0000040a"),
    ("latam", "080a:0000080a"),
    ("it", "0410:00000410"),
    ("nl", "0413:00000413"),
    ("se", "041d:0000041d"),
    ("sv", "041d:0000041d"),
    ("no", "0414:00000414"),
    ("dk", "0406:00000406"),
    ("fi", "040b:0000040b"),
    ("pl", "0415:00000415"),
    ("pt", "0816:00000816"),
    ("br", "0416:00000416"),
    ("ru", "0419:00000419"),
    ("ua", "0422:00000422"),
    ("cz", "0405:00000405"),
    ("sk", "041b:0000041b"),
    ("hu", "040e:0000040e"),
    ("tr", "041f:0000041f"),
    ("gr", "0408:00000408"),
    ("jp", "0411:00000411"),
    ("kr", "0412:00000412"),
];

/// IANA zone → Windows zone, the common ones (CLDR's windowsZones.xml).
const ZONES: &[(&str, &str)] = &[
    ("UTC", "UTC"),
    ("Etc/UTC", "UTC"),
    ("Europe/London", "GMT Standard Time"),
    ("Europe/Dublin", "GMT Standard Time"),
    ("Europe/Lisbon", "GMT Standard Time"),
    ("Europe/Berlin", "W. Europe Standard Time"),
    ("Europe/Amsterdam", "W. Europe Standard Time"),
    ("Europe/Vienna", "W. Europe Standard Time"),
    ("Europe/Zurich", "W. Europe Standard Time"),
    ("Europe/Rome", "W. Europe Standard Time"),
    ("Europe/Stockholm", "W. Europe Standard Time"),
    ("Europe/Oslo", "W. Europe Standard Time"),
    ("Europe/Paris", "Romance Standard Time"),
    ("Europe/Brussels", "Romance Standard Time"),
    ("Europe/Madrid", "Romance Standard Time"),
    ("Europe/Copenhagen", "Romance Standard Time"),
    ("Europe/Prague", "Central Europe Standard Time"),
    ("Europe/Budapest", "Central Europe Standard Time"),
    ("Europe/Bratislava", "Central Europe Standard Time"),
    ("Europe/Warsaw", "Central European Standard Time"),
    ("Europe/Helsinki", "FLE Standard Time"),
    ("Europe/Kyiv", "FLE Standard Time"),
    ("Europe/Kiev", "FLE Standard Time"),
    ("Europe/Athens", "GTB Standard Time"),
    ("Europe/Istanbul", "Turkey Standard Time"),
    ("Europe/Moscow", "Russian Standard Time"),
    ("America/New_York", "Eastern Standard Time"),
    ("America/Toronto", "Eastern Standard Time"),
    ("America/Chicago", "Central Standard Time"),
    ("America/Denver", "Mountain Standard Time"),
    ("America/Phoenix", "US Mountain Standard Time"),
    ("America/Los_Angeles", "Pacific Standard Time"),
    ("America/Vancouver", "Pacific Standard Time"),
    ("America/Sao_Paulo", "E. South America Standard Time"),
    ("America/Mexico_City", "Central Standard Time (Mexico)"),
    ("Asia/Tokyo", "Tokyo Standard Time"),
    ("Asia/Seoul", "Korea Standard Time"),
    ("Asia/Shanghai", "China Standard Time"),
    ("Asia/Singapore", "Singapore Standard Time"),
    ("Asia/Kolkata", "India Standard Time"),
    ("Australia/Sydney", "AUS Eastern Standard Time"),
    ("Australia/Melbourne", "AUS Eastern Standard Time"),
    ("Australia/Brisbane", "E. Australia Standard Time"),
    ("Australia/Perth", "W. Australia Standard Time"),
    ("Pacific/Auckland", "New Zealand Standard Time"),
];

/// A `KEY=value` line's value, quotes taken off.
fn assignment(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.trim().split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches(['"', '\'']).to_string())
    })
}

/// `Option "XkbLayout" "de"` in an X11 InputClass section.
fn xorg_layout(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut words = l.split('"').map(str::trim).filter(|w| !w.is_empty());
        (words.next()? == "Option" && words.next()?.eq_ignore_ascii_case("XkbLayout"))
            .then(|| words.next().map(str::to_string))
            .flatten()
    })
}

fn read(root: &HostRoot, rel: &str) -> Option<String> {
    root.read_text(&HostPath::etc(rel)).ok()
}

/// "de_DE.UTF-8@euro" → "de-DE"; `None` for C/POSIX or nothing usable.
pub fn language_tag(lang: &str) -> Option<String> {
    let base = lang.split(['.', '@']).next()?.trim();
    let (l, region) = base.split_once('_')?;
    let ok = |s: &str, n: std::ops::RangeInclusive<usize>| {
        n.contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphabetic())
    };
    (ok(l, 2..=3) && ok(region, 2..=2))
        .then(|| format!("{}-{}", l.to_ascii_lowercase(), region.to_ascii_uppercase()))
}

/// A keyboard name (XKB layout, maybe with a variant, or a console keymap
/// such as "de-latin1" or "sv-latin1") → Windows input locale.
pub fn input_locale(layout: &str, variant: &str) -> Option<&'static str> {
    let first = layout
        .split(',')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let stem = first.split(['-', '_']).next().unwrap_or("");
    let key = if stem == "us" && variant.contains("intl") {
        "us-intl"
    } else {
        stem
    };
    KEYBOARDS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// An IANA zone name → Windows' name.
pub fn windows_zone(iana: &str) -> Option<&'static str> {
    ZONES
        .iter()
        .find(|(k, _)| *k == iana.trim())
        .map(|(_, v)| *v)
}

/// The host's locale, keyboard and zone.
pub fn read_host(root: &HostRoot) -> HostLocale {
    let mut notes = Vec::new();
    let lang = ["locale.conf", "default/locale"]
        .iter()
        .find_map(|f| read(root, f).and_then(|t| assignment(&t, "LANG")));
    let language = match lang.as_deref().and_then(language_tag) {
        Some(tag) => tag,
        None => {
            notes.push(format!(
                "The host's language ({}) has no Windows name: Windows is set to US English; change it in Windows' Settings.",
                lang.as_deref().unwrap_or("not set")
            ));
            "en-US".into()
        }
    };
    let keyboard = read(root, "default/keyboard")
        .and_then(|t| {
            let layout = assignment(&t, "XKBLAYOUT")?;
            Some((layout, assignment(&t, "XKBVARIANT").unwrap_or_default()))
        })
        .or_else(|| {
            read(root, "X11/xorg.conf.d/00-keyboard.conf")
                .and_then(|t| Some((xorg_layout(&t)?, String::new())))
        })
        .or_else(|| {
            read(root, "vconsole.conf")
                .and_then(|t| Some((assignment(&t, "KEYMAP")?, String::new())))
        });
    let input = match &keyboard {
        Some((layout, variant)) => input_locale(layout, variant).map(str::to_string),
        None => None,
    };
    let input_locale = input.unwrap_or_else(|| {
        notes.push(format!(
            "The host's keyboard ({}) has no Windows layout here: Windows gets the US layout; add yours in Windows' Settings.",
            keyboard.as_ref().map_or("not set", |(l, _)| l.as_str())
        ));
        "0409:00000409".into()
    });
    let zone_name = read(root, "timezone")
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .or_else(|| {
            let link = root.read_link(&HostPath::etc("localtime")).ok()?;
            let s = link.to_string_lossy().into_owned();
            s.split_once("zoneinfo/").map(|(_, z)| z.to_string())
        });
    let time_zone = match zone_name.as_deref().and_then(windows_zone) {
        Some(z) => z.to_string(),
        None => {
            notes.push(format!(
                "The host's time zone ({}) has no Windows name here: Windows is set to UTC; change it in Windows' Settings.",
                zone_name.as_deref().unwrap_or("not set")
            ));
            "UTC".into()
        }
    };
    HostLocale {
        language,
        input_locale,
        time_zone,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, HostRoot) {
        let d = tempfile::tempdir().expect("tempdir");
        for (rel, text) in files {
            let p = d.path().join("etc").join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(p, text).expect("write");
        }
        let root = HostRoot::at(d.path());
        (d, root)
    }

    #[test]
    fn a_debian_host_in_germany() {
        let (_d, root) = root_with(&[
            ("default/locale", "LANG=de_DE.UTF-8\n"),
            (
                "default/keyboard",
                "XKBMODEL=\"pc105\"\nXKBLAYOUT=\"de\"\nXKBVARIANT=\"\"\n",
            ),
            ("timezone", "Europe/Berlin\n"),
        ]);
        let l = read_host(&root);
        assert_eq!(l.language, "de-DE");
        assert_eq!(l.input_locale, "0407:00000407");
        assert_eq!(l.time_zone, "W. Europe Standard Time");
        assert!(l.notes.is_empty(), "{:?}", l.notes);
    }

    #[test]
    fn a_fedora_host_with_a_console_keymap_and_a_localtime_link() {
        let (d, root) = root_with(&[
            ("locale.conf", "LANG=\"sv_SE.UTF-8\"\n"),
            ("vconsole.conf", "KEYMAP=sv-latin1\n"),
        ]);
        std::os::unix::fs::symlink(
            "../usr/share/zoneinfo/Europe/Stockholm",
            d.path().join("etc/localtime"),
        )
        .expect("link");
        let l = read_host(&root);
        assert_eq!(
            (l.language.as_str(), l.input_locale.as_str()),
            ("sv-SE", "041d:0000041d")
        );
        assert_eq!(l.time_zone, "W. Europe Standard Time");
    }

    #[test]
    fn an_x11_keyboard_file_and_a_us_international_variant() {
        let (_d, root) = root_with(&[(
            "X11/xorg.conf.d/00-keyboard.conf",
            "Section \"InputClass\"\n  Identifier \"system-keyboard\"\n  Option \"XkbLayout\" \"gb,us\"\nEndSection\n",
        )]);
        assert_eq!(read_host(&root).input_locale, "0809:00000809");
        assert_eq!(input_locale("us", "intl"), Some("0409:00020409"));
    }

    #[test]
    fn what_has_no_windows_name_falls_back_and_says_so() {
        let (_d, root) = root_with(&[
            ("default/locale", "LANG=C.UTF-8\n"),
            ("default/keyboard", "XKBLAYOUT=\"dvorak-weird\"\n"),
            ("timezone", "Antarctica/Troll\n"),
        ]);
        let l = read_host(&root);
        assert_eq!(
            (
                l.language.as_str(),
                l.input_locale.as_str(),
                l.time_zone.as_str()
            ),
            ("en-US", "0409:00000409", "UTC")
        );
        assert_eq!(l.notes.len(), 3, "{:?}", l.notes);
        assert!(l.notes[2].contains("Antarctica/Troll"));
        let (_e, empty) = root_with(&[]);
        assert_eq!(read_host(&empty).notes.len(), 3);
    }
}
