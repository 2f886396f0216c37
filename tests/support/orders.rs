//! The golden reconcile pipeline's input and oracle: [`Orders`], two
//! sides of orders to reconcile, and the answer computed from them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cli::Weir;
use crate::job_dir::JobDir;
use crate::job_file::{Checkpoint, JobFile};
use crate::jobs;
use crate::pipeline::{XorShift, assert_same_lines, multiset, seed};
use crate::plugins;

/// Two sides of orders.
pub struct Orders {
    /// Side A's rows (`payments.csv`): order number, amount.
    pub a: Vec<(String, String)>,
    /// Side B's rows (`bank.csv`), shuffled.
    pub b: Vec<(String, String)>,
}

impl Orders {
    /// `n` orders: most on both sides with equal amounts, some on one side
    /// only, some with amounts that differ.
    pub fn generate(rng: &mut XorShift, n: usize) -> Self {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..n {
            let key = format!("ORD-{i:06}");
            let cents = rng.range(100, 1_000_000);
            let amount = format!("{}.{:02}", cents / 100, cents % 100);
            match rng.range(0, 20) {
                0 => a.push((key, amount)),
                1 => b.push((key, amount)),
                2 => {
                    b.push((
                        key.clone(),
                        format!("{}.{:02}", cents / 100 + 1, cents % 100),
                    ));
                    a.push((key, amount));
                }
                _ => {
                    a.push((key.clone(), amount.clone()));
                    b.push((key, amount));
                }
            }
        }
        for i in (1..b.len()).rev() {
            let j = rng.range(0, i as u64 + 1) as usize;
            b.swap(i, j);
        }
        Orders { a, b }
    }

    /// `rows` as CSV with the header `order_no,amount,<third>`.
    pub fn csv(rows: &[(String, String)], third: &str) -> String {
        let mut s = format!("order_no,amount,{third}\n");
        for (k, v) in rows {
            s.push_str(&format!("{k},{v},x\n"));
        }
        s
    }

    /// The golden reconcile job, its sources throttled to `rate_a` and
    /// `rate_b` records per second, checkpoints every 100 ms, 1000 retained.
    pub fn job_file(rate_a: Option<u64>, rate_b: Option<u64>) -> JobFile {
        let mut job =
            jobs::reconcile(plugins::RECONCILE).checkpoint(Checkpoint::every("100ms").retain(1000));
        for (id, rate) in [("payments", rate_a), ("bank", rate_b)] {
            job = job.source_with(id, |s| s.throttle(rate));
        }
        job
    }

    /// [`Orders::job_file`] in a folder with the orders' two CSV files.
    pub fn job(&self, weir: Weir, rate_a: Option<u64>, rate_b: Option<u64>) -> JobDir {
        self.job_of(weir, Self::job_file(rate_a, rate_b))
    }

    /// `job` in a folder with the orders' two CSV files.
    pub fn job_of(&self, weir: Weir, job: JobFile) -> JobDir {
        let (a, b) = (Self::csv(&self.a, "channel"), Self::csv(&self.b, "state"));
        JobDir::new(weir, job, &[("payments.csv", &a), ("bank.csv", &b)])
    }

    /// Per key: (first amount from A, first amount from B).
    pub fn sides(&self, ka: usize, kb: usize) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
        let mut sides: BTreeMap<String, (Option<f64>, Option<f64>)> = BTreeMap::new();
        for (k, v) in &self.a[..ka] {
            sides
                .entry(k.clone())
                .or_default()
                .0
                .get_or_insert(v.parse().unwrap());
        }
        for (k, v) in &self.b[..kb] {
            sides
                .entry(k.clone())
                .or_default()
                .1
                .get_or_insert(v.parse().unwrap());
        }
        sides
    }

    /// The reference output: every key classified once.
    pub fn reference(&self) -> BTreeMap<String, usize> {
        let mut out = String::new();
        for (k, (a, b)) in self.sides(self.a.len(), self.b.len()) {
            let status = match (a, b) {
                (Some(x), Some(y)) if (x - y).abs() <= 0.005 + 1e-9 => "MATCH",
                (Some(_), Some(_)) => "AMOUNT_MISMATCH",
                (Some(_), None) => "ONLY_A",
                _ => "ONLY_B",
            };
            out.push_str(&format!(
                "{}\n",
                json!({"key": k, "status": status, "a": a, "b": b})
            ));
        }
        multiset(&out)
    }
}

/// Asserts two multisets of JSON lines are equal (compared canonically),
/// printing a short difference when not.
pub fn assert_same_json_lines(
    got: &BTreeMap<String, usize>,
    expected: &BTreeMap<String, usize>,
    what: &str,
) {
    let what = format!("{what} (seed {})", seed());
    assert_same_lines(&canonical(got), &canonical(expected), &what);
}

/// Output lines re-serialized canonically (sorted keys), as a multiset.
pub fn canonical(lines: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (l, n) in lines {
        let v: Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("output line is not JSON ({e}): {l}"));
        *out.entry(v.to_string()).or_insert(0) += n;
    }
    out
}
