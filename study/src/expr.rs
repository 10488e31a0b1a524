//! The small expression language of constraints between settings
//! (`flash_attn == "on" when cache_type_v != "f16"`) and of bounds on
//! metrics (`baseline - 1%`, `120 GiB`), parsed by the grammar in
//! `expr.pest`.

use std::collections::BTreeSet;
use std::fmt;

use engine_bridge::Settings;
use pest::Parser as _;
use pest::iterators::Pair;
use pest_derive::Parser;

#[derive(Parser)]
#[grammar = "expr.pest"]
struct Grammar;

/// Why an expression could not be read or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    #[error("cannot parse `{text}`: {message}")]
    Parse { text: String, message: String },
    #[error("in `{text}`: {message}")]
    Eval { text: String, message: String },
}

/// A value during evaluation: setting values are text, read as a number or
/// a boolean where they look like one.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A setting the configuration leaves unset.
    Unset,
    Num(f64),
    Bool(bool),
    Text(String),
}

impl Value {
    /// How a setting's text reads.
    pub fn of_setting(text: &str) -> Self {
        match text.trim() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            t => t.parse().map(Value::Num).unwrap_or_else(|_| Value::Text(t.to_string())),
        }
    }

    fn truthy(&self) -> Result<bool, String> {
        match self {
            Value::Bool(b) => Ok(*b),
            Value::Unset => Ok(false),
            other => Err(format!("{other} is not true or false")),
        }
    }

    fn num(&self) -> Result<f64, String> {
        match self {
            Value::Num(n) => Ok(*n),
            other => Err(format!("{other} is not a number")),
        }
    }

    fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Num(a), Value::Num(b)) => a == b,
            // `"1" == 1`: compare as written.
            (a, b) => a.to_string() == b.to_string(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Unset => write!(f, "unset"),
            Value::Num(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Text(t) => write!(f, "{t}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Lit(Value),
    Setting(String),
    Neg(Box<Node>),
    Arith(Box<Node>, char, Box<Node>),
    Compare(Box<Node>, Cmp, Box<Node>),
    In(Box<Node>, Vec<Node>),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
    /// `a when b`: `a` must hold wherever `b` does.
    When(Box<Node>, Box<Node>),
}

/// A parsed constraint between settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub text: String,
    root: Node,
}

/// The longest expression read, in bytes.
pub const MAX_EXPR_LEN: usize = 1000;
/// The deepest nesting of brackets read.
pub const MAX_NESTING: usize = 16;
/// The most prefix operators (`not`, `!`, `-`) read one after another.
pub const MAX_PREFIX_RUN: usize = 8;

/// Refuses an expression before the parser sees it if it is longer or
/// nested deeper than anyone writes: the parser and the evaluator recurse
/// once per level, and a few KB of `(((…` would exhaust the stack.
fn within_limits(text: &str) -> Result<(), ExprError> {
    let refuse = |message: String| {
        let shown: String = text.chars().take(60).collect();
        Err(ExprError::Parse { text: shown, message })
    };
    if text.len() > MAX_EXPR_LEN {
        return refuse(format!("{} bytes long, over the limit of {MAX_EXPR_LEN}", text.len()));
    }
    let (mut depth, mut deepest, mut run, mut longest_run) = (0usize, 0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let word_at = |w: &str| {
            let end = i + w.len();
            let boundary = |j: usize| {
                chars.get(j).is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '.'))
            };
            chars.get(i..end).is_some_and(|s| s.iter().copied().eq(w.chars()))
                && boundary(end)
                && (i == 0 || boundary(i - 1))
        };
        match c {
            '"' | '\'' => {
                quote = Some(c);
                run = 0;
            }
            '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
                run = 0;
            }
            ')' | ']' => {
                depth = depth.saturating_sub(1);
                run = 0;
            }
            '!' if chars.get(i + 1) != Some(&'=') => run += 1,
            '-' => run += 1,
            'n' if word_at("not") => {
                run += 1;
                i += 2;
            }
            c if c.is_whitespace() => {}
            _ => run = 0,
        }
        longest_run = longest_run.max(run);
        i += 1;
    }
    if deepest > MAX_NESTING {
        return refuse(format!("brackets nested {deepest} deep, over the limit of {MAX_NESTING}"));
    }
    if longest_run > MAX_PREFIX_RUN {
        return refuse(format!(
            "{longest_run} prefix operators in a row, over the limit of {MAX_PREFIX_RUN}"
        ));
    }
    Ok(())
}

impl Constraint {
    pub fn parse(text: &str) -> Result<Self, ExprError> {
        within_limits(text)?;
        let mut pairs = Grammar::parse(Rule::constraint, text).map_err(|e| refused(text, e))?;
        let implication = pairs.next().and_then(|c| c.into_inner().next()).expect("grammar");
        Ok(Self { text: text.to_string(), root: node(implication) })
    }

    /// Whether a configuration satisfies the constraint.
    pub fn holds(&self, config: &Settings) -> Result<bool, ExprError> {
        eval(&self.root, config)
            .and_then(|v| v.truthy())
            .map_err(|message| ExprError::Eval { text: self.text.clone(), message })
    }

    /// The settings the constraint names.
    pub fn settings(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        collect(&self.root, &mut out);
        out
    }
}

/// What a rule the parser expected is, in a user's words: never a
/// grammar's name ("add op", "kw when").
fn describe(rule: &Rule) -> String {
    match rule {
        Rule::EOI => "the end".into(),
        Rule::cmp_op => "a comparison (==, !=, <, <=, >, >=)".into(),
        Rule::add_op => "+ or -".into(),
        Rule::mul_op => "* or /".into(),
        Rule::kw_when | Rule::kw_or | Rule::kw_and | Rule::kw_not | Rule::kw_in => {
            format!("`{}`", format!("{rule:?}").trim_start_matches("kw_"))
        }
        Rule::setting => "a setting name".into(),
        Rule::number | Rule::quantity => "a number".into(),
        Rule::string => "a quoted text".into(),
        Rule::boolean => "true or false".into(),
        Rule::list => "a list ([1, 2])".into(),
        Rule::unit => "a unit (%, KiB, MiB, GiB, GB, ms, s)".into(),
        Rule::kw_baseline => "`baseline`".into(),
        _ => "a value".into(),
    }
}

/// A parse error in a user's words, with where the parse stopped
/// (counted in characters from 1).
fn refused(text: &str, e: pest::error::Error<Rule>) -> ExprError {
    use pest::error::LineColLocation::{Pos, Span};
    let (Pos((_, at)) | Span((_, at), _)) = e.line_col;
    let message = format!("at character {at}, {}", e.renamed_rules(describe).variant.message());
    ExprError::Parse { text: text.to_string(), message }
}

fn collect(node: &Node, out: &mut BTreeSet<String>) {
    match node {
        Node::Lit(_) => {}
        Node::Setting(s) => {
            out.insert(s.clone());
        }
        Node::Neg(a) | Node::Not(a) => collect(a, out),
        Node::Arith(a, _, b) | Node::Compare(a, _, b) | Node::When(a, b) => {
            collect(a, out);
            collect(b, out);
        }
        Node::In(a, list) => {
            collect(a, out);
            list.iter().for_each(|n| collect(n, out));
        }
        Node::And(list) | Node::Or(list) => list.iter().for_each(|n| collect(n, out)),
    }
}

fn node(pair: Pair<'_, Rule>) -> Node {
    let rule = pair.as_rule();
    let text = pair.as_str();
    let is_keyword = |p: &Pair<'_, Rule>| {
        matches!(
            p.as_rule(),
            Rule::kw_when | Rule::kw_or | Rule::kw_and | Rule::kw_not | Rule::kw_in
        )
    };
    let mut inner = pair.into_inner().filter(|p| !is_keyword(p));
    match rule {
        Rule::implication => {
            let then = node(inner.next().expect("grammar"));
            match inner.next() {
                Some(cond) => Node::When(Box::new(then), Box::new(node(cond))),
                None => then,
            }
        }
        Rule::disjunction | Rule::conjunction => {
            let mut items: Vec<Node> = inner.map(node).collect();
            if items.len() == 1 {
                items.pop().expect("one")
            } else if rule == Rule::disjunction {
                Node::Or(items)
            } else {
                Node::And(items)
            }
        }
        Rule::negation => {
            let first = inner.next().expect("grammar");
            match first.as_rule() {
                Rule::negation => Node::Not(Box::new(node(first))),
                _ => node(first),
            }
        }
        Rule::comparison => {
            let left = node(inner.next().expect("grammar"));
            match inner.next() {
                None => left,
                Some(op) if op.as_rule() == Rule::list => {
                    Node::In(Box::new(left), op.into_inner().map(node).collect())
                }
                Some(op) => {
                    let cmp = match op.as_str() {
                        "==" => Cmp::Eq,
                        "!=" => Cmp::Ne,
                        "<" => Cmp::Lt,
                        "<=" => Cmp::Le,
                        ">" => Cmp::Gt,
                        _ => Cmp::Ge,
                    };
                    Node::Compare(Box::new(left), cmp, Box::new(node(inner.next().expect("rhs"))))
                }
            }
        }
        Rule::sum | Rule::product => {
            let mut acc = node(inner.next().expect("grammar"));
            while let Some(op) = inner.next() {
                let right = node(inner.next().expect("grammar"));
                let op = op.as_str().chars().next().expect("operator");
                acc = Node::Arith(Box::new(acc), op, Box::new(right));
            }
            acc
        }
        Rule::neg => Node::Neg(Box::new(node(inner.next().expect("grammar")))),
        Rule::number => Node::Lit(Value::Num(text.parse().expect("grammar checks numbers"))),
        Rule::boolean => Node::Lit(Value::Bool(text == "true")),
        Rule::string => Node::Lit(Value::Text(inner.next().map_or("", |p| p.as_str()).into())),
        Rule::setting => Node::Setting(text.to_string()),
        other => unreachable!("rule {other:?} is not an expression"),
    }
}

fn eval(node: &Node, config: &Settings) -> Result<Value, String> {
    Ok(match node {
        Node::Lit(v) => v.clone(),
        Node::Setting(name) => config.get(name).map_or(Value::Unset, |t| Value::of_setting(t)),
        Node::Neg(a) => Value::Num(-eval(a, config)?.num()?),
        Node::Arith(a, op, b) => {
            let (a, b) = (eval(a, config)?.num()?, eval(b, config)?.num()?);
            Value::Num(match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                _ => a / b,
            })
        }
        Node::Compare(a, cmp, b) => {
            let (a, b) = (eval(a, config)?, eval(b, config)?);
            Value::Bool(match cmp {
                Cmp::Eq => a.same(&b),
                Cmp::Ne => !a.same(&b),
                ordered => {
                    let (a, b) = (a.num()?, b.num()?);
                    match ordered {
                        Cmp::Lt => a < b,
                        Cmp::Le => a <= b,
                        Cmp::Gt => a > b,
                        _ => a >= b,
                    }
                }
            })
        }
        Node::In(a, list) => {
            let a = eval(a, config)?;
            let mut found = false;
            for item in list {
                found |= eval(item, config)?.same(&a);
            }
            Value::Bool(found)
        }
        Node::Not(a) => Value::Bool(!eval(a, config)?.truthy()?),
        Node::And(items) => {
            for item in items {
                if !eval(item, config)?.truthy()? {
                    return Ok(Value::Bool(false));
                }
            }
            Value::Bool(true)
        }
        Node::Or(items) => {
            for item in items {
                if eval(item, config)?.truthy()? {
                    return Ok(Value::Bool(true));
                }
            }
            Value::Bool(false)
        }
        Node::When(then, cond) => {
            Value::Bool(!eval(cond, config)?.truthy()? || eval(then, config)?.truthy()?)
        }
    })
}

/// A bound on a metric, relative to the baseline or absolute.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundExpr {
    pub text: String,
    root: BoundNode,
}

#[derive(Debug, Clone, PartialEq)]
enum BoundNode {
    Baseline,
    Number(f64),
    /// A percentage of the baseline.
    Percent(f64),
    Arith(Box<BoundNode>, char, Box<BoundNode>),
}

impl BoundExpr {
    pub fn parse(text: &str) -> Result<Self, ExprError> {
        within_limits(text)?;
        let mut pairs = Grammar::parse(Rule::bound, text).map_err(|e| refused(text, e))?;
        let sum = pairs.next().and_then(|b| b.into_inner().next()).expect("grammar");
        Ok(Self { text: text.to_string(), root: bound_node(sum) })
    }

    /// Whether the bound refers to the baseline's value.
    pub fn needs_baseline(&self) -> bool {
        fn walk(n: &BoundNode) -> bool {
            match n {
                BoundNode::Baseline | BoundNode::Percent(_) => true,
                BoundNode::Number(_) => false,
                BoundNode::Arith(a, _, b) => walk(a) || walk(b),
            }
        }
        walk(&self.root)
    }

    /// The bound's value; `None` when it needs a baseline there is not.
    pub fn value(&self, baseline: Option<f64>) -> Option<f64> {
        fn walk(n: &BoundNode, base: Option<f64>) -> Option<f64> {
            Some(match n {
                BoundNode::Baseline => base?,
                BoundNode::Number(x) => *x,
                BoundNode::Percent(p) => base? * p / 100.0,
                BoundNode::Arith(a, op, b) => {
                    let (a, b) = (walk(a, base)?, walk(b, base)?);
                    match op {
                        '+' => a + b,
                        '-' => a - b,
                        '*' => a * b,
                        _ => a / b,
                    }
                }
            })
        }
        walk(&self.root, baseline)
    }
}

fn bound_node(pair: Pair<'_, Rule>) -> BoundNode {
    let rule = pair.as_rule();
    let mut inner = pair.into_inner();
    match rule {
        Rule::bound_sum | Rule::bound_product => {
            let mut acc = bound_node(inner.next().expect("grammar"));
            while let Some(op) = inner.next() {
                let right = bound_node(inner.next().expect("grammar"));
                let op = op.as_str().chars().next().expect("operator");
                acc = BoundNode::Arith(Box::new(acc), op, Box::new(right));
            }
            acc
        }
        Rule::kw_baseline => BoundNode::Baseline,
        Rule::quantity => {
            let n: f64 = inner.next().expect("number").as_str().parse().expect("grammar");
            let unit = inner.next().map(|u| u.as_str().to_ascii_lowercase());
            let scale = |k: f64| BoundNode::Number(n * k);
            match unit.as_deref() {
                None | Some("ms") => BoundNode::Number(n),
                Some("%") => BoundNode::Percent(n),
                Some("s") => scale(1e3),
                Some("kib") => scale(1024.0),
                Some("mib") => scale(1024.0 * 1024.0),
                Some("gib") => scale(1024.0 * 1024.0 * 1024.0),
                Some("tib") => scale(1024f64.powi(4)),
                Some("kb") => scale(1e3),
                Some("mb") => scale(1e6),
                Some("gb") => scale(1e9),
                _ => scale(1e12),
            }
        }
        other => unreachable!("rule {other:?} is not a bound"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn constraints_from_the_seeds() {
        let same = Constraint::parse("cache_type_k == cache_type_v").unwrap();
        assert!(
            same.holds(&config(&[("cache_type_k", "q8_0"), ("cache_type_v", "q8_0")])).unwrap()
        );
        assert!(
            !same.holds(&config(&[("cache_type_k", "q8_0"), ("cache_type_v", "f16")])).unwrap()
        );

        let fa = Constraint::parse(r#"flash_attn == "on" when cache_type_v != "f16""#).unwrap();
        assert_eq!(fa.settings().into_iter().collect::<Vec<_>>(), ["cache_type_v", "flash_attn"]);
        assert!(fa.holds(&config(&[("flash_attn", "off"), ("cache_type_v", "f16")])).unwrap());
        assert!(fa.holds(&config(&[("flash_attn", "on"), ("cache_type_v", "q4_0")])).unwrap());
        assert!(!fa.holds(&config(&[("flash_attn", "off"), ("cache_type_v", "q4_0")])).unwrap());
    }

    #[test]
    fn a_typo_is_told_in_words_with_where() {
        let e = Constraint::parse("cache_type_k = = f16").unwrap_err().to_string();
        assert!(
            e.starts_with("cannot parse `cache_type_k = = f16`: at character 14, expected"),
            "{e}"
        );
        assert!(e.contains("a comparison (==, !=, <, <=, >, >=)") && e.contains("`when`"), "{e}");
        for grammar in ["op", "kw ", "_"] {
            assert!(!e.split(": ").nth(1).unwrap().contains(grammar), "{e}");
        }
    }

    #[test]
    fn arithmetic_logic_and_lists() {
        let c = Constraint::parse(
            "ctx_size * parallel <= 65536 and not (mlock && env.GGML_X == 1) or batch_size in [1, 2,]",
        )
        .unwrap();
        let ok = config(&[("ctx_size", "16384"), ("parallel", "4"), ("mlock", "false")]);
        assert!(c.holds(&ok).unwrap());
        let big = config(&[("ctx_size", "32768"), ("parallel", "4"), ("batch_size", "3")]);
        assert!(!c.holds(&big).unwrap());
        let listed = config(&[("ctx_size", "32768"), ("parallel", "4"), ("batch_size", "2")]);
        assert!(c.holds(&listed).unwrap());
        let neg = Constraint::parse("threads - 8 >= -2").unwrap();
        assert!(neg.holds(&config(&[("threads", "6")])).unwrap());
        assert!(!neg.holds(&config(&[("threads", "5")])).unwrap());
    }

    #[test]
    fn deep_or_long_expressions_are_refused_before_parsing() {
        let deep = format!("{}threads{} > 1", "(".repeat(1000), ")".repeat(1000));
        let e = Constraint::parse(&deep).unwrap_err().to_string();
        assert!(e.contains("over the limit of 1000"), "{e}");
        let deep = format!("{}threads{} > 1", "(".repeat(40), ")".repeat(40));
        let e = Constraint::parse(&deep).unwrap_err().to_string();
        assert!(e.contains("nested 40 deep"), "{e}");
        let e = Constraint::parse(&format!("{}true", "not ".repeat(20))).unwrap_err();
        assert!(e.to_string().contains("20 prefix operators"), "{e}");
        let e = BoundExpr::parse(&format!("{}1{}", "(".repeat(30), ")".repeat(30))).unwrap_err();
        assert!(e.to_string().contains("nested 30 deep"), "{e}");
        // At the limits, it parses and evaluates (no stack trouble).
        let ok = format!(
            "{}{}threads{} > 1",
            "(".repeat(MAX_NESTING),
            "not ".repeat(MAX_PREFIX_RUN - 2),
            ")".repeat(MAX_NESTING)
        );
        let c = Constraint::parse(&ok.replace("threads", "- - threads")).unwrap();
        assert!(c.holds(&config(&[("threads", "2")])).is_err(), "not of a number is an error");
        assert!(Constraint::parse("a != -1 and b != 1 and \"(((((((((((((((((((\" != a").is_ok());
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = Constraint::parse("cache_type_k = cache_type_v").unwrap_err().to_string();
        assert!(e.contains("cache_type_k = cache_type_v") && e.contains("comparison"), "{e}");
        assert!(Constraint::parse("").is_err());
        assert!(Constraint::parse("and == 1").is_err(), "keywords are not setting names");
        let typed = Constraint::parse("ctx_size > 4").unwrap();
        let e = typed.holds(&config(&[("ctx_size", "big")])).unwrap_err().to_string();
        assert!(e.contains("big is not a number"), "{e}");
    }

    #[test]
    fn bounds_relative_and_absolute() {
        let b = BoundExpr::parse("baseline - 1%").unwrap();
        assert!(b.needs_baseline());
        assert!((b.value(Some(0.8)).unwrap() - 0.792).abs() < 1e-12);
        assert_eq!(b.value(None), None);
        assert_eq!(BoundExpr::parse("120 GiB").unwrap().value(None), Some(120.0 * 1073741824.0));
        assert_eq!(BoundExpr::parse("2s").unwrap().value(None), Some(2000.0));
        assert_eq!(BoundExpr::parse("baseline * 0.5").unwrap().value(Some(10.0)), Some(5.0));
        let e = BoundExpr::parse("12 parsecs").unwrap_err().to_string();
        assert!(e.contains("12 parsecs"), "{e}");
    }
}
