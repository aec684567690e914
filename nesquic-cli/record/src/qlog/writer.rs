//! Writes one JSON-SEQ qlog trace (RFC 7464 records: 0x1E, JSON, LF).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use qlog::{CommonFields, QlogSeq, ReferenceTime, TimeFormat, TraceSeq, VantagePoint, VantagePointType};
use serde::Serialize;

use super::{time, NESQUIC_SCHEMA, QUIC_SCHEMA};
use crate::events::Event;
use crate::RecordError;

type Result<T> = std::result::Result<T, RecordError>;

/// One open `.sqlog` file. Event times are milliseconds since the run's reference time, never
/// decreasing.
pub struct QlogWriter {
    out: BufWriter<File>,
    path: PathBuf,
    reference: Instant,
    last_ms: f64,
}

impl QlogWriter {
    /// Creates `path` and writes the header. `reference`/`reference_wall` are the run's start,
    /// shared by every file of the run so their events line up.
    pub fn create(
        path: &Path,
        vantage: &str,
        title: &str,
        reference: Instant,
        reference_wall: SystemTime,
    ) -> Result<Self> {
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
        let ty = match vantage {
            "server" => VantagePointType::Server,
            "client" => VantagePointType::Client,
            _ => VantagePointType::Unknown,
        };
        let header = QlogSeq {
            file_schema: qlog::QLOGFILESEQ_URI.to_string(),
            serialization_format: "application/qlog+json-seq".to_string(),
            title: Some(title.to_string()),
            description: Some("Nesquic measurements of a QUIC library under test".to_string()),
            trace: TraceSeq {
                title: Some(format!("{title} ({vantage})")),
                description: None,
                common_fields: Some(CommonFields {
                    protocol_types: Some(vec!["QUIC".to_string()]),
                    reference_time: ReferenceTime {
                        clock_type: "system".to_string(),
                        epoch: time::rfc3339(reference_wall),
                        wall_clock_time: None,
                    },
                    time_format: Some(TimeFormat::RelativeToEpoch),
                    ..CommonFields::default()
                }),
                vantage_point: Some(VantagePoint { name: Some(format!("nesquic-{vantage}")), ty, flow: None }),
                event_schemas: vec![NESQUIC_SCHEMA.to_string(), QUIC_SCHEMA.to_string()],
            },
        };
        let body = serde_json::to_string(&header)
            .map_err(|source| RecordError::Json { what: "the qlog header".into(), source })?;
        // qvis recognises JSON-SEQ only by these two (older) fields in the first 1024 bytes.
        // Invariant: a struct serialises as a JSON object.
        let rest = body.strip_prefix('{').unwrap_or(&body);
        let mut out = BufWriter::new(file);
        writeln!(out, "\x1e{{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",{rest}")
            .map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
        Ok(Self { out, path: path.to_path_buf(), reference, last_ms: 0.0 })
    }

    /// Appends one event, stamped now.
    pub fn event(&mut self, event: &Event) -> Result<()> {
        let ms = (self.reference.elapsed().as_secs_f64() * 1e3).max(self.last_ms);
        self.last_ms = ms;
        self.event_at(ms, event)
    }

    /// Appends one event stamped `ms` (on this trace's clock), which may be earlier than events
    /// already written: the caller sorts the file afterwards (see `record::merge_lut_qlog`).
    pub fn event_at(&mut self, ms: f64, event: &Event) -> Result<()> {
        #[derive(Serialize)]
        struct Record<'a> {
            time: f64,
            #[serde(flatten)]
            event: &'a Event,
        }
        let line = serde_json::to_string(&Record { time: ms, event })
            .map_err(|source| RecordError::Json { what: format!("qlog event {}", event.name()), source })?;
        writeln!(self.out, "\x1e{line}").map_err(|source| RecordError::Io { path: self.path.clone(), source })
    }

    /// Writes out what is buffered: the file then ends with a whole record.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|source| RecordError::Io { path: self.path.clone(), source })
    }

    /// Flushes to disk.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.flush()?;
        Ok(self.path)
    }
}
