use super::*;

#[test]
fn targets_parse_and_bad_ones_are_refused() {
    let t = SshTarget::parse("ssh://anna@server.lan:2222/srv/host").unwrap();
    assert_eq!(t.user.as_deref(), Some("anna"));
    assert_eq!(t.host, "server.lan");
    assert_eq!(t.port, Some(2222));
    assert_eq!(t.root.as_deref(), Some("/srv/host"));
    assert_eq!(t.shown(), "anna@server.lan:2222");
    let t = SshTarget::parse("ssh://server").unwrap();
    assert_eq!((t.user, t.port, t.root), (None, None, None));
    for bad in [
        "server",
        "ssh://",
        "ssh://-oProxyCommand=x",
        "ssh://a b",
        "ssh://host:0",
        "ssh://host:port",
        "ssh://-l@host",
    ] {
        assert!(SshTarget::parse(bad).is_err(), "{bad}");
    }
    // The address written back is the address read.
    for text in [
        "ssh://server",
        "ssh://anna@server.lan:2222/srv/host",
        "ssh://h:22",
    ] {
        let t = SshTarget::parse(text).unwrap();
        assert_eq!(t.url(), text);
        assert_eq!(SshTarget::parse(&t.url()).unwrap(), t);
    }
}

#[test]
fn sshs_words_become_what_to_do() {
    let t = SshTarget::parse("ssh://anna@server").unwrap();
    let k = t.classify(
        "x",
        Some(255),
        "anna@server: Permission denied (publickey).\n",
    );
    assert!(matches!(k, RemoteError::KeyRefused { .. }), "{k}");
    assert!(k.to_string().contains("ssh-copy-id anna@server"));
    let h = t.classify("x", Some(255), "@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@\nHost key verification failed.\n");
    assert!(matches!(h, RemoteError::HostKeyChanged { .. }), "{h}");
    assert!(h.to_string().contains("ssh-keygen -R 'server'"), "{h}");
    // Off port 22: the words to type name the port, as ssh wants them.
    let p = SshTarget::parse("ssh://anna@server:2222").unwrap();
    let h = p.classify(
        "x",
        Some(255),
        "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\n",
    );
    let said = h.to_string();
    assert!(
        said.contains("ssh-keygen -R '[server]:2222'") && said.contains("ssh -p 2222 anna@server"),
        "{said}"
    );
    let k = p.classify("x", Some(255), "Permission denied (publickey).\n");
    assert!(
        k.to_string().contains("ssh-copy-id -p 2222 anna@server"),
        "{k}"
    );
    // The program there failing with words that look like ssh's is the
    // program's failure, not a refused key or a missing program.
    let own = t.classify(
        "x",
        Some(1),
        "vfio-assistant: /dev/input/event3: Permission denied (os error 13)\n",
    );
    assert!(matches!(own, RemoteError::Failed { .. }), "{own}");
    let own = t.classify(
        "x",
        Some(1),
        "/dev/input/by-id/x: No such file or directory\n",
    );
    assert!(matches!(own, RemoteError::Failed { .. }), "{own}");
    let unknown = t.classify("x", Some(255), "Host key verification failed.\n");
    assert!(
        matches!(unknown, RemoteError::HostKeyUnknown { .. }),
        "{unknown}"
    );
    assert!(!unknown.to_string().contains("ssh-keygen -R"), "{unknown}");
    let u = t.classify(
        "x",
        Some(255),
        "ssh: Could not resolve hostname server: Name or service not known\n",
    );
    assert!(matches!(u, RemoteError::Unreachable { .. }), "{u}");
    let n = t.classify(
        "x",
        Some(127),
        "bash: line 1: vfio-assistant: command not found\n",
    );
    assert!(matches!(n, RemoteError::NotInstalled { .. }), "{n}");
    assert_eq!(quote("it's"), "'it'\\''s'");
    let v = t.classify("x", Some(OTHER_VERSION), &format!("{VERSION_MARK} 0.0.9\n"));
    assert!(
        matches!(&v, RemoteError::Version { theirs, .. } if theirs == "0.0.9"),
        "{v}"
    );
    assert_eq!(
        machine_id_in(&format!(
            "motd\n{MACHINE_MARK} 624D595F25B9403C9679457A72C2CBFE\n"
        ))
        .as_deref(),
        Some("624d595f25b9403c9679457a72c2cbfe")
    );
    assert_eq!(machine_id_in(&format!("{MACHINE_MARK} \n")), None);
    assert_eq!(machine_id_in(&format!("{MACHINE_MARK} ../../x\n")), None);
}
