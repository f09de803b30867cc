//! `scripts/cpu-check.sh --quick`: the AMP check a host with bf16 units
//! runs first thing (issue 74), at its smallest sizes on whatever CPU the
//! suite has, so that it cannot rot between such hosts.

#[test]
fn the_cpu_check_times_fp32_against_bf16_and_writes_its_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cpu-out");
    let run = crate::support::check_script("cpu-check.sh", &out, &["--quick"]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    // The host's bf16 units, said either way.
    let units = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has_units = units.contains(" avx512_bf16") || units.contains(" amx_bf16");
    let said = if has_units {
        "- bf16 units: yes"
    } else {
        "- bf16 units: none"
    };
    assert!(summary.contains(said), "{summary}");
    // One row per batch, every lcx figure a number, the bf16 kernel named
    // where lcx's kernel runs.
    #[cfg(target_arch = "x86_64")]
    let kernel = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    for batch in ["16", "64"] {
        let row = summary
            .lines()
            .find(|l| l.starts_with(&format!("| {batch} |")))
            .unwrap_or_else(|| panic!("no row for batch {batch}: {summary}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cells[2].parse::<f64>().is_ok_and(|v| v > 0.0), "{row}");
        if kernel {
            assert!(cells[3].parse::<f64>().is_ok_and(|v| v > 0.0), "{row}");
            assert!(cells[4].starts_with("lcx bf16-"), "{row}");
            assert!(cells[5].ends_with('×'), "{row}");
        }
    }
    assert!(summary.contains("- FP32 ceiling: "), "{summary}");
    assert!(
        summary.contains("kernel tests: skipped (--quick)"),
        "{summary}"
    );
}
