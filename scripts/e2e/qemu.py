"""One real host in QEMU: the machine, its devices, a boot, a power cut.

Software emulation (`-accel tcg`): this kind of CI machine's KVM cannot run a
stock kernel. The machine is a desktop in miniature, so the tool sees what it
sees on a user's desk:

* q35, `intel-iommu` with interrupt remapping and caching mode (first, so the
  devices after it sit behind it; caching mode lets vfio inside the guest
  work);
* virtio-vga on the root bus: the host's own screen, the boot GPU
  (1af4:1050, an ID that binding by ID never takes);
* the VM's "GPU" behind its own root port: VGA (1234:1111) as function 0 and
  ich9 HD audio (8086:293e) as function 1 of one slot, one IOMMU group, like a
  card with its HDMI audio;
* an xHCI controller with a USB keyboard and mouse behind another root port;
* an e1000e NIC behind a third (user networking, nothing reachable);
* a 9p share (tag "ctl") through which each boot's step arrives and its
  output returns; the serial console in console.log; QMP on a socket.

Each boot is a cold boot through firmware and boot loader (`-no-reboot`: a
reboot in the guest ends QEMU, the harness starts it again).

The "one-gpu" machine (the single-GPU case) is the same desktop without
virtio-vga: its only GPU, the VGA behind rp1, is the boot GPU the console and
the display manager are on. The "twins" machine (the identical-cards case)
has a second QEMU VGA on the root bus in virtio-vga's place: two cards with
one ID, the root bus's the boot GPU and the host's screen.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

from log import say

OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
# Secure Boot: OVMF built with SMM (its variables writable only from SMM, so
# the OS cannot turn Secure Boot off behind the firmware's back) and a
# variable store with Microsoft's keys enrolled and Secure Boot on, as a
# shop-bought PC comes (Debian's ovmf package).
OVMF_CODE_SB = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
OVMF_VARS_SB = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
MEMORY_MIB = int(os.environ.get("E2E_MEMORY_MIB", "3072"))
SMP = int(os.environ.get("E2E_SMP", "2"))
# `max` under TCG has AMD SVM, so the test host has KVM as a user's does (the
# checks pass). QEMU 7.2's multi-threaded TCG aborts (tcg_handle_interrupt:
# qemu_mutex_iothread_locked) when that KVM runs a guest, so the VM step
# unloads kvm_amd first and the VM inside is emulated (steps/lib.sh).
CPU = os.environ.get("E2E_CPU", "max")
TB_MIB = int(os.environ.get("E2E_TB_MIB", "512"))


def machine_args(host, disk, vars_file, share, qmp, machine="desktop", secure=False):
    """`secure`: boot with Secure Boot on (a host with secure_boot, except
    its provisioning boot: Debian's kernel straight from -kernel is signed
    for shim's key, not Microsoft's)."""
    one_gpu = machine == "one-gpu"
    # Two identical cards: the host's screen is a second QEMU VGA (the same
    # 1234:1111) on the root bus, the boot GPU, instead of virtio-vga.
    twins = machine == "twins"
    a = [
        "qemu-system-x86_64", "-nodefaults", "-no-user-config",
        "-machine", "q35,smm=on" if secure else "q35", "-accel", f"tcg,thread=multi,tb-size={TB_MIB}",
        "-cpu", CPU, "-smp", str(SMP), "-m", str(MEMORY_MIB),
        "-device", "intel-iommu,intremap=on,caching-mode=on",
    ]
    if twins:
        a += ["-device", "VGA,bus=pcie.0,addr=0x2,id=vga0"]
    elif not one_gpu:
        a += ["-device", "virtio-vga,bus=pcie.0,addr=0x2,id=vga0"]
    a += [
        "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,addr=0x1c.0,multifunction=on",
        "-device", "VGA,bus=rp1,addr=0x0.0,multifunction=on" + (",id=vga0" if one_gpu else ""),
        "-device", "ich9-intel-hda,bus=rp1,addr=0x0.1",
        "-device", "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,addr=0x1c.1",
        "-device", "qemu-xhci,bus=rp2,id=xhci",
        # The keyboard bound to the host's screen, so QMP input-send-event
        # can aim at it by id (the picker's keys come from outside); the
        # mouse (no such property) gets the console's relative motion, which
        # goes to the USB mouse once the guest drives it.
        "-device", "usb-kbd,bus=xhci.0,id=kbd,display=vga0",
        "-device", "usb-mouse,bus=xhci.0,id=mouse",
        "-device", "pcie-root-port,id=rp3,bus=pcie.0,chassis=3,addr=0x1c.2",
        "-netdev", "user,id=n0,restrict=on",
        "-device", "e1000e,bus=rp3,netdev=n0",
        "-drive", f"file={disk},format=raw,if=none,id=d0,cache=unsafe,discard=unmap",
        "-device", "virtio-blk-pci,drive=d0,bus=pcie.0,addr=0x5",
        "-fsdev", f"local,id=ctl,path={share},security_model=none",
        "-device", "virtio-9p-pci,fsdev=ctl,mount_tag=ctl,bus=pcie.0,addr=0x6",
        "-display", "none", "-vga", "none", "-no-reboot",
        "-qmp", f"unix:{qmp},server=on,wait=off",
    ]
    if secure:
        a += ["-global", "driver=cfi.pflash01,property=secure,value=on"]
    if host.firmware == "uefi":
        code = OVMF_CODE_SB if secure else OVMF_CODE
        a += ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={code}",
              "-drive", f"if=pflash,format=raw,unit=1,file={vars_file}"]
    return a


class Guest:
    """A host's disk booted again and again; logs under `logdir`."""

    def __init__(self, host, disk, vars_file, share, logdir, kernel=None, machine="desktop"):
        self.host = host
        self.machine = machine
        self.disk = Path(disk)
        self.vars = vars_file
        self.share = Path(share)
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        (self.share / "out").mkdir(parents=True, exist_ok=True)
        self.kernel = kernel
        self.proc = None
        self.boots = 0
        # What went wrong with a boot itself (not with the tool): said as it
        # happens and again in the run's summary, where CI's tail shows it.
        self.notes = []

    def note(self, text):
        self.notes.append(text)
        say(text)

    @property
    def out(self):
        return self.share / "out"

    def booted(self):
        try:
            return int((self.out / "boots").read_text().strip())
        except (OSError, ValueError):
            return 0

    def start(self):
        self.boots += 1
        qmp = self.logdir / "qmp.sock"
        args = machine_args(self.host, self.disk, self.vars, self.share, qmp, self.machine,
                            secure=self.host.secure_boot and not self.kernel)
        if self.kernel:
            k, i, cmdline = self.kernel
            args += ["-kernel", str(k), "-initrd", str(i), "-append", cmdline]
        self.console = self.logdir / f"console-{self.boots}.log"
        args += ["-serial", f"file:{self.console}"]
        (self.logdir / "qemu-args.txt").write_text(" ".join(args) + "\n")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=open(self.logdir / "qemu.log", "ab"),
                                     stderr=subprocess.STDOUT)

    def wait(self, timeout_s):
        """Until QEMU ends (the guest powered off); False on timeout."""
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def qmp(self, command, **arguments):
        """One QMP command to the running QEMU; its reply."""
        import json
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(str(self.logdir / "qmp.sock"))
        f = s.makefile("rw")
        f.readline()
        for c, a in (("qmp_capabilities", None), (command, arguments)):
            msg = {"execute": c}
            if a:
                msg["arguments"] = a
            f.write(json.dumps(msg) + "\n")
            f.flush()
            while True:
                reply = json.loads(f.readline())
                if "return" in reply or "error" in reply:
                    break
        s.close()
        if "error" in reply:
            say(f"  qmp {command}: {reply['error']}")
        return reply

    def power_cut(self):
        """SIGKILL: nothing the guest had not written reaches the disk."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        say(f"power cut after {time.monotonic() - self.started:.0f} s of boot {self.boots}")

    def step_begun(self, before):
        """Whether this boot's step began: the guest counted the boot and
        started step.sh (its log is there; e2e-ctl writes the boot's facts
        first, and a boot can stop between the two)."""
        n = self.booted()
        return n > before and (self.out / f"step-{n}.log").exists()

    def step_result(self, before):
        """(boot number in the guest, exit code of its step or None)."""
        n = self.booted()
        if n <= before:
            return None, None
        rc = self.out / f"step-{n}.rc"
        try:
            return n, int(rc.read_text().strip())
        except (OSError, ValueError):
            return n, None

    def boot_step(self, timeout_s, watch=None, stall_s=300):
        """One cold boot running share/step.sh; its exit code (None: it did
        not finish). `watch(guest)` is called every second while it runs and
        may cut the power (returning True ends the boot there).

        A boot that goes wrong before its step ran changed nothing the step
        would change, and a desktop's owner presses the power button again:
        so does this, at most twice, each time said (and kept in `notes`
        for the run's summary). Three ways were seen under a loaded
        machine: the kernel panics early ("timer doesn't work through
        Interrupt-remapped IO-APIC", the emulated CPU too slow for the
        kernel's timer check; a double fault in a module load as udev
        starts, with Debian's 6.12 kernel); the boot stalls (systemd-logind
        never started), cut after `stall_s` seconds with no step begun (a
        boot to its step takes 40 to 100 s here: the slowest of 61 logged
        boots started it 78 s into the kernel, two guests at once; a stalled
        one printed nothing after the root's fsck for 600 s, so waiting
        longer only spends CI's budget); the machine resets itself
        before the step (QEMU ends: -no-reboot). A panic during the step
        ends the boot at once (not again: what the step did is not known)."""
        before = self.booted()
        self.start()
        deadline = time.monotonic() + timeout_s
        cut = False
        retries = 0
        while True:
            ended = self.proc.poll() is not None
            why = None
            panic = self.panicked()
            if not self.step_begun(before):
                if panic:
                    why = f"the kernel panicked before the step ran ({panic})"
                elif ended:
                    why = "the machine reset itself before the step ran"
                elif stall_s and time.monotonic() - self.started > stall_s:
                    why = f"no step begun after {stall_s} s (the boot stalled)"
            elif ended:
                break
            elif panic:
                # During the step: what it did is not known, so not again;
                # the boot ends now rather than at the timeout.
                self.note(f"boot {self.boots}: the kernel panicked during the step ({panic})")
                self.dump_tail(12)
                self.power_cut()
                return None
            if why:
                retries += 1
                again = retries <= 2
                self.note(f"boot {self.boots}: {why}; " + ("booted again" if again else f"given up after {retries} tries"))
                self.dump_tail(12)
                self.power_cut()
                if not again:
                    return None
                self.start()
                deadline = time.monotonic() + timeout_s
                continue
            if ended:
                break
            if time.monotonic() > deadline:
                self.note(f"boot {self.boots} of {self.host.name}: no end after {timeout_s} s; killed")
                self.power_cut()
                self.dump_tail()
                return None
            if watch and watch(self):
                self.power_cut()
                cut = True
                break
            time.sleep(1)
        took = time.monotonic() - self.started
        n, rc = self.step_result(before)
        if n is None:
            self.note(f"boot {self.boots}: the guest never ran its step ({took:.0f} s)")
            self.dump_tail()
            return None
        boot_txt = self.out / f"boot-{n}.txt"
        if boot_txt.exists():
            for line in boot_txt.read_text().splitlines():
                say(f"  | {line}")
        say(f"boot {self.boots} ({took:.0f} s): step {'cut' if cut else f'exit {rc}'}")
        return rc

    def panicked(self):
        """The kernel's panic line on this boot's console, or None."""
        try:
            with open(self.console, "rb") as f:
                text = f.read(4 << 20).decode(errors="replace")
        except OSError:
            return None
        i = text.find("Kernel panic - not syncing")
        return text[i:].splitlines()[0].strip(" -") if i >= 0 else None

    def step_log(self):
        n = self.booted()
        p = self.out / f"step-{n}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def dump_tail(self, lines=40):
        try:
            text = self.console.read_text(errors="replace").splitlines()
        except OSError:
            return
        say(f"-- last {lines} lines of {self.console}")
        for line in text[-lines:]:
            say(f"  > {line}")
