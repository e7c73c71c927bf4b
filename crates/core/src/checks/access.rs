//! Can this user reach libvirt? The `libvirt.connect` finding: a real
//! connection attempt (the only honest test: the socket's mode, polkit rules
//! and the daemon all decide), explained with the user and their groups from
//! `/etc/passwd` and `/etc/group`.

use super::model::{Finding, Status};
use crate::hypervisor::{VirtError, error::VirtErrorKind};
use crate::sysroot::{HostPath, HostRoot};

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "access",
    ids: &[
        super::CheckId("libvirt.connect"),
        super::CheckId("libvirt.network"),
    ],
    run: None,
};

/// Who is asking, as far as the host's account files tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub name: Option<String>,
    /// Groups the user belongs to (the primary one and the supplementary ones
    /// listed in /etc/group). Empty when unreadable.
    pub groups: Vec<String>,
    /// The libvirt group's id, from /etc/group.
    pub libvirt_gid: Option<u32>,
    /// The group ids this process really has (getgroups): /etc/group changes
    /// only reach a session after a new login. None when not asked.
    pub session_gids: Option<Vec<u32>>,
}

impl User {
    fn is_root(&self) -> bool {
        self.uid == 0
    }
    fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }
    /// Whether this session already carries the libvirt group (None: unknown).
    fn session_in_libvirt(&self) -> Option<bool> {
        let gid = self.libvirt_gid?;
        Some(self.session_gids.as_ref()?.contains(&gid))
    }
}

/// The group ids of this process (supplementary and effective).
pub fn session_gids() -> Vec<u32> {
    // As many groups as the session has (NGROUPS_MAX is 65536), not a
    // fixed buffer: a user in more groups than it holds got none.
    let mut gids: Vec<u32> = rustix::process::getgroups()
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    gids.push(rustix::process::getegid().as_raw());
    gids
}

/// What one connection attempt gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// libvirt's version as major.minor.micro.
    pub version: String,
    pub domains: usize,
    /// The libvirt networks, when they could be listed.
    pub networks: Option<Vec<crate::hypervisor::NetworkSummary>>,
}

/// `uid`'s name and groups, from the account files under `root`.
pub fn user_of(root: &HostRoot, uid: u32) -> User {
    let passwd = root.read_text(&HostPath::etc("passwd")).unwrap_or_default();
    let group = root.read_text(&HostPath::etc("group")).unwrap_or_default();
    let mut user = User {
        uid,
        ..User::default()
    };
    let mut primary_gid = None;
    for line in passwd.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 4 && f[2].parse::<u32>().ok() == Some(uid) {
            user.name = Some(f[0].to_string());
            primary_gid = f[3].parse::<u32>().ok();
            break;
        }
    }
    for line in group.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 4 {
            continue;
        }
        let member = user
            .name
            .as_deref()
            .is_some_and(|n| f[3].split(',').any(|m| m.trim() == n));
        if f[0] == "libvirt" {
            user.libvirt_gid = f[2].parse().ok();
        }
        if member || (primary_gid.is_some() && f[2].parse::<u32>().ok() == primary_gid) {
            user.groups.push(f[0].to_string());
        }
    }
    user
}

/// The NAT network VMs are given by default (`default`, what virt-manager and
/// `domain new --network nat` use): there, running, and started at boot.
/// `None` when the networks could not be listed.
pub fn network_finding(
    uri: &str,
    networks: Option<&[crate::hypervisor::NetworkSummary]>,
) -> Option<Finding> {
    let list = networks?;
    let why = "A VM on NAT networking plugs into libvirt's network 'default'; if it is not running, the VM does not start ('network default is not active'), and libvirt starts it at boot only when it is marked autostart.";
    let f = match list.iter().find(|n| n.name == "default") {
        None => Finding::new("libvirt.network", format!("No NAT network 'default' at {uri}"), Status::Info)
            .fix("Only needed for NAT: `sudo virsh net-define /usr/share/libvirt/networks/default.xml && sudo virsh net-autostart default && sudo virsh net-start default`; or give VMs a bridge."),
        Some(n) if n.active && n.autostart => Finding::new("libvirt.network", "The NAT network 'default' is running and starts at boot", Status::Pass),
        Some(n) if n.active => Finding::new("libvirt.network", "The NAT network 'default' is running, but does not start at boot", Status::Warn)
            .fix("sudo virsh net-autostart default"),
        Some(n) => Finding::new(
            "libvirt.network",
            format!("The NAT network 'default' is not running{}", if n.autostart { " (it starts with libvirtd)" } else { " and does not start at boot" }),
            Status::Warn,
        )
        .fix(if n.autostart { "sudo virsh net-start default. A VM started from this tool starts it too." } else { "sudo virsh net-start default && sudo virsh net-autostart default. A VM started from this tool starts it too." }),
    };
    let state: Vec<String> = list
        .iter()
        .map(|n| {
            format!(
                "{} {}{}",
                n.name,
                if n.active { "active" } else { "inactive" },
                if n.autostart { " autostart" } else { "" }
            )
        })
        .collect();
    Some(
        f.evidence(format!("networks at {uri}"), state.join(", "))
            .why(why),
    )
}

/// The finding for one attempt (pure).
pub fn connect_finding(uri: &str, user: &User, got: &Result<Reached, VirtError>) -> Finding {
    let who = match (&user.name, user.is_root()) {
        (_, true) => "root".to_string(),
        (Some(n), false) => format!("{n} (uid {})", user.uid),
        (None, false) => format!("uid {}", user.uid),
    };
    let groups = if user.groups.is_empty() {
        "(unknown)".to_string()
    } else {
        user.groups.join(" ")
    };
    let why = "Defining, starting and inspecting VMs all go through libvirt; the system connection (qemu:///system, where virt-manager keeps VMs and where passthrough works) needs the daemon running and the user allowed to use it.";
    match got {
        Ok(r) => Finding::new(
            "libvirt.connect",
            format!("libvirt answers at {uri}"),
            Status::Pass,
        )
        .evidence(
            format!("connect {uri}"),
            format!("libvirt {}, {} domain(s) visible", r.version, r.domains),
        )
        .evidence("user", who)
        .why(why),
        Err(e) => {
            let f = Finding::new("libvirt.connect", "", Status::Fail)
                .evidence(format!("connect {uri}"), e.message.clone())
                .evidence("user", who.clone())
                .evidence(
                    HostPath::etc("group").to_string(),
                    format!("groups: {groups}"),
                )
                .why(why);
            match e.kind {
                VirtErrorKind::Denied => {
                    let no_bus = e.message.contains("system bus");
                    let fix = if no_bus {
                        "libvirt asks polkit whether you may manage VMs, and polkit needs the system D-Bus, which is not running: start it (sudo systemctl start dbus), or run this as root. With polkit working, members of the libvirt group are let in.".to_string()
                    } else if user.is_root() {
                        "Even root is refused: check /etc/libvirt/libvirtd.conf (unix_sock_*), polkit rules and the SELinux/AppArmor log.".to_string()
                    } else if user.in_group("libvirt") && user.session_in_libvirt() == Some(false) {
                        "You are in the libvirt group in /etc/group, but this session started before that: log out and back in (or `newgrp libvirt`).".to_string()
                    } else if user.in_group("libvirt") {
                        "You are in the libvirt group and still refused: check the socket's group and mode (unix_sock_group, unix_sock_rw_perms in /etc/libvirt/libvirtd.conf) and the polkit rules in /etc/polkit-1/rules.d/.".to_string()
                    } else {
                        let n = user.name.as_deref().unwrap_or("$USER");
                        format!(
                            "Add yourself to the libvirt group: sudo usermod -aG libvirt {n}, then log out and back in (groups apply at login). Or run this as root."
                        )
                    };
                    Finding {
                        title: format!("libvirt refuses {who} at {uri}"),
                        ..f
                    }
                    .fix(fix)
                }
                VirtErrorKind::NoConnection => Finding {
                    title: format!("libvirt does not answer at {uri}"),
                    ..f
                }
                .fix(e.hint()),
                _ => Finding {
                    title: format!("libvirt at {uri} gave an error"),
                    status: Status::Warn,
                    ..f
                }
                .fix(e.hint()),
            }
        }
    }
}

/// This process's user, with the groups its session really has.
pub fn this_user(root: &HostRoot) -> User {
    let uid = rustix::process::getuid().as_raw();
    User {
        session_gids: Some(session_gids()),
        ..user_of(root, uid)
    }
}

/// The finding instead of a connection, for a user whose session is not in
/// the libvirt group (None: connect).
pub fn not_tried(uri: &str, user: &User) -> Option<Finding> {
    if user.is_root() || user.session_in_libvirt() == Some(true) {
        return None;
    }
    let n = user.name.clone().unwrap_or_else(|| "$USER".into());
    let f = Finding::new(
        "libvirt.connect",
        format!("{n} is not in the libvirt group: managing VMs will ask for an administrator password"),
        Status::Warn,
    )
    .evidence("user", format!("{n} (uid {})", user.uid))
    .evidence(HostPath::etc("group").to_string(), format!("groups: {}", user.groups.join(" ")))
    .evidence(format!("connect {uri}"), "not tried from the app: it would open a password dialog")
    .why("libvirt lets members of the libvirt group manage system VMs; anyone else is asked for an administrator password (polkit) each time, or refused.")
    .fix(if user.in_group("libvirt") {
        "You are in the group in /etc/group, but this session started before that: log out and back in.".to_string()
    } else if user.libvirt_gid.is_none() {
        format!("There is no libvirt group yet: installing libvirt's daemon (libvirt-daemon-system on Debian/Ubuntu) creates it. Then sudo usermod -aG libvirt {n}, and log out and back in.")
    } else {
        format!("sudo usermod -aG libvirt {n}, then log out and back in (groups apply at login).")
    });
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(passwd: &str, group: &str) -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/passwd"), passwd).unwrap();
        std::fs::write(dir.path().join("etc/group"), group).unwrap();
        let root = HostRoot::at(dir.path());
        (dir, root)
    }

    #[test]
    fn the_default_network_says_when_vms_will_not_start() {
        use crate::hypervisor::NetworkSummary;
        let net = |active, autostart| {
            vec![NetworkSummary {
                name: "default".into(),
                active,
                autostart,
            }]
        };
        let f = |n: &[NetworkSummary]| network_finding("qemu:///system", Some(n)).unwrap();
        assert_eq!(f(&net(true, true)).status, Status::Pass);
        let off = f(&net(false, false));
        assert_eq!(off.status, Status::Warn);
        assert!(
            off.title.contains("not running and does not start at boot"),
            "{off:?}"
        );
        assert!(
            off.fix.as_deref().unwrap().contains("net-autostart"),
            "{off:?}"
        );
        assert_eq!(f(&net(true, false)).status, Status::Warn);
        assert_eq!(f(&[]).status, Status::Info);
        assert!(network_finding("qemu:///system", None).is_none());
        // Its id is this file's (it was missing from the id list once).
        for n in [net(true, true), net(false, false), vec![]] {
            let id = f(&n).id;
            assert!(AREA.ids.iter().any(|c| c.as_str() == id), "{id}");
        }
    }

    #[test]
    fn users_and_groups() {
        let (_d, root) = root_with(
            "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\nbroken line\n",
            "root:x:0:\nalice:x:1000:\nkvm:x:104:alice\nlibvirt:x:113:bob, alice\nx\n",
        );
        let a = user_of(&root, 1000);
        assert_eq!(a.name.as_deref(), Some("alice"));
        assert_eq!(a.groups, vec!["alice", "kvm", "libvirt"]);
        assert_eq!(a.libvirt_gid, Some(113));
        // This process's groups include its effective group, as the kernel says.
        let egid: u32 = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Gid:"))
            .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
            .unwrap();
        assert!(session_gids().contains(&egid));
        let nobody = user_of(&root, 4242);
        assert_eq!(nobody.name, None);
        let empty = HostRoot::at(tempfile::tempdir().unwrap().path());
        assert!(user_of(&empty, 0).groups.is_empty());
    }

    fn err(kind: VirtErrorKind, msg: &str) -> Result<Reached, VirtError> {
        Err(VirtError::new(
            "connecting to qemu:///system",
            kind,
            msg.to_string(),
        ))
    }

    #[test]
    fn each_answer_says_what_to_do() {
        let alice = User {
            uid: 1000,
            name: Some("alice".into()),
            groups: vec!["alice".into()],
            libvirt_gid: Some(113),
            session_gids: Some(vec![1000]),
        };
        let ok = connect_finding(
            "qemu:///system",
            &alice,
            &Ok(Reached {
                version: "9.0.0".into(),
                domains: 2,
                networks: None,
            }),
        );
        assert_eq!(ok.status, Status::Pass);
        assert!(ok.evidence[0].value.contains("libvirt 9.0.0, 2 domain(s)"));
        assert!(AREA.ids.iter().any(|c| c.as_str() == ok.id), "{}", ok.id);

        let denied = connect_finding(
            "qemu:///system",
            &alice,
            &err(
                VirtErrorKind::Denied,
                "Failed to connect socket to '/var/run/libvirt/libvirt-sock': Permission denied",
            ),
        );
        assert_eq!(denied.status, Status::Fail);
        assert!(denied.title.contains("refuses alice"));
        assert!(
            denied
                .fix
                .as_deref()
                .unwrap()
                .contains("usermod -aG libvirt alice")
        );

        let member = User {
            groups: vec!["libvirt".into()],
            ..alice.clone()
        };
        let stale = connect_finding(
            "qemu:///system",
            &member,
            &err(VirtErrorKind::Denied, "Permission denied"),
        );
        assert!(
            stale
                .fix
                .as_deref()
                .unwrap()
                .contains("log out and back in")
        );
        // In the group in this session too: then it is the socket or polkit.
        let current = User {
            session_gids: Some(vec![1000, 113]),
            ..member.clone()
        };
        let still = connect_finding(
            "qemu:///system",
            &current,
            &err(VirtErrorKind::Denied, "Permission denied"),
        );
        assert!(
            still.fix.as_deref().unwrap().contains("unix_sock_group"),
            "{still:?}"
        );

        let down = connect_finding(
            "qemu:///system",
            &alice,
            &err(VirtErrorKind::NoConnection, "No such file or directory"),
        );
        assert_eq!(down.status, Status::Fail);
        assert!(down.title.contains("does not answer"));
        assert!(down.fix.as_deref().unwrap().contains("systemctl"));

        // A real message, as a plain user here (world-writable socket, no
        // system D-Bus for polkit): libvirt answered, and refused.
        let e = VirtError::new(
            "connecting to qemu:///system",
            VirtErrorKind::Denied,
            "internal error: Unable to get system bus connection: Could not connect: No such file or directory",
        );
        let no_bus = connect_finding("qemu:///system", &alice, &Err(e));
        assert!(no_bus.title.contains("refuses"));
        assert!(no_bus.fix.as_deref().unwrap().contains("D-Bus"));

        let odd = connect_finding("qemu:///system", &alice, &err(VirtErrorKind::Other, "?"));
        assert_eq!(odd.status, Status::Warn);

        // The app does not connect for a user outside the group (a polkit
        // password dialog on every rescan); it says what would happen.
        let quiet = not_tried("qemu:///system", &alice).unwrap();
        assert_eq!(quiet.status, Status::Warn);
        assert!(
            quiet.title.contains("administrator password"),
            "{}",
            quiet.title
        );
        assert!(not_tried("qemu:///system", &current).is_none());
        let root = User {
            uid: 0,
            ..alice.clone()
        };
        assert!(not_tried("qemu:///system", &root).is_none());
        let no_group = User {
            libvirt_gid: None,
            ..alice.clone()
        };
        let q = not_tried("qemu:///system", &no_group).unwrap();
        assert!(q.fix.as_deref().unwrap().contains("no libvirt group yet"));
    }
}
