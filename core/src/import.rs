//! Reading trials from files: a Tunebook export (JSONL or CSV) or
//! llama-bench's output (`-o json`, `jsonl` or `csv`). Files from anyone:
//! whatever one holds, reading it ends in trials or an error that says
//! where, never a panic.

use std::collections::BTreeMap;
use std::path::Path;

use tunebook_views::types::{Metric, TrialState, TrialView};

/// One exported trial: the stored view, every sample and the full measurement.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub trial: TrialView,
    #[serde(default)]
    pub samples: Vec<tunebook_views::types::SampleView>,
    #[serde(default)]
    pub measurement: Option<serde_json::Value>,
}

/// Parses an import without touching the database; every measurement is
/// one a trial could have (the worker API's rule), or nothing is taken.
pub fn parse_import(text: &str, is_csv: bool, profile: &str) -> Result<Vec<TrialView>, String> {
    let trials = parse_any(text, is_csv, profile)?;
    for (i, t) in trials.iter().enumerate() {
        if let Some(why) = implausible(t) {
            return Err(format!("record {}: {why}", i + 1));
        }
    }
    Ok(trials)
}

/// Measures besides the metrics that are counts, speeds or times: never
/// negative.
const OTHER_AT_LEAST_ZERO: &[&str] = &[
    "client_decode_tps",
    "prompt_tokens",
    "tokens_requested",
    "tokens_generated",
    "n_ctx",
    "ceiling_tps",
];

/// Whether the measure `name` is never negative: every metric but the
/// drop in available memory (memory can come back) and the shares.
fn at_least_zero(name: &str) -> bool {
    OTHER_AT_LEAST_ZERO.contains(&name)
        || Metric::parse(name).is_some_and(|m| m != Metric::MemAvailableDropBytes && !m.is_rate())
}

/// Whether the measure `name` is a share, between 0 and 1.
fn share(name: &str) -> bool {
    Metric::parse(name).is_some_and(Metric::is_rate)
}

/// Why `t` holds a value no trial could have measured, if it does.
fn implausible(t: &TrialView) -> Option<String> {
    let v = serde_json::to_value(t).ok()?;
    for (name, value) in v.as_object()? {
        let Some(x) = value.as_f64() else { continue };
        let bad = (at_least_zero(name) && !(x.is_finite() && x >= 0.0))
            || (share(name) && !(0.0..=1.0).contains(&x));
        if bad {
            return Some(format!("`{name}` = {x} is not a measurement"));
        }
    }
    None
}

fn parse_any(text: &str, is_csv: bool, profile: &str) -> Result<Vec<TrialView>, String> {
    if is_csv {
        return parse_csv(text, profile);
    }
    let objects: Vec<(usize, serde_json::Value)> = if text.trim_start().starts_with('[') {
        let all: Vec<serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON array: {e}"))?;
        all.into_iter().enumerate().map(|(i, v)| (i + 1, v)).collect()
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map(|v| (i + 1, v))
                    .map_err(|e| format!("line {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?
    };
    if objects.is_empty() {
        return Err("no records".into());
    }
    if objects.iter().all(|(_, v)| v.get("avg_ts").is_some()) {
        return llama_bench(&objects, profile);
    }
    objects
        .into_iter()
        .map(|(n, v)| {
            let mut record: Record =
                serde_json::from_value(v).map_err(|e| format!("record {n}: {e}"))?;
            // Imported trials stand alone: their study and role stay in the note.
            if let Some(s) = record.trial.study_id.take() {
                record.trial.note =
                    Some(format!("imported from study {s} trial {}", record.trial.id));
            }
            Ok(record.trial)
        })
        .collect()
}

fn parse_csv(text: &str, profile: &str) -> Result<Vec<TrialView>, String> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| format!("CSV header: {e}"))?.clone();
    if header.iter().any(|h| h == "avg_ts") {
        return llama_bench(&bench_rows(reader, &header)?, profile);
    }
    for c in ["state", "profile", "model"] {
        if !header.iter().any(|h| h == c) {
            return Err(format!("CSV header has no `{c}` column"));
        }
    }
    reader
        .records()
        .enumerate()
        .map(|(i, row)| {
            let row = row.map_err(|e| format!("CSV row {}: {e}", i + 1))?;
            let mut object = serde_json::Map::new();
            let mut settings = BTreeMap::new();
            for (name, value) in header.iter().zip(row.iter()) {
                // What the export guarded from spreadsheets, as it was.
                let value = crate::trials_csv::unguarded(value);
                if let Some(s) = name.strip_prefix("setting.") {
                    if !value.is_empty() {
                        settings.insert(s.to_string(), value.to_string());
                    }
                } else if !value.is_empty() {
                    let parsed = match name {
                        "role" | "state" | "profile" | "model" | "failure_kind" | "error" => {
                            serde_json::Value::String(value.into())
                        }
                        _ => serde_json::from_str(value).map_err(|_| {
                            format!("CSV row {}: `{name}` = `{value}` is not a number", i + 1)
                        })?,
                    };
                    object.insert(name.to_string(), parsed);
                }
            }
            object.insert("settings".into(), serde_json::to_value(&settings).expect("map"));
            object.entry("id").or_insert(0.into());
            object.entry("created_ms").or_insert(0.into());
            let study = object.remove("study_id");
            let mut t: TrialView = serde_json::from_value(serde_json::Value::Object(object))
                .map_err(|e| format!("CSV row {}: {e}", i + 1))?;
            if let Some(s) = study {
                t.note = Some(format!("imported from study {s} trial {}", t.id));
            }
            Ok(t)
        })
        .collect()
}

/// llama-bench's CSV rows as the records its JSON has: whole numbers and
/// numbers where a value reads as one, text otherwise.
fn bench_rows(
    mut reader: csv::Reader<&[u8]>,
    header: &csv::StringRecord,
) -> Result<Vec<(usize, serde_json::Value)>, String> {
    reader
        .records()
        .enumerate()
        .map(|(i, row)| {
            let row = row.map_err(|e| format!("CSV row {}: {e}", i + 1))?;
            let object = header
                .iter()
                .zip(row.iter())
                .map(|(name, value)| {
                    let whole = value.parse::<i64>().ok();
                    let number = value.parse::<f64>().ok().filter(|x| x.is_finite());
                    let value = match (whole, number) {
                        _ if name == "build_commit" => serde_json::Value::String(value.into()),
                        (Some(x), _) => serde_json::json!(x),
                        (None, Some(x)) => serde_json::json!(x),
                        _ => serde_json::Value::String(value.into()),
                    };
                    (name.to_string(), value)
                })
                .collect();
            Ok((i + 1, serde_json::Value::Object(object)))
        })
        .collect()
}

/// llama-bench records: one per test (`pp` with n_gen 0, `tg` with
/// n_prompt 0, either at a context depth `n_depth`); the tests of one
/// configuration become one trial. Its prefill and decode are the tests at
/// depth 0; each test's mean ± standard deviation, depths included, goes
/// in the trial's note.
fn llama_bench(
    objects: &[(usize, serde_json::Value)],
    profile: &str,
) -> Result<Vec<TrialView>, String> {
    let mut trials: BTreeMap<String, (TrialView, Vec<String>)> = BTreeMap::new();
    for (n, v) in objects {
        let field = |k: &str| v.get(k).ok_or_else(|| format!("record {n}: no `{k}`"));
        let number = |k: &str| {
            field(k).and_then(|x| {
                x.as_f64().ok_or_else(|| format!("record {n}: `{k}` is not a number"))
            })
        };
        let count = |k: &str| number(k).map(|x| x.max(0.0) as i64);
        let (n_prompt, n_gen) = (count("n_prompt")?, count("n_gen")?);
        let depth = v.get("n_depth").map_or(Ok(0), |_| count("n_depth"))?;
        let tps = number("avg_ts")?;
        let spread = v.get("stddev_ts").and_then(|x| x.as_f64());
        let settings = bench_settings(v);
        let model = v.get("model_filename").and_then(|m| m.as_str()).unwrap_or("unknown");
        let model = Path::new(model)
            .file_stem()
            .map_or(model.to_string(), |s| s.to_string_lossy().into_owned());
        let key = format!("{model} {}", serde_json::to_string(&settings).expect("map"));
        let build = v.get("build_commit").and_then(|b| b.as_str()).unwrap_or("?");
        let (t, notes) = trials.entry(key).or_insert_with(|| {
            let t = TrialView {
                created_ms: crate::db::now_ms(),
                ..TrialView::new(profile, &model, settings, TrialState::Done)
            };
            (t, vec![format!("imported from llama-bench (build {build})")])
        });
        let test = match (n_prompt, n_gen) {
            (p, 0) if p > 0 => {
                if depth == 0 {
                    t.metrics.set(Metric::PrefillTps, Some(tps));
                    t.prompt_tokens = Some(n_prompt);
                }
                format!("pp{p}")
            }
            (0, g) if g > 0 => {
                if depth == 0 {
                    t.metrics.set(Metric::DecodeTps, Some(tps));
                    t.tokens_generated = Some(n_gen);
                }
                format!("tg{g}")
            }
            (p, g) => format!("pp{p}+tg{g}"),
        };
        let at = if depth > 0 { format!(" @ depth {depth}") } else { String::new() };
        let spread = spread.map_or(String::new(), |s| format!(" ± {s:.2}"));
        notes.push(format!("{test}{at}: {tps:.2}{spread} tok/s"));
    }
    Ok(trials
        .into_values()
        .map(|(mut t, notes)| {
            t.note = Some(notes.join("; "));
            t
        })
        .collect())
}

/// A llama-bench record's settings by Tunebook's names; what llama-bench
/// reports as "the engine's choice" (`-1` layers, `auto` flash attention,
/// no overrides) is left unset, as a trial that did not set it.
fn bench_settings(v: &serde_json::Value) -> BTreeMap<String, String> {
    let text = |x: &serde_json::Value| x.as_str().map_or_else(|| x.to_string(), str::to_string);
    let mut settings = BTreeMap::new();
    for (from, to) in [
        ("n_batch", "batch_size"),
        ("n_ubatch", "ubatch_size"),
        ("n_threads", "threads"),
        ("type_k", "cache_type_k"),
        ("type_v", "cache_type_v"),
    ] {
        if let Some(x) = v.get(from).filter(|x| !x.is_null()) {
            settings.insert(to.to_string(), text(x));
        }
    }
    // Counts set only where not the engine's choice or nothing at all.
    for (from, to, unset) in [
        ("n_gpu_layers", "n_gpu_layers", -1.0),
        ("n_cpu_moe", "n_cpu_moe", 0.0),
        ("main_gpu", "main_gpu", 0.0),
    ] {
        if let Some(x) = v.get(from).and_then(|x| x.as_f64()).filter(|x| *x > unset) {
            settings.insert(to.to_string(), format!("{x}"));
        }
    }
    if let Some(mode) = v.get("split_mode").and_then(|m| m.as_str()).filter(|m| *m != "layer") {
        settings.insert("split_mode".into(), mode.into());
    }
    if let Some(split) = v.get("tensor_split").and_then(|m| m.as_str()) {
        let shares: Vec<f64> = split.split(['/', ',']).filter_map(|x| x.parse().ok()).collect();
        if shares.iter().any(|x| *x > 0.0) {
            settings.insert("tensor_split".into(), split.replace('/', ","));
        }
    }
    if let Some(o) =
        v.get("tensor_buft_overrides").and_then(|m| m.as_str()).filter(|o| *o != "none")
    {
        settings.insert("override_tensor".into(), o.replace(';', ","));
    }
    // -1 (auto), 0 (off), 1 (on); older builds write a boolean.
    match v.get("flash_attn").map(|fa| (fa.as_i64(), fa.as_bool())) {
        Some((Some(1), _) | (_, Some(true))) => settings.insert("flash_attn".into(), "on".into()),
        Some((Some(0), _) | (_, Some(false))) => settings.insert("flash_attn".into(), "off".into()),
        _ => None,
    };
    if v.get("use_mmap").and_then(|m| m.as_bool()) == Some(false) {
        settings.insert("no_mmap".into(), "true".into());
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::Strategy;

    #[test]
    fn malformed_imports_say_where() {
        let e = parse_import("{\"avg_ts\": 1}\nnot json\n", false, "p").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse_import("[{\"avg_ts\": 3.5, \"n_gen\": 8}]", false, "p").unwrap_err();
        assert_eq!(e, "record 1: no `n_prompt`");
        let e = parse_import("id,profile\n1,p\n", true, "p").unwrap_err();
        assert!(e.contains("no `state` column"), "{e}");
        assert_eq!(parse_import("\n", false, "p").unwrap_err(), "no records");
        // What the worker API refuses, an import refuses too.
        let csv = "state,profile,model,decode_tps\ndone,p,m,40\ndone,p,m,-5\n";
        let e = parse_import(csv, true, "p").unwrap_err();
        assert_eq!(e, "record 2: `decode_tps` = -5 is not a measurement");
        let e = parse_import("state,profile,model,quality_score\ndone,p,m,1.5\n", true, "p");
        assert!(e.unwrap_err().contains("`quality_score` = 1.5"));
    }

    #[test]
    fn a_csv_export_reads_back_as_it_was() {
        let mut t = TrialView::new(
            "p",
            "m",
            [("note".into(), "=1+1".into()), ("n_gpu_layers".into(), "-1".into())].into(),
            tunebook_views::types::TrialState::Failed,
        );
        t.error = Some("@SUM(A1)".into());
        let text = crate::trials_csv::to_string(std::slice::from_ref(&t));
        let back = parse_import(&text, true, "p").unwrap();
        assert_eq!(back[0].settings, t.settings);
        assert_eq!(back[0].error, t.error);
    }

    #[test]
    fn llama_bench_placement_columns_become_settings() {
        let record = serde_json::json!({
            "model_filename": "/m/big-moe.gguf", "n_threads": 8, "type_k": "q8_0",
            "type_v": "q8_0", "n_gpu_layers": 99, "n_cpu_moe": 4, "split_mode": "row",
            "main_gpu": 1, "tensor_split": "3.00/1.00", "flash_attn": 1,
            "tensor_buft_overrides": "blk\\.1\\.ffn=CPU", "n_prompt": 0, "n_gen": 64,
            "n_depth": 0, "avg_ts": 31.5, "stddev_ts": 0.25,
        });
        let trials = parse_import(&record.to_string(), false, "p").unwrap();
        let s = &trials[0].settings;
        for (k, v) in [
            ("n_gpu_layers", "99"),
            ("n_cpu_moe", "4"),
            ("split_mode", "row"),
            ("main_gpu", "1"),
            ("tensor_split", "3.00,1.00"),
            ("flash_attn", "on"),
            ("override_tensor", "blk\\.1\\.ffn=CPU"),
        ] {
            assert_eq!(s.get(k).map(String::as_str), Some(v), "{k} in {s:?}");
        }
        assert_eq!(trials[0].model, "big-moe");
        assert_eq!(trials[0].value(Metric::DecodeTps), Some(31.5));
        assert!(trials[0].note.as_deref().unwrap().ends_with("tg64: 31.50 ± 0.25 tok/s"));
        // Every setting read is one the llama-server catalog accepts.
        engine_bridge::catalog::Catalog::llama_server().render(s).unwrap();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// Imports are files from anyone: whatever they hold, reading one
        /// ends in trials or an error, never a panic.
        #[test]
        fn imports_never_panic(
            text in proptest::prop_oneof![
                ".{0,300}",
                proptest::collection::vec(proptest::sample::select(IMPORT_PIECES), 0..80)
                    .prop_map(|p| p.concat()),
            ],
            is_csv in proptest::bool::ANY,
        ) {
            let _ = parse_import(&text, is_csv, "p");
        }
    }

    /// Pieces of real exports and llama-bench output.
    const IMPORT_PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\n",
        "avg_ts",
        "n_gen",
        "n_prompt",
        "model_type",
        "\"settings\"",
        "\"state\"",
        "\"done\"",
        "1e309",
        "-1",
        "null",
        "id,state,settings\n",
        "\"{\"\"threads\"\": 2}\"",
        "samples",
        "type_k",
        "q8_0",
        "\u{0}",
    ];
}
