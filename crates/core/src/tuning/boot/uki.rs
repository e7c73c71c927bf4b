//! Unified kernel images: today exact manual steps, with what each UKI on
//! the host boots with now (read from its `.cmdline` section, host/uki.rs).

use super::*;

/// The steps for a unified kernel image, with what each UKI on the host
/// boots with now (its `.cmdline` section) and whether it is signed: a
/// signed UKI rebuilt without the key no longer boots under Secure Boot.
pub(super) fn uki_manual(f: &TuneFacts, tokens: &[String]) -> Manual {
    let mut steps = vec![
        format!("Add the parameters to /etc/kernel/cmdline (or a file in /etc/cmdline.d/): {}", tokens.join(" ")),
        "Rebuild the image: `sudo mkinitcpio -P` (Arch) or `sudo kernel-install add-all` / `ukify build` (systemd), then sign it if you use Secure Boot.".into(),
    ];
    let mut signed = false;
    for (path, read) in &f.ukis {
        steps.push(match read {
            Ok(u) => {
                signed |= u.signed;
                let have = u.cmdline.as_deref().unwrap_or("");
                let lacking = missing(have, tokens);
                format!(
                    "Now {path}{} boots with: {} — {}{}",
                    u.uname
                        .as_deref()
                        .map(|r| format!(" (kernel {r})"))
                        .unwrap_or_default(),
                    if u.cmdline.is_some() {
                        format!("`{have}`")
                    } else {
                        "no command line of its own (the loader's)".into()
                    },
                    if lacking.is_empty() {
                        "every parameter is there".to_string()
                    } else {
                        format!("lacking {}", lacking.join(" "))
                    },
                    if u.signed { "; signed" } else { "; unsigned" },
                )
            }
            Err(e) => format!("{path} could not be read: {e}"),
        });
    }
    if signed {
        steps.push("A signed UKI must be signed again after the rebuild, with the key the firmware trusts (`sbctl sign-all`, or ukify's SecureBootPrivateKey=/SecureBootCertificate= in /etc/kernel/uki.conf): this tool does not hold or guess that key, and an unsigned image does not boot under Secure Boot.".into());
    }
    steps.push("Check it: the line above is read from the image's .cmdline section; `ukify inspect` shows the same.".into());
    Manual {
        id: crate::tuning::kinds::ChangeId::of(crate::tuning::kinds::Kind::Cmdline),
        title: format!("Kernel parameters in a unified kernel image: {}", tokens.join(" ")),
        why: "A UKI carries its command line inside the image (signed, under Secure Boot); it must be rebuilt (and re-signed for Secure Boot), which this tool does not yet do for you.".into(),
        steps,
    }
}
