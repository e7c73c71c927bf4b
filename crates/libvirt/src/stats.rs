//! libvirt's per-vCPU statistics: what `virsh domstats --vcpu` prints
//! (`vcpu.N.time`, `.wait`, `.delay`, and since libvirt 8.x with QEMU ≥ 7.1
//! KVM's own counters as `vcpu.N.exits.sum`, `vcpu.N.io_exits.sum`, …).
//!
//! The `virt` crate's `all_domain_stats` hands back raw record pointers it
//! never frees, so this calls `virDomainListGetStats` itself, copies the
//! numbers out and frees the list with `virDomainStatsRecordListFree`.

use crate::Libvirt;
use std::ffi::CStr;
use vfio_assistant_core::hypervisor::VirtError;
use virt::sys;

/// Which statistics group to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsGroup {
    /// `state.state`, `state.reason`.
    State,
    /// `vcpu.current`, `vcpu.N.time`, `vcpu.N.exits.sum`…
    Vcpu,
}

impl Libvirt {
    /// One statistics group of one domain, numbers only (booleans as 0/1;
    /// the few string and double fields are skipped).
    pub fn domain_stats(
        &self,
        name: &str,
        group: StatsGroup,
    ) -> Result<Vec<(String, u64)>, VirtError> {
        let group = match group {
            StatsGroup::State => sys::VIR_DOMAIN_STATS_STATE,
            StatsGroup::Vcpu => sys::VIR_DOMAIN_STATS_VCPU,
        };
        let dom = self.lookup(name)?;
        // SAFETY: `dom` outlives the call; the array is NULL-terminated as
        // virDomainListGetStats requires.
        let mut doms = [unsafe { dom.as_ptr() }, std::ptr::null_mut()];
        let mut records: *mut sys::virDomainStatsRecordPtr = std::ptr::null_mut();
        // SAFETY: valid domain array and out-pointer; flags 0.
        let n = unsafe { sys::virDomainListGetStats(doms.as_mut_ptr(), group, &mut records, 0) };
        if n < 0 || records.is_null() {
            let e = virt::error::Error::last_error();
            return Err(crate::connection::wrap(&format!(
                "reading the statistics of '{name}'"
            ))(e));
        }
        let mut out = Vec::new();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: libvirt returned `n` record pointers.
            let rec = unsafe { *records.add(i) };
            if rec.is_null() {
                continue;
            }
            // SAFETY: a record libvirt filled: `nparams` parameters at `params`.
            let (params, count) = unsafe { ((*rec).params, (*rec).nparams) };
            for j in 0..usize::try_from(count).unwrap_or(0) {
                // SAFETY: j < nparams.
                let p = unsafe { &*params.add(j) };
                if let Some(v) = param_value(p) {
                    out.push((field_name(&p.field), v));
                }
            }
        }
        // SAFETY: the list libvirt allocated above, freed once.
        unsafe { sys::virDomainStatsRecordListFree(records) };
        Ok(out)
    }
}

/// A fixed-size, NUL-terminated field name.
fn field_name(field: &[std::os::raw::c_char; 80]) -> String {
    let bytes: Vec<u8> = field.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}

fn param_value(p: &sys::virTypedParameter) -> Option<u64> {
    let t = u32::try_from(p.type_).ok()?;
    // SAFETY: each arm reads the union member that `type_` says is set.
    unsafe {
        match t {
            sys::VIR_TYPED_PARAM_INT => u64::try_from(p.value.i).ok(),
            sys::VIR_TYPED_PARAM_UINT => Some(u64::from(p.value.ui)),
            sys::VIR_TYPED_PARAM_LLONG => u64::try_from(p.value.l).ok(),
            sys::VIR_TYPED_PARAM_ULLONG => Some(p.value.ul),
            sys::VIR_TYPED_PARAM_BOOLEAN => Some(u64::from(p.value.b != 0)),
            _ => None,
        }
    }
}
