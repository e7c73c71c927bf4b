use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn only_looking_glass_arguments_are_ours() {
    let args = s(&[
        "-device",
        "-object",
        "-device",
        "{'driver':'ivshmem-plain','id':'shmem0','memdev':'looking-glass'}",
        "-smbios",
        "type=1",
        "-object",
        "memory-backend-file,id=looking-glass,mem-path=/dev/kvmfr0,size=64M,share=yes",
        "-device",
        "virtio-balloon",
    ]);
    assert_eq!(
        lg_args(&args),
        [
            true, true, true, true, false, false, true, true, false, false
        ]
    );
    assert_eq!(
        kvmfr_path("{'mem-path':'/dev/kvmfr12','size':1}"),
        Some("/dev/kvmfr12")
    );
    assert_eq!(kvmfr_path("/dev/kvmfrx"), None);
}

fn graphics(xml: &str) -> Element {
    Document::parse(xml).unwrap().root
}

#[test]
fn a_listener_the_client_reaches_or_none() {
    let tcp = |host: &str, port| {
        Some(SpiceAt::Tcp {
            host: host.into(),
            port,
        })
    };
    for (xml, want) in [
        (
            "<graphics type='spice'><listen type='none'/></graphics>",
            None,
        ),
        ("<graphics type='spice'/>", None),
        (
            "<graphics type='spice'><listen type='network' network='default'/></graphics>",
            None,
        ),
        (
            "<graphics type='spice'><listen type='socket'/></graphics>",
            None,
        ),
        (
            "<graphics type='spice' autoport='yes'><listen type='address' address='0.0.0.0'/></graphics>",
            tcp("127.0.0.1", None),
        ),
        // A running domain's XML: the port libvirt gave.
        (
            "<graphics type='spice' port='5901' autoport='yes' listen='127.0.0.1'><listen type='address' address='127.0.0.1'/></graphics>",
            tcp("127.0.0.1", Some(5901)),
        ),
        (
            "<graphics type='spice' port='-1' autoport='yes' listen='192.168.1.2'/>",
            tcp("192.168.1.2", None),
        ),
        (
            "<graphics type='spice'><listen type='socket' socket='/run/lg/spice.sock'/></graphics>",
            Some(SpiceAt::Socket {
                path: "/run/lg/spice.sock".into(),
            }),
        ),
    ] {
        assert_eq!(reachable(&graphics(xml)), want, "{xml}");
    }
}

#[test]
fn the_client_is_told_what_the_domain_has() {
    let c = ClientSetup {
        shm_file: KVMFR_DEV.into(),
        spice: Some(SpiceAt::Socket {
            path: "/run/lg/spice.sock".into(),
        }),
    };
    assert_eq!(
        c.command(),
        "looking-glass-client -f /dev/kvmfr0 spice:host=/run/lg/spice.sock spice:port=0"
    );
    let none = ClientSetup {
        shm_file: SHM_FILE.into(),
        spice: None,
    };
    assert_eq!(
        none.command(),
        "looking-glass-client -f /dev/shm/looking-glass -s"
    );
    assert!(none.client_ini().contains("enable=no"));
    assert!(!none.explain("w").lines().any(|l| l == "  "));
}
