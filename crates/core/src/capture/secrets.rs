//! Secrets kept out of a snapshot. In every captured text file a setting
//! whose name says it holds a secret (`vnc_password`, `spice_password`,
//! `*_secret_uuid`, `auth_*`, `*_key`, `token`, …) keeps its name and loses
//! its value: `spice_password = "XYZ"` becomes `spice_password = "(masked)"`.
//! Settings are `name = value` (qemu.conf, libvirtd.conf, shell, INI, the
//! kernel command line, XML attributes), `"name": value` (JSON, YAML) and, in
//! configuration files, `name value` at the start of a line (grub.cfg's
//! `password_pbkdf2 user hash`). Commented-out settings are masked too (a
//! secret commented out is still one). A file holding a private key is never
//! captured: it becomes an empty placeholder. What was masked is named
//! (file and setting, never the value) in the archive's SNAPSHOT.txt.
//!
//! Credentials are masked wherever they stand, not only by a setting's name
//! (issue 41): a name with `pass` in it (`cifspass=`; not `passthrough`,
//! `bypass`, `passive`), a URL's or an iSCSI target's `user:password@`
//! (`root=cifs://u:PW@srv/x`, `netroot=iscsi:u:PW@srv::3260::iqn…` — the
//! part after the user's name, up to the `@`), and in a list of mount
//! options (`username=u,password=PW,uid=1000`) a secret ends where the next
//! `name=` begins. A value holding a blank or a quote cannot be told from
//! what follows it unless it is quoted; one holding `,name=` is cut there.

/// What a masked value becomes.
pub const MASK: &str = "(masked)";

/// Words that make a setting secret wherever they stand in its name
/// (`vnc_password`, `auth_unix_rw`, `tls_key_file`, `api-token`).
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pass",
    "bindpw",
    "secret",
    "secrets",
    "key",
    "keys",
    "privkey",
    "apikey",
    "token",
    "auth",
    "credential",
    "credentials",
    "cred",
    "creds",
    "psk",
    "cookie",
];

/// Words with `pass` in them that hold no secret: IOMMU passthrough, the
/// speculative store bypass, a passive CPU frequency driver.
const NOT_PASSWORDS: &[&str] = &["passthrough", "passthru", "bypass", "passive"];

/// Ends of a word that make it secret too (`rootpassword`, `clientSecret`).
const SECRET_ENDINGS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "privkey",
];

/// Names whose words say "key" and that hold none: a BLS entry's
/// `sort-key` (the entry's name to sort by).
const NOT_SECRET_NAMES: &[&str] = &["sort-key"];

/// Does a setting named `key` hold a secret? By the words of its name.
pub fn is_secret_key(key: &str) -> bool {
    if NOT_SECRET_NAMES.iter().any(|n| key.eq_ignore_ascii_case(n)) {
        return false;
    }
    key.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .any(|w| {
            SECRET_WORDS.contains(&w.as_str())
                || SECRET_ENDINGS.iter().any(|e| w.ends_with(e))
                || (w.contains("pass") && !NOT_PASSWORDS.iter().any(|n| w.contains(n)))
        })
}

/// What SNAPSHOT.txt calls a masked `user:password@`.
pub const USERINFO: &str = "user:password@ (a URL's or an iSCSI target's)";

/// Where a `user:password@` may start: after one of these (a blank, a
/// quote, `=`, `,`, `/` — so `scheme://` —, a bracket), or at the start.
fn userinfo_boundary(c: u8) -> bool {
    c.is_ascii_whitespace()
        || matches!(
            c,
            b'"' | b'\''
                | b'='
                | b','
                | b'/'
                | b'('
                | b')'
                | b'<'
                | b'>'
                | b'['
                | b']'
                | b';'
                | b'`'
                | b'\\'
        )
}

/// `user:password@host` anywhere in `line` with the password masked: the
/// `@` is the last one of its word, the user a name (a letter or `_`
/// first: `crashkernel=…,8G-:768M@16M` is no user), the password
/// everything from the first `:` to that `@` — an iSCSI target's
/// `iscsi:user:pass:ruser:rpass@` loses all of it after `iscsi:`.
fn mask_userinfo(line: &str, keys: &mut Vec<String>) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut copied = 0;
    for at in memchr::memchr_iter(b'@', b) {
        if at < copied {
            continue;
        }
        // Only the last `@` of a word ends a user:password.
        let word_end = b[at + 1..]
            .iter()
            .position(|&c| userinfo_boundary(c))
            .map_or(b.len(), |p| at + 1 + p);
        if b[at + 1..word_end].contains(&b'@') {
            continue;
        }
        let mut start = at;
        while start > copied && !userinfo_boundary(b[start - 1]) {
            start -= 1;
        }
        let Some(colon) = b[start..at].iter().position(|&c| c == b':') else {
            continue;
        };
        let user = &b[start..start + colon];
        let after_scheme = start >= 2 && &b[start - 2..start] == b"//";
        let user_ok = match user.first() {
            None => after_scheme,
            Some(&first) => {
                (first.is_ascii_alphabetic() || first == b'_')
                    && user.iter().all(|&c| {
                        c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'%' | b'+')
                    })
            }
        };
        let (from, to) = (start + colon + 1, at);
        if !user_ok || from >= to || nothing_to_hide(&line[from..to]) {
            continue;
        }
        out.push_str(&line[copied..from]);
        out.push_str(MASK);
        copied = to;
        if !keys.iter().any(|k| k == USERINFO) {
            keys.push(USERINFO.to_string());
        }
    }
    out.push_str(&line[copied..]);
    out
}

/// In a list of options (`password=PW,uid=1000`), whether `,` at `i` starts
/// the next option (`,name=`): a secret value ends there.
fn next_option_at(b: &[u8], i: usize) -> bool {
    if b.get(i) != Some(&b',') {
        return false;
    }
    let name_start = i + 1;
    let mut j = name_start;
    while j < b.len() && is_key_byte(b[j]) {
        j += 1;
    }
    j > name_start
        && b[name_start].is_ascii_alphabetic()
        && b.get(j) == Some(&b'=')
        && b.get(j + 1) != Some(&b'=')
}

/// Whether a file is a private key (never captured): PEM-armoured private
/// key text (`-----BEGIN … PRIVATE KEY-----`, OpenSSH's too), or a name
/// that says so (`server.key`, `client-key.pem`).
pub fn is_private_key(name: &str, text: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.ends_with(".key")
        || name.ends_with("key.pem")
        || text.lines().any(|l| {
            let l = l.trim();
            l.starts_with("-----BEGIN ") && l.contains("PRIVATE KEY")
        })
}

/// `text` with every secret setting's value masked, and the names of the
/// settings masked (each once, in order). `config`: the file is a
/// configuration file (not a kernel pseudo-file), where `name value` at the
/// start of a line is a setting too.
pub fn mask_secrets(text: &str, config: bool) -> (String, Vec<String>) {
    let mut keys: Vec<String> = Vec::new();
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let line = mask_userinfo(line, &mut keys);
        out.push_str(&mask_line(&line, config, &mut keys));
    }
    (out, keys)
}

fn is_key_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

fn is_quote(c: u8) -> bool {
    matches!(c, b'"' | b'\'')
}

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

/// The end of the line's text (before its line ending and trailing blanks).
fn text_end(b: &[u8]) -> usize {
    let mut end = b.len();
    while end > 0 && b[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end
}

/// Whether a name may start at `i`: at the start, after a byte that is not
/// part of a name, or after an escaped line break or tab (`\n`, a file's
/// text inside a JSON string); never at the letter of an escape itself.
fn after_boundary(b: &[u8], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    let prev = b[i - 1];
    if prev == b'\\' {
        return false;
    }
    !is_key_byte(prev) || (i >= 2 && b[i - 2] == b'\\' && matches!(prev, b'n' | b't' | b'r'))
}

/// A value that tells nothing: empty, unset, masked already, the all-zero
/// UUID (qemu.conf's commented-out `*_secret_uuid` examples), or in a
/// script a reference to another value (`ENTRY_TOKEN="$MACHINE_ID"`,
/// `"${X:-/etc}"`, `"$(cat f)"`) — but a crypt hash (`$6$salt$…`) is one.
fn nothing_to_hide(value: &str) -> bool {
    let v = value.trim();
    if matches!(
        v,
        "" | "(null)" | MASK | "00000000-0000-0000-0000-000000000000"
    ) {
        return true;
    }
    let Some(rest) = v.strip_prefix('$') else {
        return false;
    };
    let crypt = rest.find('$').is_some_and(|end| {
        (1..=3).contains(&end) && rest[..end].bytes().all(|c| c.is_ascii_alphanumeric())
    });
    let reference = rest
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'{' | b'('));
    reference && !crypt
}

fn mask_line(line: &str, config: bool, keys: &mut Vec<String>) -> String {
    let b = line.as_bytes();
    let first = skip_blanks(b, 0);
    let commented = b.get(first).is_some_and(|c| matches!(c, b'#' | b';'));
    // Where a setting at the start of the line begins (after a comment mark).
    let body = if commented {
        skip_blanks(b, first + 1)
    } else {
        first
    };
    let line_end = text_end(b);
    let mut out = String::with_capacity(line.len());
    let mut copied = 0;
    let mut i = 0;
    while i < line_end {
        let starts_key = (is_key_byte(b[i]) || is_quote(b[i])) && after_boundary(b, i);
        if !starts_key {
            i += 1;
            continue;
        }
        // The name, maybe quoted (JSON).
        let quote = is_quote(b[i]).then_some(b[i]);
        let name_start = i + usize::from(quote.is_some());
        let mut name_end = name_start;
        while name_end < line_end && is_key_byte(b[name_end]) {
            name_end += 1;
        }
        if name_end == name_start {
            i += 1;
            continue;
        }
        let mut after = name_end;
        if let Some(q) = quote {
            if b.get(after) != Some(&q) {
                i = name_end;
                continue;
            }
            after += 1;
        }
        let name = &line[name_start..name_end];
        let j = skip_blanks(b, after);
        let at_line_start = i == body;
        let sep = match b.get(j) {
            Some(b'=') if b.get(j + 1) != Some(&b'=') => Some(j + 1),
            Some(b':')
                if quote.is_some() || b.get(j + 1).is_some_and(|c| c.is_ascii_whitespace()) =>
            {
                Some(j + 1)
            }
            _ => None,
        };
        let value_from = match sep {
            Some(s) => skip_blanks(b, s),
            // `name value`: configuration files, first thing on a line
            // that is not a comment, and only for a secret name.
            None if config
                && at_line_start
                && !commented
                && j > after
                && j < line_end
                && is_secret_key(name) =>
            {
                j
            }
            None => {
                i = name_end.max(i + 1);
                continue;
            }
        };
        if value_from >= line_end {
            break; // nothing after it
        }
        if !is_secret_key(name) {
            // Settings inside its value are looked at too
            // (`GRUB_CMDLINE_LINUX="… luks.key=…"`).
            i = value_from;
            continue;
        }
        // The value: quoted up to its closing quote; else a word, or for a
        // setting at the start of a configuration file's line, the rest of
        // the line (a kernel command line's next words are not its value).
        let (value_start, value_end) = match b.get(value_from) {
            // Quoted inside a JSON string (a file's text in a record):
            // `\"…\"`, up to the next escaped quote.
            Some(b'\\') if b.get(value_from + 1).is_some_and(|&c| is_quote(c)) => {
                let q = b[value_from + 1];
                let from = value_from + 2;
                let close =
                    (from..line_end.saturating_sub(1)).find(|&p| b[p] == b'\\' && b[p + 1] == q);
                (from.min(line_end), close.unwrap_or(line_end))
            }
            Some(&q) if is_quote(q) => {
                let close = b[value_from + 1..line_end]
                    .iter()
                    .position(|&c| c == q)
                    .map(|p| value_from + 1 + p);
                (value_from + 1, close.unwrap_or(line_end))
            }
            _ => {
                // A word ends at a blank, a quote or an escape; in JSON
                // (a quoted name) also where the next member starts.
                let json = quote.is_some();
                let word_end = (value_from..line_end)
                    .find(|&p| {
                        let c = b[p];
                        c.is_ascii_whitespace()
                            || is_quote(c)
                            || c == b'\\'
                            || (json && matches!(c, b',' | b'}' | b']'))
                            || next_option_at(&b[..line_end], p)
                    })
                    .unwrap_or(line_end);
                // …but a list of options goes on after its `,name=`.
                let rest = config
                    && !json
                    && (at_line_start || sep.is_none())
                    && !next_option_at(&b[..line_end], word_end);
                (value_from, if rest { line_end } else { word_end })
            }
        };
        let value = &line[value_start..value_end];
        if !nothing_to_hide(value) {
            out.push_str(&line[copied..value_start]);
            // JSON stays JSON: an unquoted value (a number) becomes a string.
            let bare_json = quote.is_some() && value_start == value_from;
            out.push_str(if bare_json { "\"(masked)\"" } else { MASK });
            copied = value_end;
            if !keys.iter().any(|k| k == name) {
                keys.push(name.to_string());
            }
        }
        i = (value_end + 1).max(i + 1);
    }
    out.push_str(&line[copied..]);
    out
}

#[cfg(test)]
mod tests;
