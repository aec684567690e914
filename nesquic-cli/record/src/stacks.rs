//! The sampling profile's stacks, folded (`outer;...;leaf count` per line, the format flame graph
//! tools read), one file per side in the run directory (`profile-server.folded`), summed over
//! repetitions. summary.json names each file with its sample count, so a reader can check it
//! has every sample.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nesquic_protocol::Role;
use serde::{Deserialize, Serialize};

use crate::figures::RepetitionFigures;
use crate::RecordError;

/// One side's folded stacks, as named in summary.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackFile {
    /// The side.
    pub role: Role,
    /// File name, relative to the run directory.
    pub file: PathBuf,
    /// Samples in it (the sum of the profile's samples of this side over repetitions).
    pub samples: u64,
}

/// Folded stacks with their counts, sorted by stack.
pub type Folded = Vec<(String, u64)>;

/// Sums each side's folded stacks over `repetitions` and writes them into `dir`; nothing when no
/// repetition was profiled.
pub fn write(dir: &Path, repetitions: &[RepetitionFigures]) -> Result<Vec<StackFile>, RecordError> {
    // Keyed by name, so the files are listed in the same (alphabetical) order as ever.
    let mut sides: BTreeMap<&str, (Role, BTreeMap<&str, u64>)> = BTreeMap::new();
    for role in repetitions.iter().filter_map(|r| r.profile.as_ref()).flat_map(|p| &p.roles) {
        let (_, side) = sides.entry(role.role.name()).or_insert((role.role, BTreeMap::new()));
        for (stack, n) in &role.folded {
            *side.entry(stack).or_default() += n;
        }
    }
    let mut files = Vec::new();
    for (role, stacks) in sides.into_values() {
        let file = PathBuf::from(format!("profile-{role}.folded"));
        let text: String = stacks.iter().map(|(s, n)| format!("{s} {n}\n")).collect();
        crate::files::write(&dir.join(&file), text.as_bytes())?;
        files.push(StackFile { role, file, samples: stacks.values().sum() });
    }
    Ok(files)
}

/// Reads the stacks `file` names in run directory `dir` (only inside it, bounded: a record may come
/// from anywhere); checks every line and that the counts add up to the samples summary.json
/// recorded.
pub fn read(dir: &Path, file: &StackFile) -> Result<Folded, RecordError> {
    let path = dir.join(&file.file);
    let bytes = crate::files::read_in(dir, &file.file, crate::files::MAX_FOLDED_BYTES)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| RecordError::Invalid(format!("{}: not UTF-8 text: not a folded-stacks file", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let parsed = line.rsplit_once(' ').and_then(|(stack, n)| Some((stack.to_string(), n.parse::<u64>().ok()?)));
        let (stack, n) = parsed.ok_or_else(|| {
            RecordError::Invalid(format!("{} line {}: not `stack count`: {line}", path.display(), i + 1))
        })?;
        out.push((stack, n));
    }
    let total: u64 = out.iter().map(|(_, n)| n).sum();
    if total != file.samples {
        return Err(RecordError::Invalid(format!(
            "{} holds {total} samples, summary.json says {}: the file does not belong to this run",
            path.display(),
            file.samples
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_reads_back_and_a_wrong_count_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("profile-server.folded"), "main;f 3\nmain;g 2\n").expect("write");
        let mut file = StackFile { role: Role::Server, file: "profile-server.folded".into(), samples: 5 };
        let stacks = read(dir.path(), &file).expect("reads");
        assert_eq!(stacks, vec![("main;f".to_string(), 3), ("main;g".to_string(), 2)]);
        file.samples = 6;
        assert!(read(dir.path(), &file).expect_err("count").to_string().contains("holds 5 samples"));
    }
}
