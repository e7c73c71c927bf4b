//! What GRUB starts next, read as GRUB reads it (docs/research-grub-once.md
//! §1.2, §1.5, §3): the environment block (`next_entry` from grub-reboot
//! first, then `saved_entry` where `GRUB_DEFAULT=saved`), an entry named by
//! a number, a title, an id or a `submenu>entry` path, and entry 0 when
//! nothing matches. With BLS (Fedora), entries are `/boot/loader/entries`
//! files named by their id, sorted newest first by an rpm-style compare of
//! the names (blscfg), as grubby reads them too.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The environment block's variables (`name=value` lines; GRUB leaves
/// `next_entry=` empty once it booted it, which means none).
pub fn grubenv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One menu entry of a grub.cfg, with its `linux` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuEntry {
    pub title: String,
    pub id: Option<String>,
    /// The submenus it is in, by title and id.
    pub path: Vec<(String, Option<String>)>,
    pub linux: Option<String>,
}

/// The quoted words after `menuentry`/`submenu`: the title, and the id
/// after `$menuentry_id_option`.
fn title_and_id(line: &str) -> (String, Option<String>) {
    let quoted: Vec<&str> = line.split('\'').skip(1).step_by(2).collect();
    let title = quoted.first().map_or("", |t| *t).to_string();
    let id = line
        .split("$menuentry_id_option")
        .nth(1)
        .and_then(|rest| rest.split('\'').nth(1))
        .map(str::to_string);
    (title, id)
}

/// Every menu entry of a grub.cfg, in menu order (submenus flattened, each
/// entry knowing its path).
pub fn menu(cfg: &str) -> Vec<MenuEntry> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, Option<String>)> = Vec::new();
    let mut current: Option<MenuEntry> = None;
    for raw in cfg.lines() {
        let l = raw.trim();
        if l.starts_with("submenu ") {
            stack.push(title_and_id(l));
        } else if l.starts_with("menuentry ") {
            let (title, id) = title_and_id(l);
            current = Some(MenuEntry {
                title,
                id,
                path: stack.clone(),
                linux: None,
            });
        } else if l == "}" {
            match current.take() {
                Some(e) => out.push(e),
                None => {
                    stack.pop();
                }
            }
        } else if let Some(e) = current.as_mut()
            && matches!(l.split_whitespace().next(), Some("linux" | "linuxefi"))
        {
            e.linux = Some(l.to_string());
        }
    }
    out
}

/// The entry GRUB's `default` names: an index among the top level, or a
/// title or id (a `>` path descending into submenus); entry 0 when none
/// matches, as GRUB falls back.
pub fn pick<'a>(entries: &'a [MenuEntry], default: &str) -> Option<&'a MenuEntry> {
    let top: Vec<&MenuEntry> = {
        // The top level: entries outside submenus, and each submenu's first.
        let mut seen_sub: Vec<&(String, Option<String>)> = Vec::new();
        let mut v = Vec::new();
        for e in entries {
            match e.path.first() {
                None => v.push(e),
                Some(s) if !seen_sub.contains(&s) => {
                    seen_sub.push(s);
                    v.push(e);
                }
                Some(_) => {}
            }
        }
        v
    };
    let d = default.trim();
    if let Ok(n) = d.parse::<usize>() {
        return top.get(n).or(top.first()).copied();
    }
    let parts: Vec<&str> = d.split('>').collect();
    let is =
        |name: &str, title: &str, id: &Option<String>| title == name || id.as_deref() == Some(name);
    let found = entries.iter().find(|e| {
        let Some((last, subs)) = parts.split_last() else {
            return false;
        };
        is(last, &e.title, &e.id)
            && subs.len() <= e.path.len()
            && subs.iter().zip(&e.path).all(|(p, (t, i))| is(p, t, i))
    });
    found.or(top.first().copied())
}

/// rpm's version compare, as GRUB's blscfg and `sort -V` order entries:
/// digits against digits by value, letters against letters, `~` before
/// anything; what is left over is newer. Kernel releases sort the same
/// under Debian's compare (they carry no epoch).
pub fn version_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        let sep = |c: u8| !c.is_ascii_alphanumeric() && c != b'~';
        while a.first().is_some_and(|c| sep(*c)) {
            a = &a[1..];
        }
        while b.first().is_some_and(|c| sep(*c)) {
            b = &b[1..];
        }
        match (a.first(), b.first()) {
            (Some(b'~'), Some(b'~')) => {
                a = &a[1..];
                b = &b[1..];
                continue;
            }
            (Some(b'~'), _) => return Ordering::Less,
            (_, Some(b'~')) => return Ordering::Greater,
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            _ => {}
        }
        let digits = a[0].is_ascii_digit();
        let seg = |s: &[u8]| {
            s.iter()
                .take_while(|c| {
                    if digits {
                        c.is_ascii_digit()
                    } else {
                        c.is_ascii_alphabetic()
                    }
                })
                .count()
        };
        let (na, nb) = (seg(a), seg(b));
        if nb == 0 {
            // A number against letters: the number is newer.
            return if digits {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        let (sa, sb) = (&a[..na], &b[..nb]);
        let ord = if digits {
            let trim = |s: &'_ [u8]| -> usize { s.iter().take_while(|c| **c == b'0').count() };
            let (sa, sb) = (&sa[trim(sa)..], &sb[trim(sb)..]);
            sa.len().cmp(&sb.len()).then(sa.cmp(sb))
        } else {
            sa.cmp(sb)
        };
        if ord != Ordering::Equal {
            return ord;
        }
        a = &a[na..];
        b = &b[nb..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_rpm_and_dpkg_sort_kernels() {
        assert_eq!(
            version_cmp("6.12.5-200.fc41.x86_64", "6.11.4-301.fc41.x86_64"),
            Ordering::Greater
        );
        assert_eq!(
            version_cmp("6.1.0-18-amd64", "6.1.0-9-amd64"),
            Ordering::Greater
        );
        assert_eq!(
            version_cmp("5.8.0-7630-generic", "5.8.0-7625-generic"),
            Ordering::Greater
        );
        assert_eq!(version_cmp("6.12.0~rc1", "6.12.0"), Ordering::Less);
        assert_eq!(version_cmp("1.0a", "1.0"), Ordering::Greater);
        assert_eq!(version_cmp("abc", "abc"), Ordering::Equal);
        assert_eq!(version_cmp("", "1"), Ordering::Less);
    }

    #[test]
    fn entries_are_picked_as_grub_picks_them() {
        let cfg = "menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-u' {\n linux /boot/vmlinuz-6.1.0-18-amd64 root=x\n}\nsubmenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-u' {\n menuentry 'Debian GNU/Linux, with Linux 6.1.0-18-amd64' $menuentry_id_option 'gnulinux-6.1.0-18-amd64-advanced-u' {\n  linux /boot/vmlinuz-6.1.0-18-amd64 root=x\n }\n menuentry 'Debian GNU/Linux, with Linux 6.1.0-9-amd64' $menuentry_id_option 'gnulinux-6.1.0-9-amd64-advanced-u' {\n  linux /boot/vmlinuz-6.1.0-9-amd64 root=x\n }\n}\n";
        let m = menu(cfg);
        assert_eq!(m.len(), 3);
        let linux = |d: &str| {
            pick(&m, d)
                .and_then(|e| e.linux.clone())
                .unwrap_or_default()
        };
        assert!(linux("0").contains("6.1.0-18"));
        assert!(linux("1").contains("6.1.0-18"), "the submenu's first");
        assert!(linux("gnulinux-advanced-u>gnulinux-6.1.0-9-amd64-advanced-u").contains("6.1.0-9"));
        assert!(
            linux(
                "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-9-amd64"
            )
            .contains("6.1.0-9")
        );
        assert!(linux("no such entry").contains("6.1.0-18"), "entry 0");
        assert!(linux("7").contains("6.1.0-18"));
        assert_eq!(
            grubenv("# GRUB Environment Block\nnext_entry=\nsaved_entry=a-1\n#####")
                .get("next_entry"),
            None
        );
    }
}
