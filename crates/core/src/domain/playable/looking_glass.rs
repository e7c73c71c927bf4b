//! Looking Glass on the domain's side, after the project's libvirt guide
//! (gnif/LookingGlass `doc/install_libvirt.rst` and `doc/ivshmem_kvmfr.rst`,
//! B7): the shared memory — `<shmem>` on /dev/shm, or the kvmfr module's
//! /dev/kvmfr0 through QEMU's own arguments, which are recognised and
//! replaced on every tuning (never added twice, removed when the user
//! switches to /dev/shm; arguments of anyone else's kept) — and the SPICE
//! side the client talks to for keyboard, mouse, clipboard and sound: a
//! SPICE server the client reaches (127.0.0.1), the agent's spicevmc
//! channel, no tablet, virtio keyboard and mouse, vga video. `ClientSetup`
//! says how to start the client against what the domain has.

use super::{LookingGlass, PlayError, devices, edit, el, looking_glass_mib};
use crate::domain::tune::Edit;
use crate::domain::xml::{Document, Element, Node};
use serde::Serialize;

/// Where the client finds the VM's SPICE server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpiceAt {
    /// A TCP address; `port` when the domain fixes one (`None`: libvirt
    /// gives it the first free port from 5900 when it starts).
    Tcp { host: String, port: Option<u16> },
    /// A unix socket the domain names.
    Socket { path: String },
}

/// What the Looking Glass client needs: the shared memory file and the
/// SPICE server (`None`: the domain has none the client can use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientSetup {
    pub shm_file: String,
    pub spice: Option<SpiceAt>,
}

/// The port libvirt gives the first SPICE VM with autoport, which is also
/// the client's default (`spice:port`).
const FIRST_AUTOPORT: u16 = 5900;
const KVMFR_DEV: &str = "/dev/kvmfr0";
const SHM_FILE: &str = "/dev/shm/looking-glass";
/// The memory backend's id in our (and the guide's) QEMU arguments.
const BACKEND_ID: &str = "looking-glass";

impl ClientSetup {
    /// The setup `apply` writes for this choice on a domain that had no
    /// SPICE of its own (127.0.0.1, port chosen by libvirt).
    pub fn for_choice(lg: &LookingGlass) -> ClientSetup {
        ClientSetup {
            shm_file: if lg.kvmfr { KVMFR_DEV } else { SHM_FILE }.into(),
            spice: Some(SpiceAt::Tcp {
                host: "127.0.0.1".into(),
                port: None,
            }),
        }
    }

    /// What a domain has for Looking Glass: its `<shmem name='looking-glass'>`
    /// or the kvmfr device in its QEMU arguments, and its SPICE listener.
    pub fn from_domain(doc: &Document) -> Option<ClientSetup> {
        let devs = doc.root.child("devices")?;
        let shm = devs
            .elements()
            .any(|e| e.name == "shmem" && e.attr("name") == Some(BACKEND_ID));
        let kvmfr = qemu_arg_values(doc)
            .iter()
            .find_map(|v| kvmfr_path(v).map(str::to_string));
        let shm_file = match (kvmfr, shm) {
            (Some(dev), _) => dev,
            (None, true) => SHM_FILE.to_string(),
            (None, false) => return None,
        };
        let spice = devs
            .elements()
            .find(|e| e.name == "graphics" && e.attr("type") == Some("spice"))
            .and_then(reachable);
        Some(ClientSetup { shm_file, spice })
    }

    /// The port the client is told: the domain's own, else libvirt's first.
    fn port(&self) -> Option<(String, u16)> {
        match &self.spice {
            Some(SpiceAt::Tcp { host, port }) => {
                Some((host.clone(), port.unwrap_or(FIRST_AUTOPORT)))
            }
            Some(SpiceAt::Socket { path }) => Some((path.clone(), 0)),
            None => None,
        }
    }

    /// The client's command line (long options as the client takes them).
    pub fn command(&self) -> String {
        match self.port() {
            Some((host, port)) => format!(
                "looking-glass-client -f {} spice:host={host} spice:port={port}",
                self.shm_file
            ),
            None => format!("looking-glass-client -f {} -s", self.shm_file),
        }
    }

    /// The same as the client's config file
    /// (`~/.config/looking-glass/client.ini`).
    pub fn client_ini(&self) -> String {
        let mut s = format!("[app]\nshmFile={}\n", self.shm_file);
        match self.port() {
            Some((host, port)) => s.push_str(&format!("\n[spice]\nhost={host}\nport={port}\n")),
            None => s.push_str("\n[spice]\nenable=no\n"),
        }
        s
    }

    /// How to start the client for domain `name`, in plain words.
    pub fn explain(&self, name: &str) -> String {
        let mut s = format!(
            "Looking Glass: in Windows install the Looking Glass host application (the same release as the client) and the SPICE guest tools (clipboard); then on this host run\n  {}\nor put this in ~/.config/looking-glass/client.ini and run looking-glass-client:\n",
            self.command()
        );
        for l in self.client_ini().lines() {
            if !l.is_empty() {
                s.push_str("  ");
                s.push_str(l);
            }
            s.push('\n');
        }
        match &self.spice {
            Some(SpiceAt::Tcp { port: None, .. }) => s.push_str(&format!(
                "libvirt gives the VM's SPICE the first free port from {FIRST_AUTOPORT} when it starts ({FIRST_AUTOPORT} for the first such VM, the client's default); with other VMs running, `virsh -c qemu:///system domdisplay {name}` shows this one's (spice://127.0.0.1:PORT)."
            )),
            Some(_) => s.push_str(
                "Keyboard, mouse, clipboard and SPICE sound reach the VM through that SPICE server.",
            ),
            None => s.push_str(
                "The domain has no SPICE server the client can reach: it shows the picture, but keyboard, mouse, clipboard and sound need SPICE (tune the domain with --looking-glass again).",
            ),
        }
        s
    }
}

/// `/dev/kvmfrN` in a QEMU argument (`'mem-path':'/dev/kvmfr0'` or
/// `mem-path=/dev/kvmfr0`).
fn kvmfr_path(v: &str) -> Option<&str> {
    let at = v.find("/dev/kvmfr")?;
    let rest = &v[at..];
    let end = "/dev/kvmfr".len()
        + rest["/dev/kvmfr".len()..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
    (end > "/dev/kvmfr".len()).then(|| &rest[..end])
}

/// The SPICE listener the client can use, as the domain has it: an address
/// (any address of this host; 0.0.0.0 and :: are reached on 127.0.0.1) or
/// a socket the domain names. `None` for none, a network's address (known
/// only at start), a socket libvirt names itself, or no listener at all.
fn reachable(g: &Element) -> Option<SpiceAt> {
    // A port: the domain's own, or (a running domain's XML) the one libvirt
    // gave it; `-1` or none while libvirt is still to pick one.
    let port = g
        .attr("port")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p > 0);
    let tcp = |a: Option<&str>| {
        let host = match a {
            None | Some("0.0.0.0" | "::" | "localhost") => "127.0.0.1",
            Some(a) => a,
        };
        SpiceAt::Tcp {
            host: host.to_string(),
            port,
        }
    };
    match g.child("listen") {
        Some(l) => match l.attr("type") {
            Some("address") => Some(tcp(l.attr("address").or(g.attr("listen")))),
            Some("socket") => l.attr("socket").map(|p| SpiceAt::Socket {
                path: p.to_string(),
            }),
            _ => None,
        },
        None => g.attr("listen").map(|a| tcp(Some(a))),
    }
}

/// Apply Looking Glass to the domain. Each part is said only when it changed
/// something: the same choice applied again changes nothing.
pub(super) fn apply(doc: &mut Document, lg: &LookingGlass) -> Result<Vec<Edit>, PlayError> {
    let mib = looking_glass_mib(lg.width, lg.height, lg.hdr);
    let mut edits = Vec::new();
    // SPICE first: the shared memory's why tells the client where it is.
    edits.extend(spice(devices(doc)?));
    let client = ClientSetup {
        shm_file: if lg.kvmfr { KVMFR_DEV } else { SHM_FILE }.into(),
        spice: devices(doc)?
            .elements()
            .find(|e| e.name == "graphics" && e.attr("type") == Some("spice"))
            .and_then(reachable),
    };
    let res = format!(
        "{}x{}{}",
        lg.width,
        lg.height,
        if lg.hdr { " HDR" } else { "" }
    );
    let shm_changed = shmem(devices(doc)?, (!lg.kvmfr).then_some(mib));
    let (args_changed, leftovers) = kvmfr_args(doc, lg.kvmfr.then_some(mib))?;
    let command = client.command();
    if lg.kvmfr && args_changed {
        let mut why = format!(
            "The kvmfr module gives the host's client the frames without a copy through /dev/shm: the Looking Glass project's recommended way. libvirt has no element for it, so it goes to QEMU as its JSON arguments (QEMU ≥ 6.2), one -device and one -object, replaced (never added again) whenever the domain is tuned; the tuning's kvmfr change loads the module at boot with this size and lets QEMU open the device (libvirt's cgroup_device_acl, and AppArmor's libvirt-qemu abstraction where AppArmor is). The client: `{command}`."
        );
        if leftovers > 0 {
            why.push_str(&format!(" {leftovers} leftover argument(s) of an earlier Looking Glass setup removed (a second -device/-object pair stops QEMU: \"'-object' is not a valid device model name\")."));
        }
        edits.push(edit(
            "qemu:commandline",
            format!("Looking Glass: {mib} MiB through {KVMFR_DEV} (kvmfr) for {res}"),
            &why,
        ));
    } else if !lg.kvmfr && args_changed {
        edits.push(edit(
            "qemu:commandline",
            format!("Looking Glass's kvmfr arguments removed ({leftovers} of them)"),
            "The shared memory is now the <shmem> device on /dev/shm: QEMU's own -device/-object arguments for /dev/kvmfr0 would give the guest a second one (and need the module). Your other QEMU arguments stay.",
        ));
    }
    if shm_changed && !lg.kvmfr {
        edits.push(edit("devices/shmem", format!("Looking Glass: {mib} MiB of shared memory ({SHM_FILE}) for {res}"), &format!("The guest copies each frame into memory shared with the host, where the Looking Glass client shows it in a window: no second monitor, no cable. Two frames plus 10 MiB, rounded up to a power of two; too small cuts the picture. The tuning's tmpfiles rule gives the file to your user. The client: `{command}`.")));
    } else if shm_changed {
        edits.push(edit(
            "devices/shmem",
            "Looking Glass's <shmem> removed (now kvmfr)".into(),
            "With kvmfr the shared memory is /dev/kvmfr0; a /dev/shm one as well would give the guest two.",
        ));
    }
    let d = devices(doc)?;
    edits.extend(agent_channel(d));
    edits.extend(no_tablet(d));
    edits.extend(super::virtio_inputs(
        d,
        "Looking Glass's guide (B6, B7): a virtio keyboard and mouse for SPICE's input, once Windows has the virtio-win vioinput driver; until then the PS/2 ones answer.",
    ));
    edits.extend(video(d));
    edits.extend(memballoon(d));
    Ok(edits)
}

/// A SPICE server the client reaches: an existing one kept when it already
/// listens where the client can connect, else set to 127.0.0.1 (only this
/// host); a new one on 127.0.0.1 with libvirt's autoport.
fn spice(d: &mut Element) -> Option<Edit> {
    let why = "The Looking Glass client sends keyboard and mouse into the guest through SPICE, and gets the clipboard (SPICE agent) and the VM's sound (audio type='spice') from it; its picture comes from the shared memory. The client runs on this host, so SPICE listens on 127.0.0.1 only, nothing on the network; libvirt picks the port (5900 for the first SPICE VM, the client's default).";
    let Some(g) = d
        .children_named_mut("graphics")
        .find(|e| e.attr("type") == Some("spice"))
    else {
        let mut g = el("graphics", &[("type", "spice"), ("autoport", "yes")]);
        g.append_child(el(
            "listen",
            &[("type", "address"), ("address", "127.0.0.1")],
        ));
        g.append_child(el("image", &[("compression", "off")]));
        d.append_child(g);
        return Some(edit(
            "devices/graphics",
            "SPICE on 127.0.0.1 for Looking Glass's client".into(),
            why,
        ));
    };
    if reachable(g).is_some() {
        return None;
    }
    let was = g
        .child("listen")
        .and_then(|l| l.attr("type"))
        .unwrap_or("no listener")
        .to_string();
    // libvirt takes the attribute and the element only when they agree.
    g.remove_attr("listen");
    g.remove_children("listen");
    g.append_child(el(
        "listen",
        &[("type", "address"), ("address", "127.0.0.1")],
    ));
    let fixed = g
        .attr("port")
        .and_then(|p| p.parse::<u16>().ok())
        .is_some_and(|p| p > 0);
    if !fixed {
        g.remove_attr("port");
        g.set_attr("autoport", "yes");
    }
    Some(edit(
        "devices/graphics",
        format!("SPICE listens on 127.0.0.1 (was: {was})"),
        why,
    ))
}

/// The shared memory as `<shmem>` (`Some(mib)`), or none of ours (`None`),
/// changed in place so that the same choice again changes nothing.
fn shmem(d: &mut Element, mib: Option<u64>) -> bool {
    let before = d.clone();
    let ours = |e: &Element| e.name == "shmem" && e.attr("name") == Some(BACKEND_ID);
    let Some(mib) = mib else {
        d.remove_children_where(ours);
        return *d != before;
    };
    // One of ours: the first kept (its address and all), any more removed.
    let seen = std::cell::Cell::new(0usize);
    d.remove_children_where(|e| {
        if !ours(e) {
            return false;
        }
        seen.set(seen.get() + 1);
        seen.get() > 1
    });
    if !d.elements().any(ours) {
        d.append_child(el("shmem", &[("name", BACKEND_ID)]));
    }
    if let Some(s) = d.children_named_mut("shmem").find(|e| ours(e)) {
        if let Some(m) = s.child_or_insert("model") {
            m.set_attr("type", "ivshmem-plain");
        }
        if let Some(z) = s.child_or_insert("size") {
            z.set_attr("unit", "M");
            z.set_text(&mib.to_string());
        }
    }
    *d != before
}

fn is_flag(v: &str) -> bool {
    v == "-device" || v == "-object"
}

/// A QEMU argument value of a Looking Glass setup: the guide's (and our)
/// memory backend id, or a kvmfr device.
fn lg_value(v: &str) -> bool {
    v.contains(BACKEND_ID) || v.contains("/dev/kvmfr")
}

/// The values of the domain's `<qemu:arg>`s, in order.
pub(super) fn qemu_arg_values(doc: &Document) -> Vec<String> {
    doc.root
        .child("qemu:commandline")
        .map(|c| {
            c.elements()
                .filter(|e| e.name == "qemu:arg")
                .map(|e| e.attr("value").unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Which arguments belong to a Looking Glass setup: each `-device`/`-object`
/// with its Looking Glass value, a Looking Glass value on its own, and a
/// `-device`/`-object` left without a value (what an earlier tuning that
/// removed only the values left behind). Everything else is someone else's.
fn lg_args(args: &[String]) -> Vec<bool> {
    let mut ours = vec![false; args.len()];
    for (i, a) in args.iter().enumerate() {
        let next = args.get(i + 1).map(String::as_str);
        if is_flag(a) {
            ours[i] = next.is_none_or(|n| n.starts_with('-') || lg_value(n));
        } else if lg_value(a) {
            ours[i] = true;
        }
    }
    ours
}

/// kvmfr's `-device`/`-object` arguments set for `Some(mib)` (at the place
/// of the old ones, else appended), or removed for `None`; an emptied
/// `<qemu:commandline>` goes too. (changed, how many old arguments went
/// beyond the one pair replaced).
fn kvmfr_args(doc: &mut Document, mib: Option<u64>) -> Result<(bool, usize), PlayError> {
    let args = qemu_arg_values(doc);
    let ours = lg_args(&args);
    let old = ours.iter().filter(|o| **o).count();
    let want: Vec<String> = match mib {
        None => Vec::new(),
        Some(mib) => vec![
            "-device".into(),
            format!("{{'driver':'ivshmem-plain','id':'shmem0','memdev':'{BACKEND_ID}'}}"),
            "-object".into(),
            format!(
                "{{'qom-type':'memory-backend-file','id':'{BACKEND_ID}','mem-path':'{KVMFR_DEV}','size':{},'share':true}}",
                mib * 1024 * 1024
            ),
        ],
    };
    let have: Vec<&str> = args
        .iter()
        .zip(&ours)
        .filter(|(_, o)| **o)
        .map(|(a, _)| a.as_str())
        .collect();
    if have.iter().copied().eq(want.iter().map(String::as_str)) {
        return Ok((false, 0));
    }
    if !want.is_empty() {
        doc.root
            .set_attr("xmlns:qemu", "http://libvirt.org/schemas/domain/qemu/1.0");
        if doc.root.child("qemu:commandline").is_none() {
            doc.root.append_child(Element::new("qemu:commandline"));
        }
    }
    let Some(cmd) = doc.root.child_mut("qemu:commandline") else {
        return Ok((false, 0));
    };
    let new: Vec<Element> = want
        .iter()
        .map(|v| el("qemu:arg", &[("value", v)]))
        .collect();
    replace_args(cmd, &ours, new);
    let empty = !cmd
        .elements()
        .any(|e| e.name == "qemu:arg" || e.name == "qemu:env");
    if empty {
        doc.root.remove_children("qemu:commandline");
    }
    let replaced = if want.is_empty() {
        0
    } else {
        want.len().min(old)
    };
    Ok((true, old - replaced))
}

/// The `<qemu:arg>`s `drop` marks replaced by `new` at the first one's place
/// (indented like it), or `new` appended when none is marked.
fn replace_args(cmd: &mut Element, drop: &[bool], new: Vec<Element>) {
    let mut new = Some(new);
    let mut out: Vec<Node> = Vec::with_capacity(cmd.children.len());
    let mut k = 0usize;
    for n in std::mem::take(&mut cmd.children) {
        let is_arg = matches!(&n, Node::Element(e) if e.name == "qemu:arg");
        if is_arg {
            let i = k;
            k += 1;
            if drop.get(i).copied().unwrap_or(false) {
                let lead = match out.last() {
                    Some(Node::Text { text, .. }) if text.trim().is_empty() => out.pop(),
                    _ => None,
                };
                if let Some(new) = new.take() {
                    for e in new {
                        if let Some(l) = &lead {
                            out.push(l.clone());
                        }
                        out.push(Node::Element(e));
                    }
                }
                continue;
            }
        }
        out.push(n);
    }
    cmd.children = out;
    for e in new.into_iter().flatten() {
        cmd.append_child(e);
    }
}

/// The SPICE agent's channel (clipboard, mouse position): the guide's
/// `<channel type='spicevmc'>` with its virtio target.
fn agent_channel(d: &mut Element) -> Option<Edit> {
    let has = d.elements().any(|e| {
        e.name == "channel"
            && e.attr("type") == Some("spicevmc")
            && e.child("target").and_then(|t| t.attr("name")) == Some("com.redhat.spice.0")
    });
    if has {
        return None;
    }
    let mut c = el("channel", &[("type", "spicevmc")]);
    c.append_child(el(
        "target",
        &[("type", "virtio"), ("name", "com.redhat.spice.0")],
    ));
    d.append_child(c);
    Some(edit(
        "devices/channel",
        "SPICE agent channel (com.redhat.spice.0)".into(),
        "The SPICE guest tools' agent in Windows talks to the host through this channel: the clipboard shared between the Looking Glass window and the VM. libvirt adds the virtio-serial controller it needs.",
    ))
}

/// No tablet: the guide has it removed (B6, B7).
fn no_tablet(d: &mut Element) -> Option<Edit> {
    let tablet = |e: &Element| e.name == "input" && e.attr("type") == Some("tablet");
    if !d.elements().any(tablet) {
        return None;
    }
    d.remove_children_where(tablet);
    Some(edit(
        "devices/input",
        "tablet removed".into(),
        "Looking Glass's guide removes it: a tablet gives Windows absolute positions that fight the client's own mouse handling (the pointer drifts or jumps in capture mode); SPICE drives the mouse instead.",
    ))
}

/// vga video for SPICE. Looking Glass's guide since B6 (`install_libvirt.rst`,
/// "Keyboard/mouse/display/audio": "Find your <video> device, and set
/// <model type='vga'/>"; B7 and the current guide: "For a usable display
/// fallback, set the VM's <video> model to vga") — the B4/B5 guide's
/// `<model type='none'/>` is gone. A model the user chose (qxl, virtio) is
/// a display SPICE can use as well and stays; none, or no video, becomes vga.
fn video(d: &mut Element) -> Option<Edit> {
    let none = d
        .child("video")
        .and_then(|v| v.child("model"))
        .is_some_and(|m| m.attr("type") == Some("none"));
    if !(none || d.child("video").is_none()) {
        return None;
    }
    d.remove_children("video");
    let mut v = el("video", &[]);
    v.append_child(el("model", &[("type", "vga")]));
    d.append_child(v);
    Some(edit(
        "devices/video",
        "vga video".into(),
        "SPICE needs a display device of its own (Looking Glass's guide: vga, the fallback picture before the Looking Glass host application runs); the GPU's picture goes through Looking Glass.",
    ))
}

fn memballoon(d: &mut Element) -> Option<Edit> {
    if d.child("memballoon").and_then(|m| m.attr("model")) == Some("none") {
        return None;
    }
    d.remove_children("memballoon");
    d.append_child(el("memballoon", &[("model", "none")]));
    Some(edit(
        "devices/memballoon",
        "memballoon model='none'".into(),
        "Looking Glass's guide: the balloon device hurts VFIO passthrough setups, and with a passed-through GPU all guest memory is pinned anyway.",
    ))
}

#[cfg(test)]
#[path = "looking_glass_tests.rs"]
mod tests;
