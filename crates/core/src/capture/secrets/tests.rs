use super::*;

fn masked(text: &str) -> (String, Vec<String>) {
    mask_secrets(text, true)
}

#[test]
fn secret_values_go_and_their_names_stay() {
    let (t, k) = masked(
        "vnc_password = \"XYZ12345\"\n#spice_password = 'abc def'\nvnc_listen = \"0.0.0.0\"\nuser = \"me\"\n",
    );
    assert_eq!(
        t,
        "vnc_password = \"(masked)\"\n#spice_password = '(masked)'\nvnc_listen = \"0.0.0.0\"\nuser = \"me\"\n"
    );
    assert_eq!(k, ["vnc_password", "spice_password"]);
    // Unquoted at the start of a line: the rest of the line.
    let (t, _) = masked("password=two words here\n");
    assert_eq!(t, "password=(masked)\n");
    // Several settings on a line (the kernel command line, XML).
    let (t, k) = mask_secrets("root=/dev/sda1 luks.key=hunter2 quiet\n", false);
    assert_eq!(t, "root=/dev/sda1 luks.key=(masked) quiet\n");
    assert_eq!(k, ["luks.key"]);
    let (t, _) = masked("<graphics type='vnc' passwd='s3cret' port='-1'/>\n");
    assert_eq!(t, "<graphics type='vnc' passwd='(masked)' port='-1'/>\n");
    // JSON and YAML.
    let (t, _) = masked("{\"api_token\": \"abc\", \"name\": \"x\"}\n");
    assert_eq!(t, "{\"api_token\": \"(masked)\", \"name\": \"x\"}\n");
    let (t, _) = masked("  client_secret: abc\n");
    assert_eq!(t, "  client_secret: (masked)\n");
    // `name value` in a configuration file (grub.cfg).
    let (t, k) = masked("password_pbkdf2 root grub.pbkdf2.sha512.10000.AB\n");
    assert_eq!(t, "password_pbkdf2 (masked)\n");
    assert_eq!(k, ["password_pbkdf2"]);
    // A file's text inside a JSON record stays JSON.
    let (t, k) =
        masked("{\"text\": \"a\\nvnc_password = \\\"XYZ\\\"\\nb\", \"pin\": 1, \"key\": 12}\n");
    assert_eq!(
        t,
        "{\"text\": \"a\\nvnc_password = \\\"(masked)\\\"\\nb\", \"pin\": 1, \"key\": \"(masked)\"}\n"
    );
    assert_eq!(k, ["vnc_password", "key"]);
    // A crypt hash is no reference to another value.
    let (t, _) = masked("root_password='$6$salt$hash'\npass=$y$j9T$abc\n");
    assert_eq!(t, "root_password='(masked)'\npass=(masked)\n");
    // Inside another setting's value.
    let (t, k) = masked("GRUB_CMDLINE_LINUX=\"quiet luks.key=abc\"\n");
    assert_eq!(t, "GRUB_CMDLINE_LINUX=\"quiet luks.key=(masked)\"\n");
    assert_eq!(k, ["luks.key"]);
    // Words, not letters: keymap and author are no keys.
    let plain = "vnc_keymap = \"de\"\nauthor = \"me\"\nmonkey=1\n# the password is set below\n";
    assert_eq!(masked(plain), (plain.to_string(), vec![]));
    // Nothing to hide: an empty value.
    for empty in [
        "vnc_password = \"\"\n",
        "password=   \n",
        "key=\"",
        "token:",
        "#vnc_tls_x509_secret_uuid = \"00000000-0000-0000-0000-000000000000\"\n",
        "ENTRY_TOKEN_FILE=\"${KERNEL_INSTALL_CONF_ROOT:-/etc/kernel}/entry-token\"\n",
        "    ENTRY_TOKEN_SEARCH=\"$ENTRY_TOKEN_SEARCH $IMAGE_ID\"\n",
        "token=\"$(cat /run/x)\"\n",
    ] {
        assert_eq!(masked(empty), (empty.to_string(), vec![]), "{empty:?}");
    }
}

#[test]
fn credentials_are_masked_wherever_they_stand() {
    let cmdline = "BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=1 ro netroot=iscsi:admin:S3cr3t@192.168.50.1::3260::iqn.2009-06.dracut:target0 cifsuser=bob cifspass=hunter2 root=cifs://bob:pw2@10.0.0.1/share rd.iscsi.password=p3 rd.iscsi.in.password=p4 rd.iscsi.username=admin iommu.passthrough=1 spec_store_bypass_disable=on amd_pstate=passive crashkernel=512M-2G:64M,2G-:128M@16M netconsole=4444@10.0.0.1/eth1,9353@10.0.0.2/12:34:56:78:9a:bc quiet\n";
    let (t, k) = mask_secrets(cmdline, false);
    for secret in ["S3cr3t", "hunter2", "pw2", "p3", "p4"] {
        assert!(!t.contains(secret), "{secret}: {t}");
    }
    for kept in [
        "netroot=iscsi:(masked)@192.168.50.1::3260::iqn.2009-06.dracut:target0",
        "cifsuser=bob cifspass=(masked)",
        "root=cifs://bob:(masked)@10.0.0.1/share",
        "rd.iscsi.username=admin",
        "iommu.passthrough=1",
        "spec_store_bypass_disable=on",
        "amd_pstate=passive",
        "crashkernel=512M-2G:64M,2G-:128M@16M",
        "netconsole=4444@10.0.0.1/eth1,9353@10.0.0.2/12:34:56:78:9a:bc quiet",
    ] {
        assert!(t.contains(kept), "{kept}: {t}");
    }
    assert_eq!(
        k,
        [
            USERINFO,
            "cifspass",
            "rd.iscsi.password",
            "rd.iscsi.in.password"
        ]
    );
    // Mount options: the secret ends where the next option starts.
    let (t, k) =
        masked("//srv/share /mnt cifs username=bob,password=s3cret,uid=1000,vers=3.0 0 0\n");
    assert_eq!(
        t,
        "//srv/share /mnt cifs username=bob,password=(masked),uid=1000,vers=3.0 0 0\n"
    );
    assert_eq!(k, ["password"]);
    // A URL's password in GRUB's settings, and in a BLS entry.
    let (t, _) = masked("GRUB_CMDLINE_LINUX=\"root=live:https://u:tok@example.com/l.img quiet\"\n");
    assert_eq!(
        t,
        "GRUB_CMDLINE_LINUX=\"root=live:https://u:(masked)@example.com/l.img quiet\"\n"
    );
    let (t, _) = masked("options root=UUID=1 ro nfsroot=10.0.0.1:/srv cifspass=x1\n");
    assert_eq!(
        t,
        "options root=UUID=1 ro nfsroot=10.0.0.1:/srv cifspass=(masked)\n"
    );
    // Not credentials: a user alone, a systemd instance, an address.
    let plain = "getty@tty1.service user@1000.service mail=a@b.c root=UUID=1 ip=10.0.0.2::10.0.0.1:255.255.255.0:h:eth0:none\n";
    assert_eq!(mask_secrets(plain, false), (plain.to_string(), vec![]));
}

#[test]
fn private_keys_are_known() {
    assert!(is_private_key(
        "x.pem",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blb\n-----END OPENSSH PRIVATE KEY-----\n"
    ));
    assert!(is_private_key("serverkey.pem", ""));
    assert!(is_private_key("tls.key", ""));
    assert!(!is_private_key(
        "cacert.pem",
        "-----BEGIN CERTIFICATE-----\nMIIB\n"
    ));
}
