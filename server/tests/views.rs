//! The plots and tables the pages draw, from the data the server sends:
//! pure functions of `tunebook-views`, tested here so the crate, which
//! also builds for the browser, needs no test binary of its own.

use serde_json::json;

mod figures {
    use super::*;
    use tunebook_views::figures::*;
    use tunebook_views::types::ParetoView;

    #[test]
    fn pages_that_plot_load_plotly_early() {
        for path in ["/studies/3", "/trials/12?x=1"] {
            assert_eq!(plotly_for(path), Some(PLOTLY_PARTIAL), "{path}");
        }
        for path in ["/reports/1?v=2", "/share/abc"] {
            assert_eq!(plotly_for(path), Some(PLOTLY_WHOLE), "{path}");
        }
        for path in ["/", "/studies", "/studies/", "/studies/new", "/workers", "/compare?a=1"] {
            assert_eq!(plotly_for(path), None, "{path}");
        }
    }

    #[test]
    fn the_front_is_its_own_trace_in_order() {
        let p =
            |id, x, y, on_front| Point { trial_id: id, x, y, on_front, hover: format!("t{id}") };
        let fig = pareto_figure(
            &[p(1, 3.0, 1.0, true), p(2, 1.0, 0.5, true), p(3, 2.0, 2.0, false)],
            "decode tok/s",
            "peak RSS",
        );
        let front = &fig["data"][1];
        assert_eq!(front["name"], "Pareto front");
        assert_eq!(front["x"], json!([1.0, 3.0]), "sorted along x");
        assert_eq!(front["customdata"], json!([2, 1]));
        assert_eq!(fig["data"][0]["customdata"], json!([3]));
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "decode tok/s");
    }

    #[test]
    fn one_objective_is_drawn_trial_by_trial_with_the_best_so_far() {
        let point = |id, v| tunebook_views::types::ParetoPointView {
            trial_id: id,
            values: vec![v],
            on_front: false,
            differs: String::new(),
            config: vec![],
        };
        let view = ParetoView {
            metrics: vec!["ttft_ms".into()],
            goals: vec!["min".into()],
            points: vec![point(7, 30.0), point(3, 50.0), point(9, 40.0)],
            settings: vec![],
            machines: vec![],
            machine: None,
        };
        let (drawn, fig) = pareto_plot(&view, &|m| format!("label {m}"));
        assert_eq!(drawn, 3, "every trial is drawn, not none");
        assert_eq!(fig["data"][0]["customdata"], json!([3, 7, 9]), "in the order they ran");
        assert_eq!(fig["data"][1]["y"], json!([50.0, 30.0, 30.0]), "lower is better");
        assert_eq!(fig["layout"]["yaxis"]["title"]["text"], "label ttft_ms");
        assert_eq!(fig["layout"]["xaxis"]["dtick"], 1, "whole trials, not 1.5 of one");
    }

    #[test]
    fn depth_points_with_their_spread() {
        let stats = |m: f64| json!({ "n": 3, "median": m, "mean": m, "p10": m - 1.0, "p90": m + 2.0, "cv": 0.1 });
        let depth = json!([
            { "depth": 0, "decode_tps": stats(50.0), "prefill_tps": stats(900.0), "ttft_ms": stats(5.0), "skipped": null },
            { "depth": 4096, "decode_tps": stats(40.0), "prefill_tps": stats(700.0), "ttft_ms": stats(9.0), "skipped": null },
            { "depth": 65536, "decode_tps": null, "prefill_tps": null, "ttft_ms": null, "skipped": "does not fit" },
        ]);
        let fig = depth_figure(&depth).unwrap();
        assert_eq!(fig["data"][0]["x"], json!([0, 4096]), "the skipped depth is left out");
        assert_eq!(fig["data"][0]["y"], json!([50.0, 40.0]));
        assert_eq!(fig["data"][0]["error_y"]["array"], json!([2.0, 2.0]));
        assert_eq!(fig["data"][1]["yaxis"], "y2");
        assert!(depth_figure(&json!([])).is_none());
    }

    #[test]
    fn three_objectives_in_a_scene() {
        let pts = vec![
            (1, [1.0, 2.0, 3.0], true, "a".to_string()),
            (2, [0.0, 0.0, 0.0], false, "b".into()),
        ];
        let fig = pareto3_figure(&pts, ["x", "y", "z"]);
        assert_eq!(fig["data"][1]["type"], "scatter3d");
        assert_eq!(fig["data"][1]["z"], json!([3.0]));
        assert_eq!(fig["data"][0]["customdata"], json!([2]));
        assert_eq!(fig["layout"]["scene"]["zaxis"]["title"]["text"], "z");
    }

    #[test]
    fn values_in_order_the_default_first() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(value_order(&v(&["512", "", "64", "128"])), [1, 2, 3, 0]);
        // Cache types by precision, the finest first, not as text.
        assert_eq!(value_order(&v(&["q8_0", "f16", "q4_0"])), [1, 0, 2]);
        let types =
            v(&["iq4_nl", "q4_0", "bf16", "q5_1", "f32", "q8_0", "q5_0", "f16", "", "q4_1"]);
        let ordered: Vec<&str> = value_order(&types).iter().map(|&i| types[i].as_str()).collect();
        assert_eq!(
            ordered,
            ["", "f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "iq4_nl", "q4_0"]
        );
        // Words that are not all types stay in text order.
        assert_eq!(value_order(&v(&["on", "off", "auto"])), [2, 1, 0]);
    }

    #[test]
    fn an_effect_plot_has_a_box_per_value_with_its_trials() {
        let values = vec!["512".to_string(), "64".to_string()];
        let fig = effect_figure(&values, &[(1, 0, 10.0), (2, 1, 20.0), (3, 0, 12.0)], "ub", "tps");
        assert_eq!(fig["data"][0]["name"], "64");
        assert_eq!(fig["data"][0]["y"], json!([20.0]));
        assert_eq!(fig["data"][1]["customdata"], json!([1, 3]));
        assert_eq!(fig["data"][1]["boxpoints"], "all");
    }

    #[test]
    fn best_so_far_steps_with_the_goal() {
        let pts = [(1, 5.0), (2, 3.0), (3, 8.0), (4, 1.0)];
        assert_eq!(
            best_so_far_figure(&pts, true, "m")["data"][1]["y"],
            json!([5.0, 5.0, 8.0, 8.0])
        );
        assert_eq!(
            best_so_far_figure(&pts, false, "m")["data"][1]["y"],
            json!([5.0, 3.0, 3.0, 1.0])
        );
    }

    #[test]
    fn parallel_axes_number_or_word() {
        let settings = vec![
            ("threads".to_string(), vec!["4".to_string(), "2".to_string()]),
            ("ctk".to_string(), vec!["q8_0".to_string(), "f16".to_string()]),
        ];
        let fig = parallel_figure(&settings, &[vec![0, 0], vec![1, 1]], &[3.0, 4.0], "tps");
        let dims = &fig["data"][0]["dimensions"];
        assert_eq!(dims[0]["values"], json!([4.0, 2.0]));
        assert_eq!(dims[1]["ticktext"], json!(["f16", "q8_0"]));
        assert_eq!(dims[1]["values"], json!([1, 0]), "q8_0 sits on the second tick");
        assert_eq!(dims[2]["values"], json!([3.0, 4.0]));
    }
}

mod importance {
    use super::*;
    use tunebook_views::importance::*;
    use tunebook_views::types::ImportanceRow;
    use tunebook_views::types::ImportanceView;

    #[test]
    fn intervals_as_error_bars_the_open_at_zero_without_one() {
        let row = |s: &str, verdict: &str, i: Option<(f64, f64, f64)>| ImportanceRow {
            setting: s.into(),
            value: "2".into(),
            est: i.map(|x| x.0),
            lo: i.map(|x| x.1),
            hi: i.map(|x| x.2),
            verdict: verdict.into(),
        };
        let view = ImportanceView {
            metric: "decode_tps".into(),
            label: "decode tok/s".into(),
            unit: "%".into(),
            margin: Some(3.0),
            rows: vec![
                row("threads", "effect", Some((-20.0, -25.0, -14.0))),
                row("batch", "no_effect", Some((1.0, -1.0, 2.5))),
                row("ctx", "open", None),
            ],
        };
        let fig = figure(&view);
        assert_eq!(fig["data"][0]["y"], json!(["threads"]));
        assert_eq!(fig["data"][0]["error_x"]["array"], json!([6.0]));
        assert_eq!(fig["data"][0]["error_x"]["arrayminus"], json!([5.0]));
        assert_eq!(fig["data"][2]["x"], json!([0.0]));
        assert_eq!(fig["data"][2]["error_x"]["visible"], false);
        assert_eq!(fig["data"][2]["text"], json!(["not determined yet"]));
        assert_eq!(fig["layout"]["shapes"][0]["x1"], 3.0);
        assert_eq!(
            fig["layout"]["xaxis"]["title"]["text"],
            "decode tok/s against the baseline (%)"
        );
    }
}

mod spread {
    use super::*;
    use tunebook_views::spread::*;
    use tunebook_views::types::SampleView;

    fn sample(idx: i64, ttft: f64, tps: f64) -> SampleView {
        SampleView {
            idx,
            ttft_ms: ttft,
            total_ms: ttft + 100.0,
            client_decode_tps: None,
            prompt_n: 16,
            prompt_ms: 10.0,
            prompt_tps: 1600.0,
            predicted_n: 4,
            predicted_ms: 4000.0 / tps,
            predicted_tps: tps,
        }
    }

    #[test]
    fn percentiles_interpolate_between_requests() {
        let samples: Vec<SampleView> =
            (0..11).map(|i| sample(i, 10.0 * (i + 1) as f64, 50.0)).collect();
        let rows = rows(&samples);
        let ttft = &rows[0];
        assert_eq!((ttft.label, ttft.n), ("time to first token (ms)", 11));
        assert_eq!((ttft.min, ttft.p50, ttft.max), (10.0, 60.0, 110.0));
        assert!((ttft.p90 - 100.0).abs() < 1e-9 && (ttft.p99 - 109.0).abs() < 1e-9);
        assert!((rows[1].p50 - 20.0).abs() < 1e-9, "1000 ms over 50 tok/s: 20 ms a token");
        assert!(tunebook_views::spread::rows(&[]).is_empty() && figure(&[]).is_none());
    }

    #[test]
    fn every_request_is_drawn_in_order_with_the_median() {
        let fig = figure(&[sample(0, 10.0, 40.0), sample(1, 30.0, 60.0)]).unwrap();
        assert_eq!(fig["data"].as_array().unwrap().len(), 8, "a measure: its points, its median");
        assert_eq!(fig["data"][4]["y"], json!([40.0, 60.0]));
        assert_eq!(fig["data"][4]["x"], json!([1, 2]), "requests counted from 1");
        assert_eq!(fig["data"][4]["yaxis"], "y3");
        assert_eq!(fig["data"][5]["y"], json!([50.0, 50.0]), "the median");
        assert_eq!(fig["layout"]["yaxis3"]["title"]["text"], "decode tok/s");
    }
}

mod pair {
    use super::*;
    use tunebook_views::pair::*;

    #[test]
    fn each_cell_is_the_median_of_its_trials_in_value_order() {
        let a = vec!["8".to_string(), "2".to_string()];
        let b = vec!["q8_0".to_string(), "f16".to_string()];
        let points = [(0, 0, 10.0), (0, 0, 30.0), (0, 0, 20.0), (1, 1, 5.0)];
        let fig = figure(("threads", &a), ("cache_type_k", &b), &points, "decode");
        let trace = &fig["data"][0];
        assert_eq!(trace["x"], json!(["2", "8"]), "numbers in order");
        assert_eq!(trace["y"], json!(["f16", "q8_0"]));
        assert_eq!(trace["marker"]["color"], json!([5.0, 20.0]));
        assert_eq!(trace["text"], json!(["1 trial", "3 trials"]));
        assert_eq!(fig["layout"]["xaxis"]["categoryarray"], json!(["2", "8"]));
        assert_eq!(fig["layout"]["yaxis"]["categoryarray"], json!(["f16", "q8_0"]));
    }
}
