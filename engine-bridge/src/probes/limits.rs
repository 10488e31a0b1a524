//! Bounds on a probe plan that came from outside the server (a study, a
//! worker's queue): counts, lengths and times no measurement needs more
//! of, checked before any probe runs. Each error names the field and its
//! limit.

use std::time::Duration;

use super::ProbePlan;

/// Longest prompt or context any probe builds, in tokens.
pub const MAX_TOKENS: usize = 1 << 20;
/// Most tokens generated per request.
pub const MAX_PREDICT: u32 = 16_384;
/// Most repeats (or warm-up requests) of one measurement.
pub const MAX_REPEATS: u32 = 100;
/// Most points on one probe's list (depths, sizes, client counts).
pub const MAX_POINTS: usize = 32;
/// Most concurrent clients.
pub const MAX_CLIENTS: u32 = 512;
/// Longest any request or tool may be given.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Most quality cases.
pub const MAX_CASES: usize = 500;
/// Longest text in a quality case (prompt, keyword, pattern, rubric), in bytes.
pub const MAX_TEXT: usize = 16 * 1024;
/// Highest arrival rate a load probe may ask for, a second.
pub const MAX_RATE: f64 = 1000.0;
/// Longest a load probe may keep one rate going.
pub const MAX_LOAD_STEP: Duration = Duration::from_secs(600);
/// Most perplexity chunks.
pub const MAX_CHUNKS: u32 = 10_000;

/// Collects "field: value, over the limit of N" lines.
#[derive(Default)]
struct Check(Vec<String>);

impl Check {
    fn at_most<T: PartialOrd + std::fmt::Debug>(&mut self, field: &str, value: T, limit: T) {
        if value > limit {
            self.0.push(format!("probes.{field}: {value:?}, over the limit of {limit:?}"));
        }
    }

    fn points<T: PartialOrd + std::fmt::Debug + Copy>(&mut self, field: &str, v: &[T], limit: T) {
        self.at_most(&format!("{field} (count)"), v.len(), MAX_POINTS);
        if let Some(big) = v.iter().find(|x| **x > limit) {
            self.at_most(field, *big, limit);
        }
    }

    fn text(&mut self, field: &str, text: &str) {
        self.at_most(&format!("{field} (bytes)"), text.len(), MAX_TEXT);
    }
}

impl ProbePlan {
    /// Every bound the plan passes, one line each (empty: within all).
    pub fn limit_errors(&self) -> Vec<String> {
        let mut c = Check::default();
        if let Some(p) = &self.speed {
            c.at_most("speed.prompt_tokens", p.prompt_tokens, MAX_TOKENS);
            c.at_most("speed.n_predict", p.n_predict, MAX_PREDICT);
            c.at_most("speed.warmup", p.warmup, MAX_REPEATS);
            c.at_most("speed.repeats", p.repeats, MAX_REPEATS);
            c.at_most("speed.request_timeout", p.request_timeout, MAX_TIMEOUT);
        }
        if let Some(p) = &self.depth {
            c.points("depth.depths", &p.depths, MAX_TOKENS);
            c.at_most("depth.n_predict", p.n_predict, MAX_PREDICT);
            c.at_most("depth.repeats", p.repeats, MAX_REPEATS);
            c.at_most("depth.request_timeout", p.request_timeout, MAX_TIMEOUT);
        }
        if let Some(p) = &self.concurrency {
            c.points("concurrency.clients", &p.clients, MAX_CLIENTS);
            c.at_most("concurrency.prompt_tokens", p.prompt_tokens, MAX_TOKENS);
            c.at_most("concurrency.n_predict", p.n_predict, MAX_PREDICT);
            c.at_most("concurrency.request_timeout", p.request_timeout, MAX_TIMEOUT);
        }
        if let Some(p) = &self.context {
            c.points("context.sizes", &p.sizes, MAX_TOKENS);
            c.points("context.depths", &p.depths, 1.0);
            c.at_most("context.max_tokens", p.max_tokens, MAX_PREDICT);
            c.at_most("context.thinking_budget", p.thinking_budget, MAX_PREDICT);
            c.at_most("context.request_timeout", p.request_timeout, MAX_TIMEOUT);
        }
        if let Some(p) = &self.quality {
            c.at_most("quality.suite.case (count)", p.suite.cases.len(), MAX_CASES);
            c.text("quality.suite.name", &p.suite.name);
            c.text("quality.suite.description", &p.suite.description);
            for case in p.suite.cases.iter().take(MAX_CASES) {
                c.text("quality.suite.case.id", &case.id);
                c.text("quality.suite.case.prompt", &case.prompt);
                c.at_most("quality.suite.case.max_tokens", case.max_tokens, MAX_PREDICT);
                let words = case.any.iter().chain(&case.all).chain(&case.must_not);
                c.at_most("quality.suite.case keywords (count)", words.clone().count(), 100);
                for word in words.take(100) {
                    c.text("quality.suite.case keyword", word);
                }
                if let Some(r) = &case.regex {
                    c.text("quality.suite.case.regex", r);
                }
            }
            if let Some(judge) = &p.judge {
                c.text("quality.judge.rubric", &judge.rubric);
                c.at_most("quality.judge.endpoint (bytes)", judge.endpoint.len(), 200);
            }
            c.at_most("quality.request_timeout", p.request_timeout, MAX_TIMEOUT);
            c.at_most("quality.thinking_budget", p.thinking_budget, MAX_PREDICT);
            c.at_most("quality.thinking_timeout", p.thinking_timeout, MAX_TIMEOUT);
        }
        if let Some(p) = &self.load {
            if let Some(e) = crate::workloads::name_error(&p.workload) {
                c.0.push(format!("probes.load.{e}"));
            }
            if let Some(e) = p.lengths.error() {
                c.0.push(format!("probes.load.{e}"));
            }
            c.at_most("load.rates (count)", p.rates.len(), MAX_POINTS);
            if p.rates.is_empty() || p.rates.iter().any(|r| !(*r > 0.0 && *r <= MAX_RATE)) {
                c.0.push(format!(
                    "probes.load.rates: each between 0 and {MAX_RATE} a second, at least one"
                ));
            }
            c.at_most("load.duration", p.duration, MAX_LOAD_STEP);
            c.at_most("load.search_steps", p.search_steps, 8);
            c.at_most("load.max_in_flight", p.max_in_flight, MAX_CLIENTS as usize * 8);
            c.at_most("load.request_timeout", p.request_timeout, MAX_TIMEOUT);
            for (name, bound) in
                [("ttft_p99_ms", p.slo.ttft_p99_ms), ("itl_p99_ms", p.slo.itl_p99_ms)]
            {
                if bound.is_some_and(|b| !(b > 0.0 && b <= 3.6e6)) {
                    c.0.push(format!("probes.load.slo.{name}: between 0 and 3600000 ms"));
                }
            }
        }
        if let Some(p) = &self.perplexity {
            c.at_most("perplexity.ctx", p.ctx as usize, MAX_TOKENS);
            c.at_most("perplexity.chunks", p.chunks, MAX_CHUNKS);
            c.at_most("perplexity.timeout", p.timeout, MAX_TIMEOUT);
        }
        if let Some(p) = &self.kld {
            c.at_most("kld.ctx", p.ctx as usize, MAX_TOKENS);
            c.at_most("kld.chunks", p.chunks, MAX_CHUNKS);
            c.at_most("kld.timeout", p.timeout, MAX_TIMEOUT);
            c.at_most("kld.reference (settings)", p.reference.len(), 64);
        }
        c.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_plan_is_within_every_bound_and_a_greedy_one_is_not() {
        assert!(ProbePlan::standard().limit_errors().is_empty());
        let plan: ProbePlan = toml::from_str(
            "[speed]\nrepeats = 1000000\nprompt_tokens = 99999999\n\
             [concurrency]\nclients = [1, 100000]\n\
             [context]\nsizes = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33]\n\
             [perplexity]\ntimeout = 1e9\n",
        )
        .unwrap();
        let all = plan.limit_errors().join("\n");
        for expected in [
            "probes.speed.repeats: 1000000, over the limit of 100",
            "probes.speed.prompt_tokens: 99999999",
            "probes.concurrency.clients: 100000, over the limit of 512",
            "probes.context.sizes (count): 33, over the limit of 32",
            "probes.perplexity.timeout",
        ] {
            assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
        }
    }
}
