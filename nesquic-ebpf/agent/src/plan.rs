//! Reading the plan file: a header and fixed-size targets (`nesquic-agent-abi`).

use crate::abi::{self, plan_status, PlanHeader, PlanTarget};

/// A plan that passed its checks.
pub struct Plan {
    /// Header.
    pub header: PlanHeader,
    /// Targets, in file order.
    pub targets: Vec<PlanTarget>,
}

/// Reads and checks the plan; the error is a [`plan_status`] code.
pub fn read(path: &std::ffi::OsStr) -> Result<Plan, u32> {
    let bytes = std::fs::read(path).map_err(|_| plan_status::UNREADABLE)?;
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Result<Plan, u32> {
    let header: PlanHeader = abi::read(bytes, 0).ok_or(plan_status::CORRUPT)?;
    if header.magic != abi::PLAN_MAGIC || header.version != abi::VERSION {
        return Err(plan_status::BAD_HEADER);
    }
    let (head, each) = (std::mem::size_of::<PlanHeader>(), std::mem::size_of::<PlanTarget>());
    let n = header.targets as usize;
    if n > abi::MAX_SLOTS || bytes.len() != head + n * each {
        return Err(plan_status::CORRUPT);
    }
    let targets = (0..n).map(|i| abi::read::<PlanTarget>(bytes, head + i * each)).collect::<Option<Vec<_>>>();
    Ok(Plan { header, targets: targets.ok_or(plan_status::CORRUPT)? })
}
