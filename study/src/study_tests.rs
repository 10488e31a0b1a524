//! Reading and checking a study.

use engine_bridge::Catalog;

use super::*;

pub(crate) const SEEDS: &str = r#"
name = "K/V cache types"
profile = "demo"
model = "tiny"
constraints = ['flash_attn == "on" when cache_type_v != "f16"']

[space]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = ["on", "off"]
ctx_size = { min = 2048, max = 16384, log = true }

[fixed]
threads = 2

[baseline]
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = "off"
ctx_size = 4096

[[objectives]]
metric = "decode_tps"

[[objectives]]
metric = "peak_rss_bytes"
max = "120 GiB"

[[bounds]]
metric = "quality_score"
min = "baseline - 1%"
"#;

fn check(text: &str) -> Result<Study, StudyError> {
    StudyDef::from_toml(text)?.check(&Catalog::llama_server(), &["tiny".to_string()])
}

#[test]
fn margins_are_checked_and_kept() {
    let text =
        SEEDS.replace("[space]\n", "margins = { speed_pct = 5, quality_rate = 0.01 }\n[space]\n");
    let study = check(&text).unwrap();
    assert_eq!(study.def.margins.speed_pct, 5.0);
    assert_eq!(study.def.margins.memory_pct, 3.0, "the rest keep their defaults");
    let bad = SEEDS.replace("[space]\n", "margins = { speed_pct = 0 }\n[space]\n");
    let e = check(&bad).unwrap_err().to_string();
    assert!(e.contains("margins.speed_pct: 0 is not between 0 and 50 percent"), "{e}");
    let unknown = SEEDS.replace("[space]\n", "margins = { speed = 5 }\n[space]\n");
    assert!(StudyDef::from_toml(&unknown).is_err());
}

#[test]
fn a_divergence_is_judged_only_where_the_probe_runs() {
    // A bound on the KL divergence needs the probe that measures it.
    let bounded = format!("{SEEDS}\n[[bounds]]\nmetric = \"kld_mean\"\nmax = \"0.01\"\n");
    let e = check(&bounded).unwrap_err().to_string();
    assert!(e.contains("metric `kld_mean` is measured by the KL-divergence probe"), "{e}");
    let study = check(&format!("{bounded}[probes.kld]\nchunks = 2\n")).unwrap();
    // The reference is the study's own baseline.
    let kld = study.probes.kld.as_ref().unwrap();
    assert_eq!(kld.reference, study.baseline);
    assert_eq!(kld.chunks, 2);
    // Its own margins, in nats.
    let text = SEEDS.replace("[space]\n", "margins = { kld_mean = 0.02 }\n[space]\n");
    assert_eq!(check(&text).unwrap().def.margins.kld_mean, 0.02);
    // Quality, recall, perplexity and speed: a study that leaves out the
    // probe an objective or a bound needs runs it all the same.
    for (metric, ran) in [
        ("quality_score", (|p: &ProbePlan| p.quality.is_some()) as fn(&ProbePlan) -> bool),
        ("context_pass_rate", |p| p.context.is_some()),
        ("perplexity", |p| p.perplexity.is_some()),
        ("decode_tps", |p| p.speed.is_some()),
    ] {
        let text = SEEDS
            .replace("metric = \"decode_tps\"", "metric = \"load_ms\"")
            .replace("metric = \"quality_score\"", &format!("metric = \"{metric}\""));
        let named = format!("{text}\n[probes.depth]\n");
        let study = check(&named).unwrap_or_else(|e| panic!("{metric}: {e}"));
        assert!(ran(&study.probes), "{metric}: {:?}", study.probes);
    }
    // Goodput, likewise, needs the load probe, with a workload named, not a path.
    let served = format!("{SEEDS}\n[[bounds]]\nmetric = \"goodput_rps\"\nmin = \"2\"\n");
    let e = check(&served).unwrap_err().to_string();
    assert!(e.contains("metric `goodput_rps` is measured by the load probe"), "{e}");
    let loaded = format!("{served}[probes.load]\nworkload = \"agent\"\nrates = [1, 2]\n");
    assert_eq!(check(&loaded).unwrap().probes.load.unwrap().rates, [1.0, 2.0]);
    let drawn = format!(
        "{served}[probes.load]\nworkload = \"synthetic\"\nlengths = {{ prompt = {{ mean = 0 }} }}\n"
    );
    let e = check(&drawn).unwrap_err().to_string();
    assert!(e.contains("probes.load.lengths: means from 1"), "{e}");
    let path = format!("{served}[probes.load]\nworkload = \"../../etc/passwd\"\n");
    let e = check(&path).unwrap_err().to_string();
    assert!(e.contains("probes.load.workload `../../etc/passwd`: not one of"), "{e}");
    let bad = SEEDS.replace("[space]\n", "margins = { kld_p99 = -1 }\n[space]\n");
    let e = check(&bad).unwrap_err().to_string();
    assert!(e.contains("margins.kld_p99: -1 is not between 0 and 10 nats"), "{e}");
}

#[test]
fn a_study_from_the_seeds() {
    let study = check(SEEDS).unwrap();
    assert_eq!(study.space.params.len(), 4);
    assert_eq!(study.space.grid_size(), 3 * 3 * 2 * 4);
    assert_eq!(study.baseline["threads"], "2");
    assert_eq!(study.objectives[1].goal, Goal::Min);
    assert_eq!(study.def.strategy.kind, StrategyKind::Bayes, "the default");
    // The quality bound's probe is run; nothing names recall.
    assert!(study.probes.speed.is_some() && study.probes.quality.is_some());
    assert!(study.probes.context.is_none());
}

#[test]
fn request_time_settings_change_fastest_in_the_grid() {
    let text = SEEDS.replace("[space]\n", "[space]\ntop_k = [1, 40]\n");
    let study = check(&text).unwrap();
    let names: Vec<&str> = study.space.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.last(), Some(&"top_k"), "{names:?}");
    let grid: Vec<Settings> = study.space.grid().take(2).collect();
    assert_eq!(grid[0]["top_k"], "1");
    assert_eq!(grid[1]["top_k"], "40");
    let catalog = Catalog::llama_server();
    assert_eq!(catalog.load_time(&grid[0]), catalog.load_time(&grid[1]));
}

#[test]
fn every_problem_is_named() {
    let bad = SEEDS
        .replace(r#"cache_type_k = ["f16", "q8_0", "q4_0"]"#, "cache_type_k = []")
        .replace("threads = 2", "threads = 2\nctx_size = 1\nbogus = 1")
        .replace(r#"metric = "decode_tps""#, r#"metric = "speed""#)
        .replace("flash_attn = [\"on\", \"off\"]", "flash_attn = [\"on\", \"sometimes\"]");
    let StudyError(errors) = check(&bad).unwrap_err();
    let all = errors.join("\n");
    for expected in [
        "setting `cache_type_k`: the list of values is empty",
        "unknown setting `bogus`",
        "`ctx_size` is both varied and fixed",
        "unknown metric `speed`",
        "`sometimes` is not one of",
    ] {
        assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
    }
}

#[test]
fn no_objective_and_unsatisfiable_constraints() {
    let none = SEEDS.split("[[objectives]]").next().unwrap();
    assert!(check(none).unwrap_err().to_string().contains("no objective"));
    let never = SEEDS.replace("constraints = [", "constraints = ['ctx_size < 1000', ");
    let e = check(&never).unwrap_err().to_string();
    assert!(e.contains("baseline breaks `ctx_size < 1000`"), "{e}");
    let outside = never.replace("ctx_size = 4096", "ctx_size = 512");
    let e = check(&outside).unwrap_err().to_string();
    assert!(
        e.contains("the baseline's `ctx_size` = `512` is outside the range 2048..16384"),
        "{e}"
    );
    // A baseline between the grid's points that only it satisfies.
    let never = SEEDS
        .replace("constraints = [", "constraints = ['ctx_size == 3000', ")
        .replace("ctx_size = 4096", "ctx_size = 3000");
    let e = check(&never).unwrap_err().to_string();
    assert!(e.contains("no configuration satisfies the constraints"), "{e}");
    let listed = SEEDS.replace("cache_type_k = \"f16\"", "cache_type_k = \"q5_1\"");
    let e = check(&listed).unwrap_err().to_string();
    assert!(e.contains("the baseline's `cache_type_k` = `q5_1` is not among the values"), "{e}");
    let lone = SEEDS.replace("when cache_type_v", "when cache_type_v = \"f16\" and cache_type_v");
    let e = check(&lone).unwrap_err().to_string();
    assert!(e.contains("(to compare, write `==`, not `=`)"), "{e}");
    // Characters of several bytes, around an `=` or not: an error, never a
    // panic (the API's fuzzing found one).
    for text in ["\u{80}", "é = 1", "ctx_size =é", "ü==ü"] {
        let odd = SEEDS.replace("constraints = [", &format!("constraints = ['{text}', "));
        assert!(check(&odd).is_err(), "{text}");
    }
    let bare = SEEDS.replace("constraints = [", "constraints = ['flash_attn == on', ");
    let e = check(&bare).unwrap_err().to_string();
    assert!(e.contains("if it is a value, quote it: \"on\""), "{e}");
    let typo = SEEDS.replace("when cache_type_v", "when cache_typ_v");
    assert!(check(&typo).unwrap_err().to_string().contains("neither varies nor fixes"));
}

#[test]
fn bounds_decide_feasibility() {
    let study = check(SEEDS).unwrap();
    let m = |tps: f64, q: f64| -> BTreeMap<Metric, f64> {
        [(Metric::DecodeTps, tps), (Metric::PeakRssBytes, 1e9), (Metric::QualityScore, q)].into()
    };
    let base = m(10.0, 0.8);
    assert!(study.observe(Settings::new(), Some(&m(12.0, 0.795)), Some(&base)).feasible);
    let worse = study.observe(Settings::new(), Some(&m(12.0, 0.7)), Some(&base));
    assert!(!worse.feasible);
    assert_eq!(worse.values, Some(vec![12.0, 1e9]));
    assert!(!study.observe(Settings::new(), None, Some(&base)).feasible);

    // How far within each limit: memory by the share of its limit left,
    // the score by its difference from the baseline's less a point.
    let within = study.observe(Settings::new(), Some(&m(12.0, 0.795)), Some(&base));
    let slack = within.slack.unwrap();
    assert!((slack[0] - (1.0 - 1e9 / (120.0 * 1024f64.powi(3)))).abs() < 1e-12, "{slack:?}");
    assert!((slack[1] - 0.003).abs() < 1e-12, "{slack:?}");
    assert!(worse.slack.unwrap()[1] < 0.0);
    assert_eq!(study.observe(Settings::new(), None, Some(&base)).slack, None);
    // Without the baseline, a limit set relative to it has no slack.
    assert_eq!(study.observe(Settings::new(), Some(&m(12.0, 0.795)), None).slack, None);
}
