//! One trial: its exact command line and environment, the settings the
//! engine read back, every sample, the log tail and the failure's cause.

use leptos::prelude::*;

#[cfg(feature = "ssr")]
use super::{answer, ops, service};
use super::{error_text, fmt, fmt_metric};
use crate::types::{Metric, TrialDetail, TrialState};

#[server]
pub async fn get_trial(id: i64) -> Result<TrialDetail, ServerFnError> {
    answer(ops::trials::detail(&*service()?, id).await)
}

/// The state the live feed last said the page's trial is in.
#[derive(Clone, Copy)]
struct LiveState(RwSignal<Option<TrialState>>);

#[component]
pub fn TrialPage() -> impl IntoView {
    let id = super::id_param();
    let detail = Resource::new(id, get_trial);
    let hydrated = RwSignal::new(false);
    // The state each update carries, shown at once: a refetch of the whole
    // detail may take longer than a phase lasts on a busy machine (and the
    // next update's refetch supersedes it).
    let live = RwSignal::new(None::<TrialState>);
    provide_context(LiveState(live));
    let log = LogFollow::start(id);
    Effect::new(move |_| {
        hydrated.set(true);
        let me = id();
        // A trial still running: show each phase as it comes.
        crate::live::subscribe(crate::live::Handlers {
            trial: Box::new(move |t| {
                if t.id == me {
                    live.set(Some(t.state));
                    detail.refetch();
                }
            }),
            study: Box::new(|_| {}),
            reset: Box::new(move || {
                live.set(None);
                detail.refetch();
            }),
        });
    });
    view! {
        <main class="trial" data-hydrated=move || hydrated.get().to_string()>
            <Transition fallback=|| view! { <p class="muted">"Loading the trial…"</p> }>
                {move || Suspend::new(async move {
                    match detail.await {
                        Ok(d) => view! { <TrialBody d log /> }.into_any(),
                        Err(e) => view! { <p class="error">{error_text(&e)}</p> }.into_any(),
                    }
                })}
            </Transition>
        </main>
    }
}

/// An argument as a shell would need it quoted, for copying.
fn quoted(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain { arg.to_string() } else { format!("'{}'", arg.replace('\'', r"'\''")) }
}

#[component]
fn TrialBody(d: TrialDetail, log: LogFollow) -> impl IntoView {
    let t = d.trial.clone();
    let command = d.argv.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(" ");
    let env = d.env.iter().map(|(k, v)| format!("{k}={}", quoted(v))).collect::<Vec<_>>().join(" ");
    let baseline = d.baseline.clone().unwrap_or_default();
    let failed = matches!(t.state, TrialState::Failed | TrialState::Pruned);
    // The latest update's state where one came since this detail was read.
    let (read, live) = (t.state, use_context::<LiveState>().map(|l| l.0));
    let state = move || live.and_then(|l| l.get()).unwrap_or(read);
    // Each metric as people read it, in the order of the metric list, with
    // the client's decode speed beside the engine's and the context the
    // engine allocated at the end.
    let shown = |m: Metric| {
        let v = t.value(m);
        match m {
            Metric::LoadMs => ("load time (s)", fmt(v.map(|ms| ms / 1e3), 2)),
            Metric::DecodeTps | Metric::GoodputRps => (m.short_label(), fmt(v, 2)),
            Metric::PctOfCeiling => (m.short_label(), fmt(v, 0)),
            Metric::Perplexity => (m.short_label(), fmt(v, 3)),
            _ => (m.short_label(), fmt_metric(m.name(), v)),
        }
    };
    let mut metrics: Vec<(&str, String)> = Metric::ALL.into_iter().map(shown).collect();
    metrics.insert(1, ("client decode tok/s", fmt(t.client_decode_tps, 2)));
    metrics
        .push(("context the engine allocated", t.n_ctx.map(|n| n.to_string()).unwrap_or_default()));
    view! {
        <header class="study-head">
            <h1>{format!("Trial {}", t.id)}</h1>
            <span id="trial-state" class=move || format!("state state-{}", state().as_str())>{move || state().as_str()}</span>
            <span class="muted">{format!(" {} · {}", t.profile, t.model)}</span>
            {t.study_id.map(|s| view! { " · " <a id="study-link" href=format!("/studies/{s}")>{format!("study {s}")}</a> })}
        </header>
        <Show when=move || failed>
            <section class="panel failure" id="failure">
                <h2>{format!("Why it {}", if t.state == TrialState::Pruned { "was skipped" } else { "failed" })}</h2>
                <p><strong>{d.trial.failure_kind.clone().unwrap_or_default()}</strong></p>
                <pre class="engine-error">{d.trial.error.clone().unwrap_or_default()}</pre>
            </section>
        </Show>
        <div class="study-grid">
            <section class="panel">
                <h2>"Settings"</h2>
                // The body is written out: a browser adds one to a table
                // without, and hydration would then find a node it did not
                // render.
                <table class="kv" id="trial-settings"><tbody>
                    {d.trial.settings.iter().map(|(k, v)| {
                        let differs = d.baseline.is_some() && baseline.get(k) != Some(v);
                        view! { <tr class:differs=differs><th>{k.clone()}</th><td>{v.clone()}</td><td class="muted">{if differs { format!("baseline: {}", baseline.get(k).cloned().unwrap_or_else(|| "engine default".into())) } else { String::new() }}</td></tr> }
                    }).collect_view()}
                </tbody></table>
                <p class="muted">{d.trial.note.clone().unwrap_or_default()}</p>
            </section>
            <section class="panel">
                <h2>"Measured"</h2>
                <dl class="facts" id="trial-metrics">
                    {metrics.into_iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
                </dl>
            </section>
        </div>
        <section class="panel">
            <h2>"Command line"</h2>
            <pre id="command">{if command.is_empty() { "(not launched)".to_string() } else { command }}</pre>
            <h3>"Environment it set"</h3>
            <pre id="env">{if env.is_empty() { "(none)".to_string() } else { env }}</pre>
            <h3>"What the engine read back"</h3>
            <pre id="read-back">{d.read_back.clone().unwrap_or_else(|| "(nothing reported)".into())}</pre>
        </section>
        <section class="panel">
            <h2>"Samples"</h2>
            <SpeedSpread samples=d.samples.clone() />
            <Show when={let n = d.samples.len(); move || n > 0} fallback=|| view! { <p class="muted">"No samples recorded."</p> }>
                <table class="trials" id="samples">
                    <thead><tr>
                        <th class="num">"#"</th><th class="num">"TTFT ms"</th><th class="num">"total ms"</th>
                        <th class="num">"prompt tokens"</th><th class="num">"prefill tok/s"</th>
                        <th class="num">"generated"</th><th class="num">"decode tok/s"</th><th class="num">"client decode tok/s"</th>
                    </tr></thead>
                    <tbody>
                        {d.samples.iter().map(|s| view! {
                            <tr>
                                <td class="num">{s.idx}</td><td class="num">{fmt(Some(s.ttft_ms), 1)}</td><td class="num">{fmt(Some(s.total_ms), 1)}</td>
                                <td class="num">{s.prompt_n}</td><td class="num">{fmt(Some(s.prompt_tps), 1)}</td>
                                <td class="num">{s.predicted_n}</td><td class="num">{fmt(Some(s.predicted_tps), 2)}</td><td class="num">{fmt(s.client_decode_tps, 2)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </Show>
        </section>
        <super::answers::Answers measurement=d.measurement.clone() />
        <DepthPlot measurement=d.measurement.clone() />
        <LoadTable measurement=d.measurement.clone() />
        <section class="panel">
            <h2>"Engine log"</h2>
            <EngineLog log failure_tail=d.log_tail.clone() />
            <details>
                <summary>"The full measurement (JSON)"</summary>
                <pre>{d.measurement.clone().unwrap_or_default()}</pre>
            </details>
        </section>
    }
}

/// How the trial's requests spread: each measure's percentiles, and every
/// request drawn in the order it ran.
#[component]
fn SpeedSpread(samples: Vec<crate::types::SampleView>) -> impl IntoView {
    let rows = tunebook_views::spread::rows(&samples);
    let figure = tunebook_views::spread::figure(&samples);
    #[cfg(feature = "hydrate")]
    if let Some(figure) = figure.clone() {
        Effect::new(move |_| crate::plot::draw("samples-plot", &figure, None));
    }
    let shown = figure.is_some();
    let n = rows.first().map_or(0, |r| r.n);
    view! {
        <Show when=move || shown>
            <p class="muted">{format!("Over the trial's {n} measured requests; the trial's value is their median.")}</p>
            <table class="trials" id="speed-spread">
                <thead><tr>
                    <th></th><th class="num">"requests"</th><th class="num">"min"</th><th class="num">"p50"</th>
                    <th class="num">"p90"</th><th class="num">"p99"</th><th class="num">"max"</th>
                </tr></thead>
                <tbody>
                    {rows.iter().map(|r| {
                        let d = if r.key.ends_with("_ms") { 1 } else { 2 };
                        view! {
                            <tr data-measure=r.key>
                                <th>{r.label}</th><td class="num">{r.n}</td>
                                <td class="num">{fmt(Some(r.min), d)}</td><td class="num">{fmt(Some(r.p50), d)}</td>
                                <td class="num">{fmt(Some(r.p90), d)}</td><td class="num">{fmt(Some(r.p99), d)}</td>
                                <td class="num">{fmt(Some(r.max), d)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <div id="samples-plot" class="plot plot-short"></div>
        </Show>
    }
}

/// Speed against context depth, where the trial measured it.
#[component]
fn DepthPlot(measurement: Option<String>) -> impl IntoView {
    let figure = measurement
        .and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok())
        .and_then(|m| crate::plot::depth_figure(&m["depth"]));
    let shown = figure.is_some();
    #[cfg(feature = "hydrate")]
    if let Some(figure) = figure {
        Effect::new(move |_| crate::plot::draw("depth-plot", &figure, None));
    }
    view! {
        <Show when=move || shown>
            <section class="panel">
                <h2>"Speed against context depth"</h2>
                <div id="depth-plot" class="plot"></div>
            </section>
        </Show>
    }
}

/// One rate of the load probe as the page shows it.
#[derive(Debug, Clone, PartialEq)]
struct LoadRow {
    rate: String,
    answered: String,
    served: String,
    ttft_p99: String,
    gap_p99: String,
    verdict: &'static str,
    binding: String,
}

/// The load probe's rates from a trial's measurement (JSON), in the order
/// run, and its goodput line; `None` where it did not run.
fn load_rows(measurement: &serde_json::Value) -> Option<(String, Vec<LoadRow>)> {
    let load = measurement.get("load").filter(|l| !l.is_null())?;
    let num = |v: &serde_json::Value, digits: usize| fmt(v.as_f64(), digits);
    let p99 = |v: &serde_json::Value| match v["p99"].as_f64() {
        Some(x) => format!("{x:.0}"),
        None => "—".into(),
    };
    let rows = load["steps"]
        .as_array()?
        .iter()
        .map(|s| LoadRow {
            rate: num(&s["rate"], 2),
            answered: format!("{} of {}", s["completed"], s["sent"]),
            served: num(&s["throughput_rps"], 2),
            ttft_p99: p99(&s["ttft_ms"]),
            gap_p99: p99(&s["itl_ms"]),
            verdict: if s["meets_slo"] == serde_json::Value::Bool(true) {
                "holds"
            } else {
                "misses"
            },
            binding: s["binding"].as_str().unwrap_or_default().to_string(),
        })
        .collect();
    let best = match load["best_rate"].as_f64() {
        Some(r) => format!(" at {r:.2} arriving a second"),
        None => ", at no rate tried".into(),
    };
    let head = format!(
        "{} workload: {} requests a second within the objective{best}.",
        load["workload"].as_str().unwrap_or_default(),
        num(&load["goodput_rps"], 2),
    );
    Some((head, rows))
}

/// Serving capacity, where the trial ran the load probe: each rate, the
/// latencies against the objective, and what bound it.
#[component]
fn LoadTable(measurement: Option<String>) -> impl IntoView {
    let found = measurement
        .and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok())
        .and_then(|m| load_rows(&m));
    found.map(|(head, rows)| {
        view! {
            <section class="panel">
                <h2>"Serving load"</h2>
                <p id="load-goodput">{head}</p>
                <table class="trials" id="load-steps">
                    <thead><tr>
                        <th class="num">"arrivals/s"</th><th class="num">"answered"</th><th class="num">"served/s"</th>
                        <th class="num">"p99 TTFT ms"</th><th class="num">"p99 gap ms"</th><th>"objective"</th><th>"what binds"</th>
                    </tr></thead>
                    <tbody>
                        {rows.into_iter().map(|r| view! {
                            <tr>
                                <td class="num">{r.rate}</td><td class="num">{r.answered}</td><td class="num">{r.served}</td>
                                <td class="num">{r.ttft_p99}</td><td class="num">{r.gap_p99}</td><td>{r.verdict}</td><td>{r.binding}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        }
    })
}

/// The most lines the page keeps of a log it follows.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
const LOG_LINES: usize = 400;

/// The engine's output as the page follows it: its last lines, then, while
/// the trial runs, each line as the engine writes it (pushed by the
/// server). Kept by the page, not by the trial's details, which are read
/// again at every phase: the lines stay and one stream serves the page.
#[derive(Clone, Copy)]
struct LogFollow {
    lines: RwSignal<Vec<String>>,
    /// The stream has answered: its lines replace a failure's stored tail.
    following: RwSignal<bool>,
    /// The trial has ended: nothing more will come.
    ended: RwSignal<bool>,
}

impl LogFollow {
    /// Follows trial `id()`'s log from the browser, anew when the page
    /// moves to another trial.
    #[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
    fn start(id: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        let log = Self {
            lines: RwSignal::new(Vec::new()),
            following: RwSignal::new(false),
            ended: RwSignal::new(false),
        };
        #[cfg(feature = "hydrate")]
        Effect::new(move |_| {
            let me = id();
            log.lines.set(Vec::new());
            log.following.set(false);
            log.ended.set(false);
            crate::live::follow_log(
                me,
                // A reconnection sends the last lines again: they replace
                // what is shown rather than repeat it.
                move || log.lines.set(Vec::new()),
                move |batch| {
                    log.following.set(true);
                    log.lines.update(|l| {
                        l.extend(batch.lines().map(str::to_string));
                        let excess = l.len().saturating_sub(LOG_LINES);
                        l.drain(..excess);
                    })
                },
                move || log.ended.set(true),
            )
        });
        log
    }
}

/// The log the page follows; a failure's stored tail until the stream
/// answers, and for good where the log file is gone.
#[component]
fn EngineLog(log: LogFollow, failure_tail: Vec<String>) -> impl IntoView {
    let LogFollow { lines, following, ended } = log;
    let text = move || {
        let shown = |l: &[String]| {
            if l.is_empty() {
                "(the engine wrote nothing that was kept)".to_string()
            } else {
                l.join("\n")
            }
        };
        if following.get() { lines.with(|l| shown(l)) } else { shown(&failure_tail) }
    };
    view! {
        <p class="muted" id="log-state">{move || match (following.get(), ended.get()) {
            (_, true) => "The engine's last lines.",
            (true, false) => "Following the engine's output as it comes…",
            (false, false) => "",
        }}</p>
        <pre id="log-tail" class="log" data-ended=move || ended.get().to_string()>{text}</pre>
    }
}

#[cfg(test)]
mod tests {
    use super::{load_rows, quoted};

    #[test]
    fn the_load_probe_s_rates_are_read_from_the_measurement() {
        let m = serde_json::json!({ "load": {
            "workload": "chat", "goodput_rps": 1.5, "best_rate": 2.0,
            "steps": [
                { "rate": 2.0, "sent": 10, "completed": 10, "throughput_rps": 1.9,
                  "ttft_ms": { "p50": 10.0, "p90": 20.0, "p99": 31.4 }, "itl_ms": null,
                  "meets_slo": true, "binding": null },
                { "rate": 8.0, "sent": 40, "completed": 38, "throughput_rps": 3.2,
                  "ttft_ms": { "p50": 900.0, "p90": 3000.0, "p99": 4000.2 }, "itl_ms": { "p50": 5.0, "p90": 9.0, "p99": 12.0 },
                  "meets_slo": false, "binding": "all 2 slots busy" }
            ]
        }});
        let (head, rows) = load_rows(&m).unwrap();
        assert_eq!(
            head,
            "chat workload: 1.50 requests a second within the objective at 2.00 arriving a second."
        );
        assert_eq!(
            (rows[0].ttft_p99.as_str(), rows[0].gap_p99.as_str(), rows[0].verdict),
            ("31", "—", "holds")
        );
        assert_eq!((rows[1].answered.as_str(), rows[1].verdict), ("38 of 40", "misses"));
        assert_eq!(rows[1].binding, "all 2 slots busy");
        assert!(load_rows(&serde_json::json!({ "speed": {} })).is_none());
    }

    #[test]
    fn arguments_are_quoted_only_when_needed() {
        assert_eq!(quoted("-ctk"), "-ctk");
        assert_eq!(quoted("/models/a b.gguf"), "'/models/a b.gguf'");
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert_eq!(quoted(""), "''");
    }
}
