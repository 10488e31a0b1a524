//! What a study may be written with: the engine profiles this server runs
//! (their settings, as the browser may see them: names, never paths) and
//! the metrics a study may optimize or bound.

use engine_bridge::Profile;
use engine_bridge::catalog::CACHE_TYPES;
use tunebook_study::{Goal, Metric};
use tunebook_views::types::{MetricView, ParamView, ProfileView};

/// The profiles as the browser may see them (names, not paths), each with
/// whether its build can place layers on a GPU here (see [`has_gpu`]).
pub async fn profiles(profiles: &[Profile]) -> Vec<ProfileView> {
    let mut gpus = Vec::with_capacity(profiles.len());
    for p in profiles {
        gpus.push(has_gpu(p).await);
    }
    profiles
        .iter()
        .zip(gpus)
        .map(|(p, has_gpu)| ProfileView {
            name: p.name.clone(),
            has_gpu,
            engine: p.kind.name().to_string(),
            description: p.description.clone(),
            models: p.models.iter().map(|m| m.name.clone()).collect(),
            // The finest first, then the profile's own.
            cache_types: {
                let known: Vec<String> = CACHE_TYPES.iter().map(|s| s.to_string()).collect();
                let own = p.choices.get("cache_type_k").into_iter().flatten().cloned();
                let ordered = tunebook_views::figures::value_order(&known).into_iter();
                ordered.map(|i| known[i].clone()).chain(own).collect()
            },
            params: {
                let catalog = p.catalog();
                let env = catalog.env.iter().map(env_param);
                let models: Vec<String> = p.models.iter().map(|m| m.name.clone()).collect();
                catalog
                    .params
                    .iter()
                    .cloned()
                    .chain(env)
                    .map(|param| {
                        let mut view = param_view(&param, &models);
                        view.choices.extend(
                            p.choices.get(view.name.as_str()).into_iter().flatten().cloned(),
                        );
                        view
                    })
                    .collect()
            },
        })
        .collect()
}

/// Whether `profile`'s engine can place layers on a GPU here: false only
/// where its build says it has no device to offload to (a CPU-only
/// llama.cpp); other engines, and builds that cannot be asked, may.
pub async fn has_gpu(profile: &Profile) -> bool {
    engine_bridge::devices::offload_devices(profile).await.is_none_or(|d| !d.is_empty())
}

/// The metrics a study can optimize or bound.
pub fn metrics() -> Vec<MetricView> {
    Metric::ALL
        .iter()
        .map(|m| MetricView {
            name: m.name().into(),
            label: m.label().into(),
            goal: goal_name(m.natural_goal()).into(),
        })
        .collect()
}

/// A goal as study files write it.
pub fn goal_name(g: Goal) -> &'static str {
    match g {
        Goal::Max => "max",
        Goal::Min => "min",
    }
}

/// An environment variable a study may set, as the setting `env.NAME`.
fn env_param(v: &engine_bridge::catalog::EnvVar) -> engine_bridge::catalog::Param {
    engine_bridge::catalog::Param {
        name: format!("{}{}", engine_bridge::catalog::ENV_PREFIX, v.name).into(),
        flag: v.name.into(),
        domain: v.domain.clone(),
        default: "unset",
        phase: engine_bridge::catalog::Phase::LoadTime,
        help: v.help,
    }
}

/// A setting as the designer shows it; `models`: the profile's model
/// names, the values a model setting takes.
fn param_view(p: &engine_bridge::catalog::Param, models: &[String]) -> ParamView {
    use engine_bridge::catalog::{Domain, Phase};
    let (kind, mut choices, min, max) = match &p.domain {
        Domain::Int { min, max } => ("int", vec![], Some(*min as f64), Some(*max as f64)),
        Domain::Float { min, max } => ("float", vec![], Some(*min), Some(*max)),
        Domain::Choice { choices, .. } => {
            ("choice", choices.iter().map(|c| c.to_string()).collect(), None, None)
        }
        Domain::Mapped { map } => {
            ("choice", map.iter().map(|(k, _)| k.to_string()).collect(), None, None)
        }
        Domain::Bool | Domain::BoolValue | Domain::Negatable { .. } => {
            ("bool", vec!["false".into(), "true".into()], None, None)
        }
        Domain::Model => ("model", models.to_vec(), None, None),
        Domain::Text | Domain::Devices | Domain::TensorOverrides | Domain::Proportions => {
            ("text", vec![], None, None)
        }
    };
    // The engine's default where the flag takes no such word (`numa`'s
    // `off`, a draft model's `none`): a value that passes no flag.
    if matches!(kind, "choice" | "model") && p.is_unset(p.default) {
        choices.insert(0, p.default.to_string());
    }
    ParamView {
        name: p.name.to_string(),
        flag: p.flag.to_string(),
        kind: kind.into(),
        choices,
        min,
        max,
        default: p.default.into(),
        phase: match p.phase {
            Phase::LoadTime => "load_time",
            Phase::RequestTime => "request_time",
        }
        .into(),
        help: p.help.into(),
    }
}

#[cfg(test)]
mod tests {
    use engine_bridge::catalog::Catalog;

    use super::param_view;

    /// The designer lists the engine's default word where the flag takes
    /// no such word (it passes no flag), and nothing more elsewhere.
    #[test]
    fn the_engine_s_default_word_is_a_choice_where_it_passes_no_flag() {
        let catalog = Catalog::llama_server();
        let view = |name: &str| param_view(catalog.get(name).expect(name), &["m".into()]);
        assert_eq!(view("numa").choices, ["off", "distribute", "isolate", "numactl"]);
        assert_eq!(view("draft_model").choices, ["none", "m"]);
        assert_eq!(view("flash_attn").choices, ["on", "off", "auto"]);
        assert_eq!(view("model").choices, ["m"]);
    }
}
