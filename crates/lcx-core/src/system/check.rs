//! Which settings will add noise to a measurement, each with the command
//! that fixes it (`lcx system check`, after pyperf's `system check`). A
//! setting that cannot be read is unknown: neither fine nor bad.

use serde::Serialize;

use super::gpu::Gpu;
use super::settings::{Memory, Turbo, SMT_FILE};
use super::snapshot::{Foreign, Snapshot};

/// Less available memory than this share of the total risks paging.
const MIN_AVAILABLE_SHARE: f64 = 0.10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Fine,
    Bad,
    Unknown,
    /// Shown, not judged (the load average, which counts lcx itself).
    Info,
}

/// One line of `lcx system show` and `check`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// A stable name for scripts (`--format json`).
    pub key: &'static str,
    pub label: &'static str,
    pub value: String,
    pub state: State,
    /// Why a bad setting adds noise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The command that fixes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn item(key: &'static str, label: &'static str, value: String, state: State) -> Item {
    Item {
        key,
        label,
        value,
        state,
        why: None,
        fix: None,
    }
}

fn bad(mut it: Item, why: &str, fix: &str) -> Item {
    it.state = State::Bad;
    it.why = Some(why.to_string());
    it.fix = Some(fix.to_string());
    it
}

fn unknown(key: &'static str, label: &'static str, what: &str) -> Item {
    item(key, label, format!("unknown ({what})"), State::Unknown)
}

/// Every item, in the order `show` prints them.
pub fn items(s: &Snapshot) -> Vec<Item> {
    vec![
        governor(&s.governors),
        turbo(s.turbo),
        smt(s.smt),
        isolated(s.isolated.as_deref()),
        load(s.load_1m, s.cpus),
        foreign(s.foreign.as_ref(), s.cpus),
        memory(s.memory),
        swap(s.memory),
        gpu(&s.gpus),
    ]
}

pub fn governor(governors: &[String]) -> Item {
    const L: &str = "CPU governor";
    if governors.is_empty() {
        return unknown("governor", L, "no cpufreq scaling_governor files");
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for g in governors {
        match counts.iter_mut().find(|(name, _)| name == g) {
            Some((_, n)) => *n += 1,
            None => counts.push((g, 1)),
        }
    }
    let parts: Vec<String> = counts.iter().map(|(g, n)| format!("{g} on {n}")).collect();
    let value = format!("{} of {} CPUs", parts.join(", "), governors.len());
    let it = item("governor", L, value, State::Fine);
    if counts.iter().all(|(g, _)| *g == "performance") {
        return it;
    }
    bad(
        it,
        "a governor other than `performance` changes the clock with the load, so the \
         first iterations and short cells run slower",
        "sudo cpupower frequency-set -g performance",
    )
}

pub fn turbo(turbo: Option<Turbo>) -> Item {
    const L: &str = "Turbo (boost)";
    match turbo {
        None => unknown("turbo", L, "no cpufreq/boost or intel_pstate/no_turbo"),
        Some(Turbo::Off(file)) => item("turbo", L, format!("off ({file})"), State::Fine),
        Some(Turbo::On(file)) => bad(
            item("turbo", L, format!("on ({file})"), State::Fine),
            "the clock then follows temperature and how many cores are busy",
            if file.ends_with("no_turbo") {
                "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
            } else {
                "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost"
            },
        ),
    }
}

pub fn smt(active: Option<bool>) -> Item {
    const L: &str = "SMT (hyper-threading)";
    match active {
        None => unknown("smt", L, &format!("no {SMT_FILE}")),
        Some(false) => item("smt", L, "off".into(), State::Fine),
        Some(true) => bad(
            item("smt", L, "on".into(), State::Fine),
            "a thread on a core's sibling shares its units and caches with the benchmark",
            "echo off | sudo tee /sys/devices/system/cpu/smt/control",
        ),
    }
}

/// Isolation is a choice, not noise: shown, and fine either way.
pub fn isolated(cpus: Option<&str>) -> Item {
    const L: &str = "Isolated CPUs";
    match cpus {
        None => unknown("isolated", L, "no /sys/devices/system/cpu/isolated"),
        Some("") => item(
            "isolated",
            L,
            "none (isolcpus= on the kernel command line sets CPUs aside for benchmarks)".into(),
            State::Fine,
        ),
        Some(list) => item("isolated", L, list.to_string(), State::Fine),
    }
}

pub fn load(load_1m: Option<f64>, cpus: Option<usize>) -> Item {
    const L: &str = "Load average (1 min)";
    match (load_1m, cpus) {
        // Never judged, so never "unknown" in `check`'s count either.
        (None, _) => item("load", L, "unknown (no /proc/loadavg)".into(), State::Info),
        (Some(l), Some(n)) => item("load", L, format!("{l:.2} on {n} CPUs"), State::Info),
        (Some(l), None) => item("load", L, format!("{l:.2}"), State::Info),
    }
}

/// Bad above the load that makes a cell contended by default (half a core,
/// or 10 % of the CPUs when that is less: `default_max_foreign_cpu`), so that
/// `check` and the report judge a machine alike.
pub fn foreign(foreign: Option<&Foreign>, cpus: Option<usize>) -> Item {
    const L: &str = "Foreign CPU now";
    let Some(f) = foreign else {
        return unknown("foreign_cpu", L, "no /proc/stat");
    };
    let names: Vec<String> = f
        .top
        .iter()
        .map(|(pid, name, cores)| format!("{name} (pid {pid}) {cores:.2}"))
        .collect();
    let mut value = format!(
        "{:.2} cores busy with other programs over {:.1} s",
        f.cores, f.seconds
    );
    if !names.is_empty() {
        value.push_str(&format!(": {}", names.join(", ")));
    }
    let it = item("foreign_cpu", L, value, State::Fine);
    let limit = super::default_max_foreign_cpu(cpus.map(|n| n as i64));
    if f.cores <= limit {
        return it;
    }
    let fix = match f.top.first() {
        Some((pid, name, _)) => format!(
            "stop or wait for what runs beside the benchmark: {name} (pid {pid}) first; `top` shows the rest"
        ),
        None => "stop or wait for what runs beside the benchmark; `top` shows what it is".into(),
    };
    bad(
        it,
        &format!("more than {limit:.2} of a core of other work (what makes a cell contended) competes with the benchmark for CPU, caches and memory bandwidth"),
        &fix,
    )
}

fn gib(kib: u64) -> String {
    format!("{:.1} GiB", kib as f64 / 1024.0 / 1024.0)
}

pub fn memory(memory: Option<Memory>) -> Item {
    const L: &str = "Memory";
    let Some(m) = memory else {
        return unknown("memory", L, "no /proc/meminfo");
    };
    let value = format!("{} available of {}", gib(m.available_kib), gib(m.total_kib));
    let it = item("memory", L, value, State::Fine);
    if (m.available_kib as f64) >= MIN_AVAILABLE_SHARE * m.total_kib as f64 {
        return it;
    }
    bad(
        it,
        "with under 10 % available the kernel drops file caches and may swap during a cell",
        "close programs that hold memory (`ps aux --sort=-rss | head`)",
    )
}

pub fn swap(memory: Option<Memory>) -> Item {
    const L: &str = "Swap";
    let Some(m) = memory else {
        return unknown("swap", L, "no /proc/meminfo");
    };
    if m.swap_total_kib == 0 {
        return item("swap", L, "none configured".into(), State::Fine);
    }
    let value = format!(
        "{} used of {}",
        gib(m.swap_used_kib()),
        gib(m.swap_total_kib)
    );
    let it = item("swap", L, value, State::Fine);
    if m.swap_used_kib() == 0 {
        return it;
    }
    bad(
        it,
        "pages in swap are read back from disk when touched, in the middle of a cell",
        "sudo swapoff -a && sudo swapon -a (moves them back to memory; needs that much available)",
    )
}

pub fn gpu(gpus: &Result<Option<Vec<Gpu>>, String>) -> Item {
    const L: &str = "GPU clocks";
    let gpus = match gpus {
        Err(e) => return unknown("gpu", L, e),
        Ok(None) => return unknown("gpu", L, "no GPU: nvidia-smi not found"),
        Ok(Some(g)) if g.is_empty() => return unknown("gpu", L, "nvidia-smi lists no GPU"),
        Ok(Some(g)) => g,
    };
    let mhz = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.0}"));
    let described: Vec<String> = gpus
        .iter()
        .map(|g| {
            format!(
                "{}: SM {} of {} MHz, memory {} MHz, persistence {}",
                g.name,
                mhz(g.sm_mhz),
                mhz(g.max_sm_mhz),
                mhz(g.memory_mhz),
                match g.persistence {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "unknown",
                }
            )
        })
        .collect();
    let it = item("gpu", L, described.join("; "), State::Fine);
    if gpus.iter().any(|g| g.persistence == Some(false)) {
        return bad(
            it,
            "without persistence mode the driver tears the device down between programs, \
             and each cell's start pays to set it up again",
            "sudo nvidia-smi -pm 1",
        );
    }
    it
}

#[cfg(test)]
mod tests;
