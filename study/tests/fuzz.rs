//! Generated and mutated input thrown at what reads untrusted text: the
//! constraint and bound parsers and the study check. Nothing may panic,
//! overflow the stack or take long; every refusal is an error value.

use std::time::{Duration, Instant};

use engine_bridge::Catalog;
use proptest::prelude::*;
use tunebook_study::StudyDef;
use tunebook_study::expr::{BoundExpr, Constraint};

/// Pieces constraints are made of, so mutations stay close to real ones.
const PIECES: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "not ",
    "!",
    "-",
    " and ",
    " or ",
    " when ",
    " in ",
    "==",
    "!=",
    "<=",
    ">",
    "*",
    "/",
    "+",
    ",",
    "\"",
    "'",
    "ctx_size",
    "threads",
    "cache_type_k",
    "1",
    "1e308",
    "0.5",
    "true",
    "baseline",
    "%",
    " GiB",
    "\u{0}",
    "\n",
    "é",
];

fn expression() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,200}",
        prop::collection::vec(prop::sample::select(PIECES), 0..400).prop_map(|p| p.concat()),
        (1usize..3000).prop_map(|n| format!("{}1{}", "(".repeat(n), ")".repeat(n))),
        (1usize..3000).prop_map(|n| format!("{}true", "not ".repeat(n))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic(text in expression()) {
        let started = Instant::now();
        if let Ok(c) = Constraint::parse(&text) {
            let config = [("threads".to_string(), "2".to_string())].into();
            let _ = c.holds(&config);
        }
        let _ = BoundExpr::parse(&text).map(|b| b.value(Some(1.0)));
        prop_assert!(started.elapsed() < Duration::from_secs(5), "{} bytes took {:?}", text.len(), started.elapsed());
    }
}

const STUDY: &str = r#"{"name":"n","profile":"demo","model":"m",
  "space":{"threads":{"min":1,"max":8},"cache_type_k":["f16","q8_0"],"ctx_size":{"min":512,"max":65536,"log":true}},
  "constraints":["threads <= 4 when cache_type_k == \"q8_0\""],
  "objectives":[{"metric":"decode_tps"},{"metric":"peak_rss_bytes","max":"120 GiB"}],
  "probes":{"speed":{"repeats":3}}}"#;

/// A valid study with one value somewhere replaced by a generated one.
fn mutated_study() -> impl Strategy<Value = String> {
    let values = prop_oneof![
        Just("1e300".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("18446744073709551615".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("null".to_string()),
        (0i64..i64::MAX).prop_map(|n| n.to_string()),
        "\"[ -~]{0,40}\"",
        (1usize..200).prop_map(|n| format!("{}0{}", "[".repeat(n), "]".repeat(n))),
    ];
    (0..STUDY.len(), values).prop_map(|(at, value)| {
        // Replace the first value (a number, or a string that is not a
        // key) that starts at or after `at`.
        let bytes = STUDY.as_bytes();
        let mut i = at;
        while i < STUDY.len() {
            let end = if bytes[i] == b'"' {
                STUDY[i + 1..].find('"').map_or(STUDY.len(), |e| i + e + 2)
            } else if bytes[i].is_ascii_digit() {
                (i..STUDY.len()).find(|&j| !bytes[j].is_ascii_digit()).unwrap_or(STUDY.len())
            } else {
                i += 1;
                continue;
            };
            if STUDY[end..].trim_start().starts_with(':') {
                i = end;
                continue;
            }
            return format!("{}{}{}", &STUDY[..i], value, &STUDY[end..]);
        }
        STUDY.to_string()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn the_study_check_never_panics_nor_takes_long(text in mutated_study()) {
        let started = Instant::now();
        if let Ok(def) = StudyDef::from_text(&text) {
            let _ = def.check(&Catalog::llama_server(), &["m".to_string()]);
        }
        prop_assert!(started.elapsed() < Duration::from_secs(5), "took {:?}: {text}", started.elapsed());
    }
}

/// A measurement, not a check: how many mutated studies get past reading
/// to the check itself (`cargo test -p tunebook-study --test fuzz --
/// --ignored --nocapture`).
#[test]
#[ignore]
fn how_many_mutations_reach_the_check() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::default();
    let (mut read, mut checked, mut refused) = (0, 0, 0);
    for _ in 0..1500 {
        let text = mutated_study().new_tree(&mut runner).unwrap().current();
        if let Ok(def) = StudyDef::from_text(&text) {
            read += 1;
            match def.check(&Catalog::llama_server(), &["m".to_string()]) {
                Ok(_) => checked += 1,
                Err(_) => refused += 1,
            }
        }
    }
    eprintln!("1500 mutations: {read} read, {checked} accepted, {refused} refused");
}
