//! Each check on fake trees: a quiet machine, a noisy one, and one whose
//! files are missing.

use std::time::Duration;

use super::*;
use crate::system::gpu::Gpu;
use crate::system::proc::tests::fake;
use crate::system::Root;

const STAT: &str = "cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 50 0 25 500 0 0 0 0 0 0\n\
                    cpu1 50 0 25 500 0 0 0 0 0 0\n";
const CPU: &str = "/sys/devices/system/cpu";

fn tree(governor: &str, boost: &str, smt: &str, meminfo: &str) -> Vec<(String, String)> {
    vec![
        (
            format!("{CPU}/cpu0/cpufreq/scaling_governor"),
            format!("{governor}\n"),
        ),
        (
            format!("{CPU}/cpu1/cpufreq/scaling_governor"),
            "performance\n".into(),
        ),
        (format!("{CPU}/cpufreq/boost"), format!("{boost}\n")),
        (format!("{CPU}/smt/active"), format!("{smt}\n")),
        (format!("{CPU}/isolated"), "\n".into()),
        ("/proc/stat".into(), STAT.into()),
        ("/proc/loadavg".into(), "0.31 0.2 0.1 1/99 7\n".into()),
        ("/proc/meminfo".into(), meminfo.into()),
    ]
}

const QUIET_MEMORY: &str = "MemTotal: 8000000 kB\nMemAvailable: 6000000 kB\n\
                            SwapTotal: 1000000 kB\nSwapFree: 1000000 kB\n";
const NOISY_MEMORY: &str = "MemTotal: 8000000 kB\nMemAvailable: 400000 kB\n\
                            SwapTotal: 1000000 kB\nSwapFree: 600000 kB\n";

fn judged(files: &[(String, String)]) -> Vec<Item> {
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (_dir, root) = fake(&files);
    items(&Snapshot::take(&root, Duration::from_millis(5), false))
}

fn state_of(items: &[Item], key: &str) -> State {
    items
        .iter()
        .find(|i| i.key == key)
        .map(|i| i.state)
        .unwrap_or_else(|| panic!("{key}"))
}

#[test]
fn a_quiet_machine_is_fine_throughout() {
    let items = judged(&tree("performance", "0", "0", QUIET_MEMORY));
    for key in [
        "governor",
        "turbo",
        "smt",
        "isolated",
        "foreign_cpu",
        "memory",
        "swap",
    ] {
        assert_eq!(state_of(&items, key), State::Fine, "{key}: {items:?}");
    }
    assert_eq!(state_of(&items, "load"), State::Info);
    assert_eq!(state_of(&items, "gpu"), State::Unknown);
    assert!(items.iter().all(|i| i.fix.is_none()), "{items:?}");
    let governor = &items[0];
    assert_eq!(governor.value, "performance on 2 of 2 CPUs");
}

#[test]
fn a_noisy_machine_says_why_and_how_to_fix_each() {
    let items = judged(&tree("powersave", "1", "1", NOISY_MEMORY));
    let fix = |key: &str| {
        let it = items.iter().find(|i| i.key == key).unwrap();
        assert_eq!(it.state, State::Bad, "{it:?}");
        assert!(it.why.is_some(), "{it:?}");
        it.fix.clone().unwrap()
    };
    assert_eq!(
        fix("governor"),
        "sudo cpupower frequency-set -g performance"
    );
    assert_eq!(items[0].value, "powersave on 1, performance on 1 of 2 CPUs");
    assert_eq!(
        fix("turbo"),
        "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost"
    );
    assert!(fix("smt").contains("smt/control"));
    assert!(fix("memory").contains("close programs"));
    assert!(fix("swap").contains("swapoff"));
}

#[test]
fn a_machine_without_the_files_is_unknown_never_bad() {
    let (_dir, empty) = fake(&[]);
    let items = items(&Snapshot::take(&empty, Duration::ZERO, false));
    assert_eq!(items.len(), 9);
    for it in &items {
        let want = if it.key == "load" {
            State::Info
        } else {
            State::Unknown
        };
        assert_eq!(it.state, want, "{it:?}");
        assert!(it.value.starts_with("unknown ("), "{it:?}");
    }
}

#[test]
fn intel_turbo_is_fixed_through_no_turbo() {
    let on = turbo(Some(crate::system::settings::Turbo::On(
        crate::system::settings::NO_TURBO_FILE,
    )));
    assert_eq!(
        on.fix.as_deref(),
        Some("echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo")
    );
}

#[test]
fn foreign_cpu_above_the_contention_limit_names_the_biggest_user() {
    let busy = Foreign {
        cores: 0.98,
        seconds: 1.0,
        top: vec![(77, "stress".into(), 0.97)],
    };
    let it = foreign(Some(&busy), Some(16));
    assert_eq!(it.state, State::Bad);
    assert!(
        it.value.contains("0.98 cores") && it.value.contains("stress (pid 77)"),
        "{it:?}"
    );
    assert!(it.fix.unwrap().contains("stress (pid 77)"));
    let quiet = Foreign {
        cores: 0.5,
        seconds: 1.0,
        top: Vec::new(),
    };
    assert_eq!(foreign(Some(&quiet), Some(16)).state, State::Fine);
    // On 2 CPUs a tenth of the host, 0.2 of a core, is the limit, as for a
    // cell; without a CPU count, half a core.
    assert_eq!(foreign(Some(&quiet), Some(2)).state, State::Bad);
    assert_eq!(foreign(Some(&quiet), None).state, State::Fine);
}

#[test]
fn swap_configured_but_unused_and_no_swap_are_fine() {
    let m = |total, free| {
        Some(Memory {
            total_kib: 100,
            available_kib: 90,
            swap_total_kib: total,
            swap_free_kib: free,
        })
    };
    assert_eq!(swap(m(0, 0)).value, "none configured");
    assert_eq!(swap(m(0, 0)).state, State::Fine);
    assert_eq!(swap(m(10, 10)).state, State::Fine);
    assert_eq!(swap(m(10, 9)).state, State::Bad);
}

#[test]
fn a_gpu_without_persistence_mode_is_bad_and_a_failing_nvidia_smi_unknown() {
    let gpu_of = |persistence| Gpu {
        name: "NVIDIA H200".into(),
        sm_mhz: Some(1980.0),
        max_sm_mhz: Some(1980.0),
        memory_mhz: None,
        persistence,
    };
    let on = gpu(&Ok(Some(vec![gpu_of(Some(true))])));
    assert_eq!(on.state, State::Fine);
    assert_eq!(
        on.value,
        "NVIDIA H200: SM 1980 of 1980 MHz, memory ? MHz, persistence on"
    );
    let off = gpu(&Ok(Some(vec![gpu_of(Some(true)), gpu_of(Some(false))])));
    assert_eq!(off.fix.as_deref(), Some("sudo nvidia-smi -pm 1"));
    assert_eq!(gpu(&Err("nvidia-smi failed".into())).state, State::Unknown);
    assert_eq!(
        gpu(&Ok(None)).value,
        "unknown (no GPU: nvidia-smi not found)"
    );
}

#[test]
fn this_host_is_judged_without_failing() {
    let items = items(&Snapshot::take(
        &Root::default(),
        Duration::from_millis(50),
        false,
    ));
    assert_eq!(items.len(), 9);
}
