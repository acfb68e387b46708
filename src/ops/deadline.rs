//! How long a phase may take: each step says what suits what it waits for (an EKS control
//! plane ~25 min, a HyperPod cluster ~60 min, an add-on ~15 min), and the operator may
//! override any of them by phase name (`INSTANTSTART_PHASE_DEADLINES=eks-cluster=1800,*=3600`).
//! A phase past its deadline fails with `deadline-exceeded`, naming what it awaited and the
//! last state it saw.

use std::collections::HashMap;
use std::time::Duration;

use super::outcome::StepError;

/// Overrides by phase name (`*`: every phase without its own).
#[derive(Debug, Clone, Default)]
pub struct Deadlines(HashMap<String, Duration>);

impl Deadlines {
    /// `name=seconds` items, comma-separated; an empty string overrides nothing.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut map = HashMap::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, secs) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}`: expected `phase=seconds`"))?;
            let name = name.trim();
            let valid_name = name == "*"
                || (!name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
            if !valid_name {
                return Err(format!("`{item}`: `{name}` is not a phase name (or `*`)"));
            }
            let secs: f64 = secs
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| format!("`{item}`: seconds must be a number ≥ 0"))?;
            map.insert(name.to_string(), Duration::from_secs_f64(secs));
        }
        Ok(Self(map))
    }

    /// The deadline of a phase: the override, else what its step says (`default`).
    pub fn of(&self, phase: &str, default: Duration) -> Duration {
        self.0
            .get(phase)
            .or_else(|| self.0.get("*"))
            .copied()
            .unwrap_or(default)
    }
}

/// `90 s`, `25 min`, `1 h 30 min`: for messages.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{:.0} s", d.as_secs_f64()),
        120..=5399 => format!("{} min", s / 60),
        _ if s.is_multiple_of(3600) => format!("{} h", s / 3600),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The typed failure of a phase that did not finish in time.
pub fn exceeded(phase: &str, limit: Duration, last_seen: Option<&str>) -> StepError {
    StepError::fatal(
        "deadline-exceeded",
        format!(
            "`{phase}` did not finish within its deadline of {}; last state seen: {}. Look at the resource in the console, then retry the operation (the phase looks before it acts) or raise the deadline with INSTANTSTART_PHASE_DEADLINES={phase}=<seconds>",
            human(limit),
            last_seen.unwrap_or("nothing reported yet"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_parse_by_name_with_a_wildcard() {
        let d = Deadlines::parse("eks-cluster=1800, *=60").unwrap();
        assert_eq!(d.0["eks-cluster"], Duration::from_secs(1800));
        assert_eq!(d.0["*"], Duration::from_secs(60));
        assert!(Deadlines::parse("").unwrap().0.is_empty());
        for bad in ["eks-cluster", "EKS=1", "x=-1", "x=soon", "=5"] {
            assert!(Deadlines::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(Duration::from_secs(90)), "90 s");
        assert_eq!(human(Duration::from_secs(1500)), "25 min");
        assert_eq!(human(Duration::from_secs(3600 * 2)), "2 h");
        assert_eq!(human(Duration::from_secs(5400 + 600)), "1 h 40 min");
    }
}
